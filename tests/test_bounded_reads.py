"""Every file tiercast reads is bounded before parsing, and only regular files are read."""

from __future__ import annotations

import os
import threading
import time
import tracemalloc
import zipfile
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster import series as series_module
from forecaster.errors import BadInputError, DataError
from forecaster.estimators import make
from forecaster.series import MAX_HISTORY_BYTES, MAX_LINE_BYTES, read_history_csv
from forecaster.store import MAX_ARTIFACT_BYTES, ModelStore
from scaler.config import MAX_CONFIG_BYTES, ConfigError, load_config

METHOD = "seasonal_naive_1d"


def one_line_error(
    call: Callable[[], object], error: type[BadInputError], fifo: Path | None = None
) -> str:
    """The message ``call`` fails with, checked to be one line; fails (never hangs) on a block.

    Where ``call`` reads ``fifo``, a reader blocked on it is released after 5 s by opening
    and closing the write end, so a regression fails the test instead of hanging it.
    """
    outcome: dict[str, BaseException | None] = {}

    def target() -> None:
        try:
            call()
            outcome["error"] = None
        except BaseException as exc:  # reported below, on the test's thread
            outcome["error"] = exc

    worker = threading.Thread(target=target, daemon=True)
    started = time.monotonic()
    worker.start()
    worker.join(5)
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))
        worker.join(5)
        pytest.fail(f"reading {fifo.name} blocked until a writer appeared")
    assert not worker.is_alive(), "the read did not finish within 5 s"
    assert time.monotonic() - started < 5
    exc = outcome["error"]
    assert isinstance(exc, error), f"expected {error.__name__}, got {exc!r}"
    message = str(exc)
    assert "\n" not in message and len(message) < 300
    return message


# The config file


def test_a_config_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "config.yaml"
    os.mkfifo(fifo)
    message = one_line_error(lambda: load_config(fifo), ConfigError, fifo)
    assert "config.yaml" in message and "FIFO" in message


def test_a_config_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    folder = tmp_path / "config.yaml"
    folder.mkdir()
    message = one_line_error(lambda: load_config(folder), ConfigError)
    assert "config.yaml" in message and "directory" in message


def test_a_config_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.yaml"
    with path.open("wb") as handle:
        handle.truncate(MAX_CONFIG_BYTES + 1)  # sparse: nothing is written
    message = one_line_error(lambda: load_config(path), ConfigError)
    assert "huge.yaml" in message and str(MAX_CONFIG_BYTES) in message


# The history CSV


def test_a_history_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "history.csv"
    os.mkfifo(fifo)
    message = one_line_error(lambda: read_history_csv(fifo), DataError, fifo)
    assert "history.csv" in message and "FIFO" in message


def test_a_history_over_the_bound_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.csv"
    with path.open("wb") as handle:
        handle.truncate(MAX_HISTORY_BYTES + 1)
    message = one_line_error(lambda: read_history_csv(path), DataError)
    assert "huge.csv" in message and str(MAX_HISTORY_BYTES) in message


def test_a_history_line_over_the_bound_is_refused_quickly(tmp_path: Path) -> None:
    path = tmp_path / "long.csv"
    name = "s" * (2 * MAX_LINE_BYTES)  # pandas would read it; a 50 MB one takes it minutes
    path.write_text(f"timestamp,series,value\n2026-01-01T00:00:00Z,{name},1\n")
    message = one_line_error(lambda: read_history_csv(path), DataError)
    assert "long.csv" in message and "line 2" in message and str(MAX_LINE_BYTES) in message


@pytest.mark.parametrize("chunk", [1, 3, 7, 64])
def test_long_lines_are_found_across_scan_chunks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, chunk: int
) -> None:
    monkeypatch.setattr(series_module, "MAX_LINE_BYTES", 10)
    monkeypatch.setattr(series_module, "_SCAN_CHUNK_BYTES", chunk)
    for lines, bad in (
        (["a" * 10, "b" * 3, "", "c" * 11, "d"], 4),
        (["a" * 10, "b" * 10], None),
        (["x" * 11], 1),
        (["x", "y" * 20], 2),  # the last line, with no newline after it
    ):
        path = tmp_path / "lines.csv"
        path.write_bytes("\n".join(lines).encode())
        with path.open("rb") as handle:
            if bad is None:
                series_module._check_lines(handle, path)
            else:
                with pytest.raises(DataError, match=f"line {bad}:"):
                    series_module._check_lines(handle, path)


def test_a_history_within_the_bounds_still_reads(tmp_path: Path) -> None:
    path = tmp_path / "rps.csv"
    rows = [f"2026-01-01T{h:02d}:00:00Z,{10 + h}" for h in range(24)]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    history = read_history_csv(path)
    assert list(history) == ["rps"] and len(history["rps"]) == 24


# The model store's archives


def _series() -> pd.Series:
    index = pd.date_range("2026-02-02", periods=12 * 24, freq="1h", name="timestamp")
    values = 100 + 40 * np.sin(2 * np.pi * index.hour.to_numpy() / 24)
    return pd.Series(values, index=index, name="rps")


def _store(path: Path) -> ModelStore:
    return ModelStore(path, max_age_s=86400, clock=lambda: 1_800_000_000.0)


def _npy_header(shape: tuple[int, ...], descr: str = "<f8") -> bytes:
    """A version 1.0 ``.npy`` header declaring ``shape``, written by hand (numpy would allocate)."""
    text = repr({"descr": descr, "fortran_order": False, "shape": shape}).encode("latin1")
    pad = 64 - (10 + len(text) + 1) % 64
    text += b" " * pad + b"\n"
    return b"\x93NUMPY\x01\x00" + len(text).to_bytes(2, "little") + text


def _planted_store(tmp_path: Path, members: Callable[[zipfile.ZipFile], None]) -> Path:
    """A store holding a real entry whose archive has its ``a0.npy`` written by ``members``."""
    _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD))
    archive = next(tmp_path.glob("*.npz"))
    with zipfile.ZipFile(archive) as real:
        kept = {i.filename: real.read(i) for i in real.infolist() if i.filename != "a0.npy"}
    with zipfile.ZipFile(archive, "w", zipfile.ZIP_DEFLATED) as forged:
        for name, data in kept.items():
            forged.writestr(name, data)
        members(forged)
    return archive


def test_a_forged_huge_shape_is_refused_without_allocating(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    def forged(archive: zipfile.ZipFile) -> None:
        # Declares 10**10 float64 (80 GB) over 64 bytes of data: numpy allocates the shape first.
        archive.writestr("a0.npy", _npy_header((10**10,)) + bytes(64))

    archive = _planted_store(tmp_path, forged)
    assert archive.stat().st_size < 64 * 1024
    tracemalloc.start()
    try:
        outcome = _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024
    assert not outcome.reused and "refused" in outcome.note and "a0.npy" in outcome.note
    assert "refitting" in caplog.text
    # The refit replaced the forged archive with one that reads back.
    assert _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD)).reused


@pytest.mark.slow
def test_a_member_that_inflates_past_the_bound_is_refused_unread(tmp_path: Path) -> None:
    size = MAX_ARTIFACT_BYTES // 8 + 1  # float64s, one more than the bound holds

    def inflating(archive: zipfile.ZipFile) -> None:
        zeros = bytes(8 * 1024 * 1024)
        with archive.open("a0.npy", "w", force_zip64=True) as member:
            member.write(_npy_header((size,)))
            left = 8 * size
            while left:
                member.write(zeros[: min(left, len(zeros))])
                left -= min(left, len(zeros))

    archive = _planted_store(tmp_path, inflating)
    assert archive.stat().st_size < 2 * 1024 * 1024  # small on disk, 256 MiB inflated
    tracemalloc.start()
    try:
        outcome = _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024
    assert not outcome.reused and "refused" in outcome.note and "inflate" in outcome.note


def test_a_garbage_archive_is_still_unreadable_not_refused(tmp_path: Path) -> None:
    _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD))
    next(tmp_path.glob("*.npz")).write_bytes(b"PK\x03\x04 not a zip")
    outcome = _store(tmp_path).get_or_fit(_series(), METHOD, lambda: make(METHOD))
    assert not outcome.reused and "unreadable" in outcome.note


def test_a_signing_key_that_is_a_device_or_too_large_is_one_line(tmp_path: Path) -> None:
    from forecaster.artifacts import MAX_SIGNING_KEY_BYTES, load_signing_key

    fifo = tmp_path / "key.fifo"
    os.mkfifo(fifo)
    big = tmp_path / "key.big"
    with big.open("wb") as f:
        f.truncate(MAX_SIGNING_KEY_BYTES + 1)
    for path in (fifo, big):
        with pytest.raises(BadInputError) as err:
            load_signing_key(path)
        assert "model_store.signing_key_file" in str(err.value) and "\n" not in str(err.value)


# Node lists and mig-parted configs (#50 finding 5): one line naming the file and the field.


def _inventory(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    from scaler.cli import main

    capsys.readouterr()
    code = main(["inventory", *argv])
    err = capsys.readouterr().err
    return code, err


NODE = {"kind": "Node", "metadata": {"name": "gpu-1", "labels": {"tiercast.io/pool": "h100"}}}


def _node_list(**changes: object) -> bytes:
    import copy
    import json

    node: dict[str, object] = copy.deepcopy(NODE)
    for path, value in changes.items():
        target: dict[str, object] = node
        parts = path.split("__")
        for part in parts[:-1]:
            target = target.setdefault(part, {})  # type: ignore[assignment]
        target[parts[-1]] = value
    return json.dumps({"kind": "List", "items": [node]}).encode()


BAD_NODES = [
    ("labels-a-list", _node_list(metadata__labels=["a"]), "items[0].metadata.labels"),
    ("label-value-int", _node_list(metadata__labels={"x": 1}), "items[0].metadata.labels.x"),
    ("metadata-a-string", _node_list(metadata="gpu-1"), "items[0].metadata"),
    ("status-a-list", _node_list(status=[]), "items[0].status"),
    ("spec-a-string", _node_list(spec="x"), "items[0].spec"),
    ("allocatable-a-list", _node_list(status__allocatable=[1]), "items[0].status.allocatable"),
    ("conditions-a-mapping", _node_list(status__conditions={}), "items[0].status.conditions"),
    ("unschedulable-a-string", _node_list(spec__unschedulable="yes"), "spec.unschedulable"),
    ("items-a-mapping", b'{"kind": "List", "items": {"a": 1}}', "items"),
    ("item-a-number", b'{"kind": "List", "items": [7]}', "items[0]"),
    ("not-utf-8", b'\xff\xfe{"items": []}', "UTF-8"),
    ("json-nested-past-the-limit", b"[" * 100_000 + b"]" * 100_000, "nested"),
    ("yaml-nested-past-the-limit", b"a: " + b"[" * 5000 + b"]" * 5000, "nested"),
    ("unparseable-yaml", b"items: [\n", "neither JSON nor YAML"),
]


@pytest.mark.parametrize(("name", "content", "field"), BAD_NODES, ids=[b[0] for b in BAD_NODES])
def test_a_malformed_node_list_is_one_line_naming_the_field(
    name: str, content: bytes, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "nodes.json"
    path.write_bytes(content)
    code, err = _inventory(capsys, "--nodes", str(path))
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and len(lines[0]) < 300, err
    assert "nodes.json" in lines[0] and field in lines[0], lines[0]


def test_a_node_list_that_is_a_device_or_a_fifo_is_refused_without_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.cli.inventory import nodes_from_file

    message = one_line_error(lambda: nodes_from_file("/dev/zero"), BadInputError)
    assert "character device" in message
    fifo = tmp_path / "nodes.json"
    os.mkfifo(fifo)
    message = one_line_error(lambda: nodes_from_file(str(fifo)), BadInputError, fifo)
    assert "FIFO" in message


def test_a_well_formed_node_list_still_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.cli.inventory import nodes_from_file

    path = tmp_path / "nodes.yaml"
    path.write_bytes(
        _node_list(
            status={"allocatable": {"nvidia.com/gpu": "8", "cpu": 96}, "conditions": []},
            spec={"unschedulable": True, "taints": [{"key": "k", "effect": "NoSchedule"}]},
        )
    )
    (node,) = nodes_from_file(str(path))
    assert node["metadata"]["labels"] == {"tiercast.io/pool": "h100"}
    assert node["status"]["allocatable"]["nvidia.com/gpu"] == "8"
    assert node["spec"]["taints"][0]["key"] == "k"


MIG = b"version: v1\nmig-configs:\n  all-1g:\n  - devices: all\n    mig-enabled: true\n"
BAD_MIG_PARTED = [
    ("unparseable-yaml", b"version: v1\nmig-configs: {a: [\n", "neither JSON nor YAML"),
    ("not-utf-8", b"\xff\xfeversion: v1\n", "UTF-8"),
    ("configs-a-number", b"version: v1\nmig-configs:\n  a: 5\n", "mig-configs.a"),
    ("mig-enabled-a-string", MIG.replace(b"true", b"'yes'"), "mig-configs.all-1g[0].mig-enabled"),
    ("devices-a-string", MIG.replace(b"all\n", b"some\n"), "mig-configs.all-1g[0].devices"),
    (
        "configmap-unparseable",
        b'data:\n  config.yaml: "mig-configs: {a: [\\n"\n',
        "neither JSON nor YAML",
    ),
    ("configmap-config-a-list", b"data:\n  config.yaml: [1]\n", "data.config.yaml"),
    ("nested-past-the-limit", b"mig-configs: " + b"[" * 5000 + b"]" * 5000, "nested"),
]


@pytest.mark.parametrize(
    ("name", "content", "field"), BAD_MIG_PARTED, ids=[b[0] for b in BAD_MIG_PARTED]
)
def test_a_malformed_mig_parted_config_is_one_line_naming_the_field(
    name: str, content: bytes, field: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    nodes = tmp_path / "nodes.json"
    nodes.write_bytes(_node_list())
    path = tmp_path / "mig.yaml"
    path.write_bytes(content)
    code, err = _inventory(capsys, "--nodes", str(nodes), "--mig-parted", str(path))
    assert code == 2, err
    lines = [line for line in err.strip().splitlines() if "note:" not in line]
    assert len(lines) == 1 and len(lines[0]) < 300, err
    assert "mig.yaml" in lines[0] and field in lines[0], lines[0]


def test_a_nul_byte_in_a_path_is_one_line() -> None:
    from forecaster.documents import read_document

    message = one_line_error(lambda: read_document("a\x00b", 100, "--nodes"), BadInputError)
    assert "NUL" in message and "--nodes" in message


@pytest.mark.parametrize(
    "text",
    ["mig-configs: " + "[" * 5000 + "]" * 5000, "- 1\n- 2\n", "a: " + "[" * 3000],
    ids=["nested-past-the-limit", "a-list", "unparseable"],
)
def test_a_mig_parted_configmap_from_the_cluster_is_read_the_bounded_way(text: str) -> None:
    """The cycle's and the inventory's ConfigMaps: a RecursionError or AttributeError
    stopped the whole cycle; now the config is refused in one line (or the node's own
    copy is left out)."""
    from scaler.actuation.kube.inventory import node_mig_configs
    from scaler.actuation.kube.mig_parted import MigConfigRefused, MigPartedConfig
    from scaler.actuation.kube.transport import MemoryTransport, Session
    from scaler.config import KubernetesConfig

    kube = KubernetesConfig()
    store = MemoryTransport()
    ns = kube.gpu_operator_namespace
    path = f"/api/v1/namespaces/{ns}/configmaps/custom-mig-parted-config"
    store.add(path, {"metadata": {"name": "custom"}, "data": {"config.yaml": text}})
    store.add(
        f"/api/v1/namespaces/{ns}/configmaps/gpu-1-mig-config",
        {"metadata": {"name": "gpu-1-mig-config"}, "data": {"config.yaml": text}},
    )
    session = Session(store)
    with pytest.raises(MigConfigRefused) as caught:
        MigPartedConfig(session, kube).read(path)
    assert "\n" not in str(caught.value) and len(str(caught.value)) < 300
    assert node_mig_configs(session, ns, ["gpu-1"]) == {}
