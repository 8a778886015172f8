"""End to end on a fake cluster shaped like a GPU Operator install: forecast to new MIG layout.

The fake API server holds what a real cluster with NVIDIA's GPU Operator and Cluster
API has (``tests/gpu_operator.py``): EC2-style node names that only Machines'
``status.nodeRef`` tie to the MachineDeployment, GPU feature discovery labels, the
ClusterPolicy naming a mig-parted ConfigMap with the operator's default entries, a
workload behind a PodDisruptionBudget, and a MIG manager that applies only names
present in that ConfigMap. One ``run_cycle`` goes forecast -> plan -> ConfigMap
updated -> node cordoned, drained, relabelled -> ``mig.config.state=success`` ->
uncordoned; the next cycle's inventory reads the new layout from the node and
changes nothing.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.mig_parted import SEEDED_CONFIG
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy, Session, connect
from scaler.catalog.mig import parse_mig_parted_entry
from scaler.config import Config, parse_config
from scaler.planning.mig.state import RELAYOUT_ANNOTATION
from scaler.service.cycle import run_cycle
from tests.fake_kube import Clock, FakeKube, kubeconfig_for, pod, start_fake
from tests.gpu_operator import MigManager, mig_config_map, operator_node, seed_operator_cluster
from tests.test_kube_mig import wall_of

NOW = pd.Timestamp("2026-11-30T12:00:00")


class RealClock(Clock):
    """The monotonic clock, for a run that sleeps for real."""

    def now(self) -> float:
        return time.monotonic()


NODES = ("ip-10-0-1-17.ec2.internal", "ip-10-0-2-42.ec2.internal")
MDS = "/apis/cluster.x-k8s.io/v1beta1/namespaces/default"


def config(store: Path) -> Config:
    return parse_config(
        {
            "signals": [{"name": "small_rps"}, {"name": "big_rps"}],
            "workloads": [
                {
                    "name": "embed",
                    "signal": "small_rps",
                    "gpu_model": "H100-80GB",
                    "units_per_replica": 10.0,
                    "memory_gb": 9,  # NVML's 9.75 GiB 1g.10gb holds it
                    "mig_profile": "auto",
                },
                {
                    "name": "chat",
                    "signal": "big_rps",
                    "gpu_model": "H100-80GB",
                    "units_per_replica": 10.0,
                    "mig_profile": "3g.40gb",
                },
            ],
            "pools": [
                {
                    "name": "h100",
                    "tier": "reserved",
                    "gpu_model": "H100-80GB",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 2.5,
                    "min_nodes": 2,
                    "max_nodes": 2,
                    "mig_layouts": [],  # MIG-managed; the layouts come from the cluster
                    "provider": {"kind": "cluster-api", "machine_deployment": "h100-md"},
                }
            ],
            "policy": {"horizon_s": 6 * 3600, "cycle_s": 300},
            "forecast": {"method": "seasonal_naive_1d"},
            "model_store": {"path": str(store)},
            "kubernetes": {"drain_timeout_s": 60, "mig_timeout_s": 120, "poll_interval_s": 5},
        }
    )


def history(small: float, big: float) -> dict[str, pd.Series]:
    idx = pd.date_range(NOW - pd.Timedelta("3D"), NOW, freq="5min", inclusive="left")
    return {
        "small_rps": pd.Series(np.full(len(idx), small), idx, name="small_rps"),
        "big_rps": pd.Series(np.full(len(idx), big), idx, name="big_rps"),
    }


@pytest.fixture
def fake(clock: Clock) -> Iterator[FakeKube]:
    f = start_fake()
    seed_operator_cluster(f, config_map=SEEDED_CONFIG, strategy="mixed")
    f.create(
        f"{MDS}/machinedeployments",
        {
            "apiVersion": "cluster.x-k8s.io/v1beta1",
            "kind": "MachineDeployment",
            "metadata": {"name": "h100-md"},
            "spec": {"replicas": 2, "clusterName": "prod"},
            "status": {"replicas": 2},
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
        f.create("/api/v1/nodes", operator_node(node, {"node.kubernetes.io/instance-type": "p5"}))
    # A whole-GPU service on each node, two replicas behind a budget of one.
    f.create(
        "/apis/apps/v1/namespaces/default/replicasets",
        {
            "apiVersion": "apps/v1",
            "kind": "ReplicaSet",
            "metadata": {"name": "train-rs"},
            "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "train"}}},
        },
    )
    for i, node in enumerate(NODES):
        f.create(
            "/api/v1/namespaces/default/pods",
            pod(f"train-{i}", "default", node, {"app": "train"}, 8, "ReplicaSet", "train-rs"),
        )
    f.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "train"},
            "spec": {"maxUnavailable": 1, "selector": {"matchLabels": {"app": "train"}}},
        },
    )
    f.hooks.append(MigManager("H100-80GB", gpus=8, clock=clock))
    yield f
    f.stop()


@pytest.mark.slow
def test_forecast_to_a_new_layout_on_the_node_and_back_in_the_inventory(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    transport = connect(str(kubeconfig), None, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    cfg = config(tmp_path / "models")

    def provider() -> KubeProvider:
        return KubeProvider(
            cfg, Session(transport), clock=clock.now, sleep=clock.sleep, wall=wall_of(clock)
        )

    # 280 small requests/s -> 28 x 1g.10gb; 80 big -> 8 x 3g.40gb: one node's worth.
    first = run_cycle(cfg, history(280.0, 80.0), provider(), NOW, dry_run=False)
    relayouts = [r for r in first.results if r.action.decision == "relayout"]
    assert len(relayouts) == 1, [(r.action.decision, r.action.reason) for r in first.plan.actions]
    (done,) = relayouts
    assert done.outcome == "applied", done.message
    node, name = done.action.details["node"], done.action.details["layout"]
    assert node in NODES and name.startswith("tiercast-")
    # The ConfigMap the ClusterPolicy names now has the entry, beside the operator's own.
    configs = mig_config_map(fake, SEEDED_CONFIG)["mig-configs"]
    assert {"all-disabled", "all-1g.10gb", "all-balanced"} <= set(configs)
    layouts = parse_mig_parted_entry("H100-80GB", configs[name], 8)
    assert sum(lay.count("3g.40gb") for lay in layouts.values()) >= 8
    assert sum(lay.count("1g.10gb") for lay in layouts.values()) >= 28
    # The write order a real MIG manager needs: entry, (wait), cordon, evict, label, uncordon.
    writes = [(c["verb"], c["path"].rsplit("/", 2)[-2:]) for c in done.calls if c["verb"] != "GET"]
    assert writes[0] == ("PATCH", ["configmaps", SEEDED_CONFIG])
    assert [w[0] for w in writes[1:]] == ["PATCH", "POST", "PATCH", "PATCH", "POST", "POST"]
    # The two POSTs at the end: an Event on the ConfigMap and one on the node.
    events = [c["body"] for c in done.calls if c["path"].endswith("/events")]
    assert {(e["regarding"]["kind"], e["metadata"]["namespace"]) for e in events} == {
        ("ConfigMap", "gpu-operator"),
        ("Node", "default"),
    }
    assert all(e["note"].startswith(done.action.reason.text()) for e in events)
    assert clock.slept[0] == 120  # the kubelet's refresh of the mounted ConfigMap
    labelled = fake.get(f"/api/v1/nodes/{node}")
    assert labelled["metadata"]["labels"][MIG_CONFIG] == name
    assert labelled["metadata"]["labels"][MIG_STATE] == "success"
    assert not labelled["spec"].get("unschedulable")
    assert int(labelled["status"]["allocatable"]["nvidia.com/mig-3g.40gb"]) >= 8
    # The other node still runs its pod: the budget allowed one eviction only.
    other = next(n for n in NODES if n != node)
    assert fake.get(f"/api/v1/nodes/{other}")["metadata"]["labels"][MIG_CONFIG] == "all-disabled"

    # The next cycle reads the new layout from the node and the ConfigMap: nothing to do.
    states, known = provider().mig_inventory()
    assert states is not None and known is not None and name in known
    by_name = {s.name: s for s in states["h100"]}
    assert by_name[node].held is None
    assert list(by_name[node].current) == [layouts[i] for i in range(8)]
    before = len(fake.writes())
    second = run_cycle(cfg, history(280.0, 80.0), provider(), NOW + pd.Timedelta("5min"), False)
    assert not [r for r in second.results if r.action.decision == "relayout"]
    assert len(fake.writes()) == before
    assert second.plan.mig["node_labels"][node] == name


@pytest.mark.slow
def test_tiercast_run_reads_the_cluster_for_mig_and_relayouts(
    fake: FakeKube, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same path through ``tiercast run`` (the service's provider wrapper included)."""
    from scaler.cli import main

    (workdir / "kubeconfig").write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    for name, series in history(280.0, 80.0).items():
        frame = pd.DataFrame({"timestamp": series.index, "value": series.to_numpy()})
        frame.to_csv(workdir / f"{name}.csv", index=False)
    data = config(workdir / "models").model_dump(mode="json", exclude_none=True)
    data["signals"] = [{"name": n, "file": f"{n}.csv"} for n in ("small_rps", "big_rps")]
    # Real time here: the mounted copy lags 0.1 s, tiercast waits 0.3 s for it.
    manager = next(h for h in fake.hooks if isinstance(h, MigManager))
    manager.clock, manager.lag_s = RealClock(), 0.1
    data["kubernetes"] |= {"mig_config_sync_s": 0.3, "poll_interval_s": 0.01, "events": False}
    (workdir / "config.yaml").write_text(yaml.safe_dump(data))
    argv = ["run", "--config", "config.yaml", "--kubeconfig", "kubeconfig"]
    assert main([*argv, "--now", str(NOW)]) == 0, capsys.readouterr()
    out = capsys.readouterr().out
    labels = {n: fake.get(f"/api/v1/nodes/{n}")["metadata"]["labels"] for n in NODES}
    changed = [n for n in NODES if labels[n][MIG_CONFIG] != "all-disabled"]
    assert len(changed) == 1 and labels[changed[0]][MIG_STATE] == "success", out
    assert labels[changed[0]][MIG_CONFIG] in mig_config_map(fake, SEEDED_CONFIG)["mig-configs"]
    assert f"node {changed[0]}" in out  # the real node name, read from the cluster


class Killed(BaseException):
    """The run's process ends here (SIGKILL at the Job's deadline): nothing runs after it."""


@pytest.mark.slow
def test_a_cycle_killed_mid_relayout_is_finished_by_the_next_and_uncordoned(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    """The run is killed right after the relabel; the MIG manager goes on to ``success``,
    after which no layout change is planned for the node: the next cycle must still
    uncordon it, from the step the node records."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(kubeconfig_for(fake.url)))
    transport = connect(str(kubeconfig), None, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    cfg = config(tmp_path / "models")

    def relabelled() -> bool:
        return any(
            '"step":"relabelled"'
            in (fake.get(f"/api/v1/nodes/{n}")["metadata"].get("annotations") or {}).get(
                RELAYOUT_ANNOTATION, ""
            )
            for n in NODES
        )

    def killing_sleep(seconds: float) -> None:
        if relabelled():
            raise Killed()
        clock.sleep(seconds)

    def provider(sleep: Callable[[float], None] = clock.sleep) -> KubeProvider:
        return KubeProvider(
            cfg, Session(transport), clock=clock.now, sleep=sleep, wall=wall_of(clock)
        )

    with pytest.raises(Killed):
        run_cycle(cfg, history(280.0, 80.0), provider(killing_sleep), NOW, dry_run=False)
    (node,) = [n for n in NODES if fake.get(f"/api/v1/nodes/{n}")["spec"].get("unschedulable")]
    name = fake.get(f"/api/v1/nodes/{node}")["metadata"]["labels"][MIG_CONFIG]
    assert name.startswith("tiercast-")

    second = run_cycle(
        cfg, history(280.0, 80.0), provider(), NOW + pd.Timedelta("5min"), dry_run=False
    )
    (resumed,) = [r for r in second.results if r.action.details.get("resume")]
    assert resumed.outcome == "applied", resumed.message
    mig_actions = [a for a in second.plan.actions if a.kind == "mig-layout"]
    assert mig_actions[0] is resumed.action  # finished before any other MIG change
    assert not [r for r in second.results if r is not resumed and r.action.decision == "relayout"]
    labelled = fake.get(f"/api/v1/nodes/{node}")
    assert labelled["metadata"]["labels"][MIG_CONFIG] == name
    assert labelled["metadata"]["labels"][MIG_STATE] == "success"
    assert not labelled["spec"].get("unschedulable")
    assert RELAYOUT_ANNOTATION not in (labelled["metadata"].get("annotations") or {})
    manager = next(h for h in fake.hooks if isinstance(h, MigManager))
    assert manager.applied == [(node, name)]
    # The third cycle: nothing left to finish or change.
    before = len(fake.writes())
    third = run_cycle(cfg, history(280.0, 80.0), provider(), NOW + pd.Timedelta("10min"), False)
    assert not [r for r in third.results if r.action.decision == "relayout"]
    assert len(fake.writes()) == before
