"""The node agent against the fake NVML backend: reads, metrics, applying layouts, errors."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pynvml
import pytest
import yaml

from scaler.agent.node import Agent, StaticGate, apply_layout, current_layouts, load_desired, serve
from scaler.agent.nvml import FakeNvml, NvmlError
from scaler.catalog.mig import Layout
from scaler.cli import main
from tests.conftest import REPO
from tests.fake_kube import gpu_node, kubeconfig_for, start_fake

BALANCED = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "1g.10gb": 4}}]


def desired(fake: FakeNvml, entry: object) -> dict[int, Layout]:
    models = {g.index: g.model or "" for g in fake.gpus()}
    return load_desired(json.dumps(entry), models, None, "test")


def test_apply_creates_verifies_and_is_idempotent() -> None:
    fake = FakeNvml(["A100-80GB", "A100-80GB"])
    report = apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    assert report.outcome == "success", report.message
    assert current_layouts(fake) == {i: Layout.of({"3g.40gb": 1, "1g.10gb": 4}) for i in (0, 1)}
    # The 3g instance had to go at slice 4 so that four 1g instances fit before it.
    starts = sorted((gi.start, gi.profile) for gi in fake.gpu_instances(0))
    assert starts[-1] == (4, "3g.40gb")
    assert all(len(gi.compute_instances) == 1 for gi in fake.gpu_instances(0))
    n_calls = len(fake.calls)
    again = apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    assert again.outcome == "success" and {r.outcome for r in again.gpus} == {"unchanged"}
    mutating = {"create_gpu_instance", "destroy_gpu_instance", "set_mig_mode"}
    assert not [c for c in fake.calls[n_calls:] if c[0] in mutating]


def test_back_to_whole_disables_mig() -> None:
    fake = FakeNvml(["H100-80GB"])
    apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    report = apply_layout(
        fake, desired(fake, [{"devices": "all", "mig-enabled": False}]), StaticGate(True)
    )
    assert report.outcome == "success", report.message
    assert current_layouts(fake) == {0: Layout(whole=True)}
    assert not fake.gpus()[0].mig_current


def test_refuses_while_processes_run_or_node_is_not_cordoned() -> None:
    fake = FakeNvml(["A100-80GB"])
    fake.add_process(0, pid=4242)
    report = apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    assert report.outcome == "refused" and "pid 4242" in report.message
    fake.kill_processes(0)
    report = apply_layout(fake, desired(fake, BALANCED), StaticGate(False))
    assert report.outcome == "refused" and "not cordoned" in report.message
    assert current_layouts(fake) == {0: Layout(whole=True)}


@pytest.mark.parametrize(
    ("setup", "name"),
    [
        (lambda f: setattr(f, "privileged", False), "NVML_ERROR_NO_PERMISSION"),
        (
            lambda f: f.fail_next("create_gpu_instance", pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES),
            "NVML_ERROR_INSUFFICIENT_RESOURCES",
        ),
    ],
)
def test_nvml_errors_are_reported_by_name(setup: object, name: str) -> None:
    fake = FakeNvml(["A100-80GB"])
    setup(fake)  # type: ignore[operator]
    report = apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    assert report.outcome == "failed" and name in report.message


def test_pending_reset_is_reported() -> None:
    fake = FakeNvml(["A100-80GB"], reset_required=True)
    report = apply_layout(fake, desired(fake, BALANCED), StaticGate(True))
    assert report.outcome == "failed" and report.gpus[0].outcome == "pending-reset"
    fake.reset(0)
    assert apply_layout(fake, desired(fake, BALANCED), StaticGate(True)).outcome == "success"


def test_fake_enforces_nvml_placement_rules() -> None:
    fake = FakeNvml(["A100-80GB", "A30-24GB"])

    def code(fn: object, *args: object) -> int:
        with pytest.raises(NvmlError) as exc:
            fn(*args)  # type: ignore[operator]
        assert isinstance(exc.value.__cause__, pynvml.NVMLError)
        assert exc.value.__cause__.value == exc.value.code
        return exc.value.code

    assert (
        code(fake.create_gpu_instance, 0, "1g.10gb", 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    )  # MIG off
    fake.set_mig_mode(0, True)
    assert code(fake.create_gpu_instance, 0, "2g.20gb", 1) == pynvml.NVML_ERROR_INVALID_ARGUMENT
    assert code(fake.create_gpu_instance, 0, "1g.6gb", 0) == pynvml.NVML_ERROR_NOT_SUPPORTED
    gi = fake.create_gpu_instance(0, "4g.40gb", 0)
    assert (
        code(fake.create_gpu_instance, 0, "4g.40gb", 0) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    assert (
        code(fake.create_gpu_instance, 0, "3g.40gb", 0) == pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    # NVML creates 3g at slice 4 beside 4g at 0; possible placements ignore occupancy.
    three = fake.create_gpu_instance(0, "3g.40gb", 4)
    assert fake.possible_placements(0, "2g.20gb") == [(0, 2), (2, 2), (4, 2)]
    assert code(fake.create_gpu_instance, 0, "1g.10gb", 6) == (
        pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES
    )
    fake.destroy_gpu_instance(0, three)
    fake.create_compute_instance(0, gi)
    assert code(fake.destroy_gpu_instance, 0, gi) == pynvml.NVML_ERROR_IN_USE
    fake.add_process(0, pid=7, gpu_instance=gi)
    assert code(fake.destroy_compute_instance, 0, gi, 0) == pynvml.NVML_ERROR_IN_USE
    assert code(fake.set_mig_mode, 0, False) == pynvml.NVML_ERROR_IN_USE
    assert fake.gpus()[0].utilization_percent is None  # NVML has none in MIG mode


def test_metrics_and_state_over_http() -> None:
    fake = FakeNvml(["A100-80GB"])
    agent = Agent(fake, StaticGate(True), lambda: json.dumps(BALANCED))
    assert agent.reconcile() is not None
    server = serve(agent, "127.0.0.1", 0)
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        metrics = urllib.request.urlopen(base + "/metrics", timeout=5).read().decode()
        assert 'tiercast_mig_instance_info{gpu="0"' in metrics and 'profile="3g.40gb"' in metrics
        assert 'tiercast_agent_applies{outcome="success"} 1.0' in metrics
        state = json.loads(urllib.request.urlopen(base + "/state", timeout=5).read())
        assert state["layouts"] == {"0": "1g.10gb:4,3g.40gb:1"}
        assert state["last_apply"]["outcome"] == "success"
    finally:
        server.shutdown()


def test_agent_without_a_driver_exits_with_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    try:
        pynvml.nvmlInit()
        pynvml.nvmlShutdown()
        pytest.skip("this machine has an NVIDIA driver")
    except pynvml.NVMLError:
        pass
    assert main(["agent", "--once"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no usable NVIDIA driver" in err


def test_agent_once_applies_a_mig_parted_file(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "mig.yaml").write_text(
        yaml.safe_dump(
            {
                "version": "v1",
                "mig-configs": {
                    "all-balanced": BALANCED,
                    "off": [{"devices": "all", "mig-enabled": False}],
                },
            }
        )
    )
    args = ["agent", "--once", "--fake-gpus", "A100-80GB,A100-80GB", "--desired-file", "mig.yaml"]
    assert main([*args, "--config-name", "all-balanced", "--assume-cordoned"]) == 0
    state = json.loads(capsys.readouterr().out)
    assert state["mig_config"] == "all-3g.40gb-4x1g.10gb"
    assert main(args) == 2  # two configs and none named
    assert "--config-name" in capsys.readouterr().err
    assert main([*args, "--config-name", "all-balanced"]) == 1  # not cordoned: refused
    assert json.loads(capsys.readouterr().out)["last_apply"]["outcome"] == "refused"


@pytest.mark.slow  # a fake API server and the client's first connections: about 1.3 s
def test_agent_reads_the_cordon_through_the_kubeconfig_it_is_given(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    fake = start_fake()
    try:
        fake.create("/api/v1/nodes", gpu_node("gpu-1", {}, unschedulable=True))
        fake.create("/api/v1/nodes", gpu_node("gpu-2", {}))
        (workdir / "kubeconfig").write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
        (workdir / "mig.yaml").write_text(
            yaml.safe_dump({"version": "v1", "mig-configs": {"all-balanced": BALANCED}})
        )
        args = ["agent", "--once", "--fake-gpus", "A100-80GB", "--desired-file", "mig.yaml"]
        args += ["--kubeconfig", "kubeconfig", "--context", "fake"]
        # Drained: the layout is applied; schedulable: refused, nothing changed.
        assert main([*args, "--node", "gpu-1"]) == 0
        assert json.loads(capsys.readouterr().out)["last_apply"]["outcome"] == "success"
        assert main([*args, "--node", "gpu-2"]) == 1
        assert json.loads(capsys.readouterr().out)["last_apply"]["outcome"] == "refused"
        assert not fake.writes()
        # A context the kubeconfig does not hold: one line naming it.
        assert main([*args, "--node", "gpu-1", "--context", "elsewhere"]) == 2
        err = capsys.readouterr().err.strip()
        assert err.count("\n") == 0 and "--context elsewhere" in err
    finally:
        fake.stop()


def test_daemonset_manifest_is_valid() -> None:
    import kubernetes_validate

    doc = yaml.safe_load((REPO / "deploy" / "base" / "node-agent-daemonset.yaml").read_text())
    kubernetes_validate.validate(doc, "1.31", strict=True)
    args = doc["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[0] == "agent" and not any("annotation" in a for a in args)
    env = {
        e["name"]: e.get("value") for e in doc["spec"]["template"]["spec"]["containers"][0]["env"]
    }
    assert env["NVIDIA_MIG_MONITOR_DEVICES"] == "all"


@pytest.mark.parametrize(
    ("name", "gib", "model"),
    [
        ("NVIDIA A100-SXM4-80GB", 79.2, "A100-80GB"),
        ("NVIDIA A100-PCIE-40GB", 39.4, "A100-40GB"),
        ("NVIDIA H100 80GB HBM3", 79.6, "H100-80GB"),
        ("NVIDIA H100 PCIe", 79.6, "H100-80GB"),
        ("NVIDIA H100 NVL", 93.6, "H100-NVL-94GB"),
        ("NVIDIA H200", 140.4, "H200-141GB"),
        ("NVIDIA B200", 178.4, "B200-180GB"),
        ("NVIDIA H20", 95.6, "H20-96GB"),
        ("NVIDIA RTX PRO 6000 Blackwell Server Edition", 95.0, "RTX-PRO-6000-96GB"),
        ("NVIDIA A30", 23.5, "A30-24GB"),
        ("NVIDIA L4", 22.5, None),
        ("Tesla T4", 15.0, None),
    ],
)
def test_the_agent_names_every_catalog_mig_part_from_nvml(
    name: str, gib: float, model: str | None
) -> None:
    from scaler.agent.nvml import model_from_name

    assert model_from_name(name, int(gib * 2**30)) == model
