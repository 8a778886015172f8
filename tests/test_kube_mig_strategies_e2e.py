"""End to end under the GPU Operator's Helm default ``mig.strategy=single``, and on ``.me`` layouts.

The shape of ``tests/test_kube_mig_e2e.py``: a fake API server holding a GPU Operator
install with Cluster API nodes, whose labels and resources are those GPU feature
discovery and the device plugin write for the strategy (``tests/gpu_operator.py``
:func:`gfd_view`, after NVIDIA/k8s-device-plugin ``internal/lm/mig-strategy.go`` and
``internal/rm/rm.go``), and a MIG manager that relabels them the same way after a change.

* ``single``: ``nvidia.com/gpu.count`` is the MIG devices (56 on an 8 x H100 node on
  ``all-1g.10gb``) and the devices are ``nvidia.com/gpu``; tiercast reads 8 GPUs, plans
  one node to ``all-3g.40gb`` (one profile per node, as ``single`` needs), and the next
  cycle reads that node back as 8 x ``3g.40gb:2`` and changes nothing.
* ``.me``: nodes on ``all-1g.10gb.me`` advertise ``nvidia.com/mig-1g.10gb.me``; they are
  read, not held, so a forecast that needs ``3g.40gb`` relayouts one of them.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pandas as pd
import pytest
import yaml

from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.mig_parted import SEEDED_CONFIG
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy, Session, connect
from scaler.catalog.mig import Layout
from scaler.config import Config
from scaler.service.cycle import run_cycle
from tests.fake_kube import FakeKube, kubeconfig_for, start_fake
from tests.gpu_operator import MigManager, operator_node, seed_operator_cluster
from tests.test_kube_mig_e2e import MDS, NODES, NOW, config, history
from tests.test_kube_providers import Clock


def cluster(strategy: str, mig_config: str, devices: dict[str, int]) -> FakeKube:
    f = start_fake()
    seed_operator_cluster(f, config_map=SEEDED_CONFIG, strategy=strategy)
    f.create(
        f"{MDS}/machinedeployments",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "h100-md"},
            "spec": {"replicas": 2, "clusterName": "prod"},
        },
    )
    for i, node in enumerate(NODES):
        f.create(
            f"{MDS}/machines",
            {
                "apiVersion": "cluster.x-k8s.io/v1beta1",
                "kind": "Machine",
                "metadata": {
                    "name": f"h100-md-7d9f-{i}",
                    "labels": {"cluster.x-k8s.io/deployment-name": "h100-md"},
                },
                "spec": {"clusterName": "prod"},
                "status": {"nodeRef": {"kind": "Node", "name": node}},
            },
        )
        labels = {"node.kubernetes.io/instance-type": "p5"}
        f.create(
            "/api/v1/nodes",
            operator_node(
                node, labels, mig_config=mig_config, strategy=strategy, mig_devices=devices
            ),
        )
    f.hooks.append(MigManager("H100-80GB", gpus=8))
    return f


@pytest.fixture
def single() -> Iterator[FakeKube]:
    f = cluster("single", "all-1g.10gb", {"1g.10gb": 56})
    yield f
    f.stop()


@pytest.fixture
def media() -> Iterator[FakeKube]:
    f = cluster("mixed", "all-1g.10gb.me", {"1g.10gb+me": 8})
    yield f
    f.stop()


def providers(fake: FakeKube, tmp_path: Path) -> tuple[Config, Clock, Callable[[], KubeProvider]]:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    clock = Clock()
    transport = connect(str(kubeconfig), None, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    cfg = config(tmp_path / "models")

    def provider() -> KubeProvider:
        return KubeProvider(cfg, Session(transport), clock=clock.now, sleep=clock.sleep)

    return cfg, clock, provider


@pytest.mark.slow
def test_single_strategy_nodes_are_read_as_gpus_planned_and_read_back(
    single: FakeKube, tmp_path: Path
) -> None:
    cfg, _, provider = providers(single, tmp_path)
    states, _ = provider().mig_inventory()
    assert states is not None
    for state in states["h100"]:
        assert state.held is None, state.held
        assert list(state.current) == [Layout.of({"1g.10gb": 7})] * 8  # not 56 GPUs
    # 280 small requests/s -> 28 x 1g.10gb (one node's 56 hold them); 80 big -> 8 x
    # 3g.40gb, which under single means a whole node of 3g.40gb.
    first = run_cycle(cfg, history(280.0, 80.0), provider(), NOW, dry_run=False)
    relayouts = [r for r in first.results if r.action.decision == "relayout"]
    assert len(relayouts) == 1, [(a.decision, a.reason) for a in first.plan.actions]
    (done,) = relayouts
    assert done.outcome == "applied", done.message
    node = done.action.details["node"]
    labels = single.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]
    name = labels[MIG_CONFIG]
    assert labels[MIG_STATE] == "success" and name != "all-1g.10gb"
    # GFD relabelled the node as single has it: the count is the new MIG devices.
    assert labels["nvidia.com/gpu.product"] == "NVIDIA-H100-80GB-HBM3-MIG-3g.40gb"
    assert labels["nvidia.com/gpu.count"] == "16"
    alloc = single.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
    assert alloc["nvidia.com/gpu"] == "16"

    after, _ = provider().mig_inventory()
    assert after is not None
    by_name = {s.name: s for s in after["h100"]}
    assert by_name[node].held is None, by_name[node].held
    assert list(by_name[node].current) == [Layout.of({"3g.40gb": 2})] * 8
    before = len(single.writes())
    second = run_cycle(cfg, history(280.0, 80.0), provider(), NOW + pd.Timedelta("5min"), False)
    assert not [r for r in second.results if r.action.decision == "relayout"]
    assert len(single.writes()) == before


@pytest.mark.slow
def test_nodes_on_a_me_layout_are_read_and_relayouted(media: FakeKube, tmp_path: Path) -> None:
    cfg, _, provider = providers(media, tmp_path)
    states, _ = provider().mig_inventory()
    assert states is not None
    for state in states["h100"]:
        assert state.held is None, state.held
        assert list(state.current) == [Layout.of({"1g.10gb+me": 1})] * 8
    first = run_cycle(cfg, history(0.0, 80.0), provider(), NOW, dry_run=False)
    relayouts = [r for r in first.results if r.action.decision == "relayout"]
    assert len(relayouts) == 1, [(a.decision, a.reason) for a in first.plan.actions]
    (done,) = relayouts
    assert done.outcome == "applied", done.message
    node = done.action.details["node"]
    alloc = media.get(f"/api/v1/nodes/{node}")["status"]["allocatable"]
    assert int(alloc["nvidia.com/mig-3g.40gb"]) >= 8
    assert not any("+" in key for key in alloc)  # the device plugin's names only
    after, _ = provider().mig_inventory()
    assert after is not None
    assert all(s.held is None for s in after["h100"]), [s.held for s in after["h100"]]
