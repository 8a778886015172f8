"""``tiercast run`` with Kubernetes pools: the demo dry-run lists its calls; a live run acts once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.cli import main
from scaler.inputs.demo import DEMO_CONFIG
from tests.fake_kube import FakeKube, gpu_node, kubeconfig_for, start_fake

MD = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments/gpu-md"


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_demo_dry_run_lists_the_exact_kubernetes_calls_per_action(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["run", "--dry-run", "-v"]) == 0  # -v: each write with its body
    out = capsys.readouterr().out
    lines = out.splitlines()
    kube_pools = {
        p["name"]
        for p in DEMO_CONFIG["pools"]
        if p.get("provider", {}).get("kind") not in (None, "recording")
    }
    acted = [
        i
        for i, line in enumerate(lines)
        if line.startswith("recorded: ") and line.split()[1] in kube_pools
    ]
    assert acted, out
    for i in acted:
        if "no change" in lines[i] or "already" in lines[i]:
            continue
        call = lines[i + 1]
        assert call.startswith(
            ("    PUT /apis/", "    PATCH /apis/", "    POST /apis/", "    PATCH /api/v1/nodes/")
        ), (
            lines[i],
            call,
        )
        assert "{" in call  # the body is printed with the call


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    f.create(
        "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machinedeployments",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "gpu-md"},
            "spec": {"replicas": 2, "clusterName": "c1"},
        },
    )
    for name in ("md-a", "md-b"):
        # Cluster API labels the Machine; its status.nodeRef names the Node.
        f.create(
            "/apis/cluster.x-k8s.io/v1beta1/namespaces/default/machines",
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Machine",
                "metadata": {
                    "name": f"gpu-md-{name}",
                    "labels": {"cluster.x-k8s.io/deployment-name": "gpu-md"},
                },
                "status": {"nodeRef": {"kind": "Node", "name": name}},
            },
        )
        f.create("/api/v1/nodes", gpu_node(name, {}))
    yield f
    f.stop()


def write_inputs(workdir: Path, fake: FakeKube) -> list[str]:
    (workdir / "kubeconfig").write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    index = pd.date_range("2026-11-20", periods=7 * 288, freq="5min")
    demand = 40 + 5 * np.sin(np.arange(len(index)) * 2 * np.pi / 288)
    pd.DataFrame({"timestamp": index, "value": demand}).to_csv(workdir / "gpus.csv", index=False)
    config = {
        "signals": [{"name": "gpus", "file": "gpus.csv"}],
        "workloads": [
            {"name": "serve", "signal": "gpus", "gpu_model": "H100-80GB", "units_per_replica": 1}
        ],
        "pools": [
            {
                "name": "capi",
                "tier": "on-demand",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "max_nodes": 12,
                "provider": {"kind": "cluster-api", "machine_deployment": "gpu-md"},
            }
        ],
        "kubernetes": {"request_timeout_s": 2},
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(config))
    return ["run", "--config", "config.yaml", "--kubeconfig", "kubeconfig"]


@pytest.mark.slow
def test_live_run_scales_once_and_a_second_run_changes_nothing(
    workdir: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = write_inputs(workdir, fake)
    assert main(argv) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    replicas = fake.get(MD)["spec"]["replicas"]
    assert replicas > 2  # 40-45 GPUs of demand need more than two 8-GPU nodes
    assert f"PUT {MD}/scale" in out
    assert [(r.method, r.path) for r in fake.writes()] == [
        ("PUT", f"{MD}/scale"),
        ("POST", "/apis/events.k8s.io/v1/namespaces/default/events"),  # on the MachineDeployment
    ]
    # No machine controller in the fake: still two nodes, the same plan, nothing to write.
    assert main(argv) == 0
    assert len(fake.writes()) == 2 and fake.get(MD)["spec"]["replicas"] == replicas


@pytest.mark.parametrize("flag", ["--dry-run=server", "--server-dry-run"])
@pytest.mark.slow
def test_server_dry_run_against_the_cluster_persists_nothing(
    workdir: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str], flag: str
) -> None:
    # --dry-run=server, and for one release the old --server-dry-run with its notice.
    argv = write_inputs(workdir, fake)
    assert main([*argv, flag]) == 0, capsys.readouterr()
    out, err = capsys.readouterr()
    assert "dryRun=All" in out
    notice = "tiercast: --server-dry-run is deprecated; use --dry-run=server"
    assert (notice in err) == (flag == "--server-dry-run")
    assert fake.writes() and all(r.query == {"dryRun": "All"} for r in fake.writes())
    assert fake.get(MD)["spec"]["replicas"] == 2


def test_server_dry_run_without_a_cluster_is_bad_input(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    assert main(["run", "--dry-run=server"]) == 2
    assert "--dry-run=server needs a cluster" in capsys.readouterr().err


def test_a_live_run_without_cluster_credentials_hints_at_the_dry_run(
    workdir: Path, fake: FakeKube, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = write_inputs(workdir, fake)
    argv[argv.index("kubeconfig")] = "missing-kubeconfig"
    assert main(argv) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "missing-kubeconfig" in line
    assert line.endswith("run with --dry-run to plan without a cluster")
    assert fake.writes() == []
