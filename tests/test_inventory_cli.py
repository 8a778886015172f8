"""``tiercast inventory``: what the planner reads of each node, from a file or the cluster.

Nodes are labelled as GPU feature discovery and the device plugin label them for each
MIG strategy (``tests/gpu_operator.py`` :func:`gfd_view`).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.cli import main
from tests.fake_kube import kubeconfig_for, start_fake
from tests.gpu_operator import default_mig_parted_config, operator_node, seed_operator_cluster

POOL = {"tiercast.io/pool": "h100"}


def write_config(folder: Path) -> None:
    config = {
        "signals": [{"name": "rps"}],
        "workloads": [
            {"name": "w", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 1.0}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "reserved",
                "gpu_model": "H100-80GB",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.5,
                "min_nodes": 1,
                "max_nodes": 4,
                "mig_layouts": [],
                "provider": {"kind": "placeholder"},
            }
        ],
    }
    (folder / "config.yaml").write_text(yaml.safe_dump(config))


def nodes() -> list[dict[str, Any]]:
    single = operator_node(
        "single-1", POOL, mig_config="all-1g.10gb", strategy="single", mig_devices={"1g.10gb": 56}
    )
    me = operator_node("me-1", POOL, mig_config="all-1g.10gb.me", mig_devices={"1g.10gb+me": 8})
    shared = operator_node("shared-1", POOL, strategy="none")
    shared["metadata"]["labels"] |= {
        "nvidia.com/gpu.replicas": "4",
        "nvidia.com/gpu.sharing-strategy": "time-slicing",
        "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED",
    }
    stray = operator_node("other-1", {}, product="NVIDIA-A100-SXM4-80GB", strategy="none")
    return [single, me, shared, stray]


def test_inventory_from_a_kubectl_file(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    write_config(workdir)
    (workdir / "nodes.json").write_text(json.dumps({"kind": "List", "items": nodes()}))
    (workdir / "mig.yaml").write_text(yaml.safe_dump(default_mig_parted_config()))
    argv = ["inventory", "-c", "config.yaml", "--nodes", "nodes.json", "--mig-parted", "mig.yaml"]
    assert main([*argv, "-o", "json"]) == 0
    rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
    single = rows["single-1"]
    # Under mig.strategy=single GFD's gpu.count is the 56 MIG devices: the GPUs are 8.
    assert (single["gpus"], single["mig_strategy"], single["held"]) == (8, "single", False)
    assert single["layout"] == "8 x 1g.10gb:7" and single["model"] == "H100-80GB"
    me = rows["me-1"]
    assert (me["gpus"], me["layout"], me["held"]) == (8, "8 x 1g.10gb+me:1", False), me["why"]
    assert rows["shared-1"]["sharing"] == "time-slicing x4"
    assert rows["shared-1"]["gpus"] == 8
    other = rows["other-1"]
    assert other["pool"] is None and other["model"] == "A100-80GB" and "not counted" in other["why"]
    assert main(argv) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split()[:3] == ["NODE", "POOL", "MODEL"]
    assert "time-slicing x4" in table and "8 x 1g.10gb:7" in table


def test_inventory_reads_the_cluster(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    fake = start_fake()
    try:
        seed_operator_cluster(fake, strategy="single")
        for node in nodes()[:2]:
            fake.create("/api/v1/nodes", node)
        write_config(workdir)
        (workdir / "kubeconfig").write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
        argv = ["inventory", "-c", "config.yaml", "--kubeconfig", "kubeconfig", "-o", "json"]
        assert main(argv) == 0
        rows = {r["name"]: r for r in json.loads(capsys.readouterr().out)}
        assert rows["single-1"]["gpus"] == 8 and rows["single-1"]["held"] is False
        # GFD's own label says mixed; the ClusterPolicy's single is only a fallback.
        assert rows["me-1"]["mig_strategy"] == "mixed" and rows["me-1"]["held"] is False
        assert not fake.writes()
    finally:
        fake.stop()


def test_a_file_that_is_not_a_node_list_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "nodes.json").write_text(json.dumps({"kind": "List", "items": [{"kind": "Pod"}]}))
    assert main(["inventory", "--nodes", "nodes.json"]) == 2
    err = capsys.readouterr().err
    assert "kubectl get nodes -o json" in err and len(err.strip().splitlines()) == 1
