"""Where tiercast writes: only where the config or a flag says, else the state directory.

A dry-run in any folder leaves that folder as it was: the plan JSON, the run records and
the model store go to ``--state-dir``, ``service.state_dir``, ``$TIERCAST_STATE_DIR``, the
volume deploy/ mounts in a pod, ``$XDG_STATE_HOME/tiercast`` or ``~/.local/state/tiercast``,
in that order. (tests/conftest.py points ``$XDG_STATE_HOME`` at a temporary folder for
every test.)
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import pytest
import yaml

from scaler.cli import main
from scaler.config import ServiceConfig, parse_config
from scaler.inputs import loading
from scaler.inputs.loading import (
    default_state_dir,
    plan_path,
    service_with_state_paths,
    shown_path,
    with_state_paths,
)
from tests.conftest import REPO
from tests.fuzz_corpus import history_csv

SMALL = {
    "signals": [{"name": "rps", "unit": "requests/s"}],
    "workloads": [
        {"name": "chat", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 10}
    ],
    "pools": [
        {
            "name": "od",
            "tier": "on-demand",
            "gpu_model": "H100-80GB",
            "gpus_per_node": 8,
            "price_per_gpu_hour": 4.0,
            "current_nodes": 2,
        }
    ],
}


def _empty_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    cwd = tmp_path / "cwd"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


def _history(tmp_path: Path) -> Path:
    """A 3-day, 5-minute history outside the working folder."""
    path = tmp_path / "inputs" / "rps.csv"
    path.parent.mkdir()
    path.write_bytes(history_csv(days=3, step_s=300))
    return path


@pytest.mark.slow
def test_run_dry_run_and_plan_out_leave_an_empty_working_folder_empty(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("XDG_STATE_HOME")  # the HOME fallback: ~/.local/state/tiercast
    cwd = _empty_cwd(tmp_path, monkeypatch)
    history = _history(tmp_path)
    out_dir = tmp_path / "finance"

    assert main(["run", "--dry-run", "--history", str(history)]) == 0
    out = capsys.readouterr().out
    assert main(["plan", "--history", str(history), "--out-dir", str(out_dir)]) == 0
    planned = capsys.readouterr().out
    # `plan` sent nothing anywhere, so it prints no action as recorded or applied.
    assert "plan only: nothing was applied or recorded" in planned
    assert "recorded:" not in planned and "would scale" not in planned

    assert list(cwd.iterdir()) == []
    state = home / ".local" / "state" / "tiercast"
    assert (state / "tiercast-plan.json").is_file()
    assert (state / "tiercast-records.sqlite").is_file()
    assert any((state / "models").iterdir())
    assert "tiercast-plan.json" not in {p.name for p in out_dir.iterdir()}
    # It says where it wrote, in words that read the same on every machine (120 columns).
    assert (
        "plan written to ~/.local/state/tiercast/tiercast-plan.json\nrun record in "
        "~/.local/state/tiercast/tiercast-records.sqlite; models in ~/.local/state/tiercast/models"
    ) in out
    # ... and `history` finds that run with no flag.
    assert main(["history", "-o", "json"]) == 0
    assert [r["job"] for r in json.loads(capsys.readouterr().out)] == ["cycle"]


@pytest.mark.slow
def test_the_readme_first_command_writes_only_the_state_directory(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    state_dir: Path,
) -> None:
    cwd = _empty_cwd(tmp_path, monkeypatch)
    assert main(["run", "--dry-run"]) == 0
    assert f"plan written to {state_dir / 'tiercast-plan.json'}" in capsys.readouterr().out
    assert main(["plan", "--out-dir", str(tmp_path / "finance")]) == 0
    assert list(cwd.iterdir()) == []
    assert {p.name for p in state_dir.iterdir()} == {
        "tiercast-plan.json",
        "tiercast-records.sqlite",
        "models",
    }


def test_paths_the_config_or_a_flag_gives_are_used_as_given(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    cwd = _empty_cwd(tmp_path, monkeypatch)
    history = _history(tmp_path)
    config = {
        **SMALL,
        "signals": [{**SMALL["signals"][0], "file": str(history)}],
        "service": {"records_path": "runs.sqlite"},
        "model_store": {"path": str(tmp_path / "store")},
    }
    (tmp_path / "c.yaml").write_text(yaml.safe_dump(config))
    code = main(
        [
            "run",
            "--dry-run",
            "--config",
            str(tmp_path / "c.yaml"),
            "--plan-out",
            str(tmp_path / "p.json"),
        ]
    )
    assert code == 0, capsys.readouterr().err
    assert sorted(p.name for p in cwd.iterdir()) == ["runs.sqlite"]  # relative: the cwd
    assert (tmp_path / "p.json").is_file() and any((tmp_path / "store").iterdir())


def test_the_state_directory_in_order_of_precedence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    env = {"HOME": str(home)}
    assert default_state_dir(env) == home / ".local" / "state" / "tiercast"
    # A relative XDG_STATE_HOME is invalid by the XDG spec and ignored.
    assert default_state_dir({**env, "XDG_STATE_HOME": "rel"}) == home / ".local/state/tiercast"
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg")
    assert default_state_dir(env) == tmp_path / "xdg" / "tiercast"
    # In a pod that mounts deploy/'s volume, that volume.
    volume = tmp_path / "var-lib-tiercast"
    monkeypatch.setattr(loading, "IN_CLUSTER_STATE", volume)
    env["KUBERNETES_SERVICE_HOST"] = "10.0.0.1"
    assert default_state_dir(env) == tmp_path / "xdg" / "tiercast"  # not mounted here
    volume.mkdir()
    assert default_state_dir(env) == volume
    env["TIERCAST_STATE_DIR"] = str(tmp_path / "env")
    assert default_state_dir(env) == tmp_path / "env"

    monkeypatch.setenv("TIERCAST_STATE_DIR", str(tmp_path / "env"))
    config = parse_config({**SMALL, "service": {"state_dir": str(tmp_path / "cfg")}})
    assert with_state_paths(config).service.records_path == str(
        tmp_path / "cfg" / "tiercast-records.sqlite"
    )
    flag = argparse.Namespace(state_dir=str(tmp_path / "flag"), plan_out=None)
    resolved = with_state_paths(config, flag)
    assert resolved.model_store.path == str(tmp_path / "flag" / "models")
    assert resolved.service.report_out == str(tmp_path / "flag" / "reports")
    assert plan_path(resolved, flag) == str(tmp_path / "flag" / "tiercast-plan.json")
    # Resolving twice changes nothing (a cycle's loader resolves what run_once resolved).
    assert with_state_paths(resolved, flag) == resolved


def test_no_home_is_one_line_naming_the_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    from forecaster.errors import BadInputError

    monkeypatch.setattr(Path, "home", lambda: (_ for _ in ()).throw(RuntimeError("no home")))
    with pytest.raises(BadInputError, match=re.escape("--state-dir, service.state_dir or")):
        default_state_dir({})


def test_the_deploy_config_keeps_its_volume(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """deploy/base: the ConfigMap's config in a pod that mounts the state volume writes to
    the volume only: its model store is explicit, its records default into the volume."""
    manifest = yaml.safe_load((REPO / "deploy" / "base" / "configmap.yaml").read_text())
    config = parse_config(yaml.safe_load(manifest["data"]["config.yaml"]), "configmap")
    cron = yaml.safe_load((REPO / "deploy" / "base" / "cronjob.yaml").read_text())
    container = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    assert Path(mounts["state"]) == loading.IN_CLUSTER_STATE
    volume = tmp_path / "volume"
    volume.mkdir()
    monkeypatch.setattr(loading, "IN_CLUSTER_STATE", volume)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.0.0.1")
    monkeypatch.setenv("HOME", "/")  # a read-only root file system: never written
    resolved = with_state_paths(config)
    explicit = Path(config.model_store.path)
    assert explicit.is_absolute() and explicit.parent == Path(mounts["state"])
    assert resolved.model_store.path == config.model_store.path
    for path in (resolved.service.records_path, plan_path(resolved)):
        assert Path(path).parent == volume


def test_shown_paths_read_the_same_on_every_machine(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    cwd = _empty_cwd(tmp_path, monkeypatch)
    assert shown_path(tmp_path / "home" / ".local" / "x.json") == "~/.local/x.json"
    assert shown_path(cwd / "plan.json") == "plan.json"
    assert shown_path("rel/plan.json") == "rel/plan.json"
    assert shown_path("/elsewhere/plan.json") == "/elsewhere/plan.json"
    assert service_with_state_paths(ServiceConfig(records_path="r.db")).records_path == "r.db"


@pytest.mark.parametrize(
    ("section", "key"),
    [("service", "state_dir"), ("service", "records_path"), ("model_store", "path")],
)
def test_a_nul_byte_in_a_state_path_is_one_line_naming_the_field(
    section: str, key: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#50 finding 5: ``ValueError: embedded null byte`` from deep in the cycle was a traceback."""
    signals = [{"name": "rps", "file": str(_history(tmp_path)), "step_s": 300}]
    config = {**SMALL, "signals": signals, section: {key: "state\x00dir"}}
    path = tmp_path / "config.yaml"
    path.write_text(json.dumps(config))
    capsys.readouterr()
    code = main(["run", "--dry-run", "--config", str(path)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2, err
    assert len(err) == 1 and f"{section}.{key}" in err[0] and "NUL" in err[0], err
