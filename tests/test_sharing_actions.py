"""The planner's ``device-plugin-config`` actions: which nodes get time-slicing or MPS, and why
(scaler/planning/sharing_actions.py; docs/mig.md#time-slicing-and-mps-through-the-device-plugin).

Against the fake API server with a GPU Operator's ClusterPolicy, the device plugin's config
ConfigMap, and the fake device plugin and GPU feature discovery (tests/fake_device_plugin.py),
which relabel a node as the real ones do when its ``nvidia.com/device-plugin.config`` changes.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import numpy as np
import pandas as pd
import pytest
import yaml

from forecaster.errors import BadInputError
from forecaster.forecasting import SeriesForecast
from scaler.actuation.kube.device_plugin import render, sharing_config
from scaler.actuation.kube.inventory import (
    SHARING_ANNOTATION,
    read_nodes,
    shared_inventory,
    shared_node_states,
)
from scaler.actuation.kube.providers import KubeProvider, build_provider
from scaler.actuation.kube.transport import RetryPolicy, Session
from scaler.config import Config, parse_config
from scaler.planning.sharing_actions import (
    ACTION_KIND,
    CONFIG_LABEL,
    SharedNodeState,
    plan_sharing_actions,
)
from scaler.service.cycle import run_cycle, shared_node_inventory
from tests.conftest import REPO
from tests.fake_device_plugin import DevicePlugin, shared_labels
from tests.fake_kube import Clock, FakeKube, connect_to, pod, start_fake
from tests.gpu_operator import (
    OPERATOR_NS,
    operator_node,
    seed_device_plugin_config,
    seed_operator_cluster,
)
from tests.hand_made import flat_forecast

NOW = pd.Timestamp("2026-11-30T12:00:00")
STEP = pd.Timedelta(minutes=5)
DP_CONFIG = "tiercast-device-plugin-config"
DP_PATH = f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{DP_CONFIG}"
SCHEMA = json.loads((REPO / "scaler" / "plan.schema.json").read_text())
SHARED = ("h100-a", "h100-b", "h100-c", "h100-d")
MIG_NODES = ("mig-a", "mig-b")
NAMES = ("a", "b", "c")


def config(
    isolation: str = "preferred",
    shared_nodes: int = 4,
    store: Path | None = None,
    mig_pool: bool = True,
) -> Config:
    """Three MPS workloads (18 GB, a quarter of a GPU: 4 per H100) pooled on ``h100``, beside
    a MIG-managed pool of the same model (``mig_pool``)."""
    pool = {"gpu_model": "H100-80GB", "gpus_per_node": 8, "lead_time_s": 600, "tier": "reserved"}
    return parse_config(
        {
            "signals": [{"name": n} for n in NAMES],
            "workloads": [
                {
                    "name": n,
                    "signal": n,
                    "gpu_model": "H100-80GB",
                    "units_per_replica": 1,
                    "memory_gb": 18,
                    "compute_share": 0.25,
                    "isolation": isolation,
                }
                for n in NAMES
            ],
            "pools": [
                {
                    **pool,
                    "name": "h100",
                    "price_per_gpu_hour": 2.5,
                    "min_nodes": shared_nodes,
                    "max_nodes": shared_nodes,
                    "provider": {"kind": "placeholder"},
                },
                {
                    **pool,
                    "name": "h100-mig",
                    "price_per_gpu_hour": 2.5,
                    "min_nodes": 2,
                    "max_nodes": 2,
                    "mig_layouts": [],
                    "provider": {"kind": "placeholder"},
                },
            ][: 2 if mig_pool else 1],
            "policy": {"horizon_s": 3600, "cycle_s": 300},
            "forecast": {"method": "seasonal_naive_1d"},
            "model_store": {"path": str(store or Path("models"))},
            "kubernetes": {"mig_timeout_s": 120, "poll_interval_s": 5, "events": False},
        },
        "test config",
    )


def forecast(name: str, level: float, n: int = 12) -> SeriesForecast:
    return flat_forecast(name, level, NOW, STEP, n)


def forecasts(level: float = 16.0) -> dict[str, SeriesForecast]:
    """16 replicas each: 48 pooled at 4 per GPU is 12 GPUs, two nodes of 8."""
    return {n: forecast(n, level) for n in NAMES}


def with_gpu_operator(fake: FakeKube) -> DevicePlugin:
    """The ClusterPolicy (``mig.strategy: single``, which MPS runs under) naming the device
    plugin's config ConfigMap, GPU nodes as GPU feature discovery labels them, and the fake
    device plugin."""
    seed_device_plugin_config(fake, DP_CONFIG, "single")
    for name in SHARED:
        fake.create(
            "/api/v1/nodes", operator_node(name, {"tiercast.io/pool": "h100"}, strategy="none")
        )
    for name in MIG_NODES:
        fake.create(
            "/api/v1/nodes", operator_node(name, {"tiercast.io/pool": "h100-mig"}, strategy="none")
        )
    plugin = DevicePlugin()
    fake.hooks.append(plugin)
    return plugin


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    yield f
    f.stop()


def provider(
    fake: FakeKube, tmp_path: Path, clock: Clock, cfg: Config, dry_run: bool = False
) -> KubeProvider:
    transport = connect_to(fake, tmp_path, RetryPolicy(2, 0.01, 0.02, sleep=clock.sleep))
    return KubeProvider(
        cfg,
        Session(transport, server_dry_run=dry_run),
        dry_run=dry_run,
        clock=clock.now,
        sleep=clock.sleep,
    )


def label(fake: FakeKube, node: str) -> dict[str, str]:
    labels: dict[str, str] = fake.get(f"/api/v1/nodes/{node}")["metadata"]["labels"]
    return labels


def plan_on(kube: KubeProvider, cfg: Config, fcs: dict[str, SeriesForecast] | None = None) -> Any:
    return plan_sharing_actions(
        cfg.fleet,
        cfg.policy,
        fcs or forecasts(),
        kube.inventory(),
        NOW,
        shared_inventory(kube.session, cfg.pools, cfg.kubernetes),
    )


# --- choosing the nodes ------------------------------------------------------------------


def test_an_mps_group_labels_exactly_the_nodes_it_needs_and_gfd_shows_them_shared(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    plugin = with_gpu_operator(fake)
    # A whole-GPU pod on h100-a: the unlabelled nodes without GPU pods are chosen first.
    fake.create("/api/v1/namespaces/default/pods", pod("train-0", "default", "h100-a", gpus=8))
    cfg = config()
    kube = provider(fake, tmp_path, clock, cfg)
    out = plan_on(kube, cfg)
    assert [a.kind for a in out.actions] == [ACTION_KIND, ACTION_KIND]
    assert [a.details["node"] for a in out.actions] == ["h100-b", "h100-c"]
    first = out.actions[0]
    assert (first.pool, first.decision, first.details["mode"], first.details["replicas"]) == (
        "h100",
        "relayout",
        "mps",
        4,
    )
    assert first.details["label"] == {CONFIG_LABEL: "tiercast-mps-4"}
    assert first.details["device_plugin_config"] == sharing_config("mps", 4)
    assert first.reason.code == "sharing.label"
    assert first.reason.text().startswith(
        "H100-80GB: 12 GPU(s) shared 4 ways by mps for a, b, c (0 labelled)"
    )
    p = first.reason.params
    assert (p["quantile"], p["node"], p["node_gpus"], p["gpu_pods"]) == ("q0.9", "h100-b", 8, 0)
    (need,) = out.section["needs"]
    assert (need["gpus"], need["nodes_to_label"], need["gpus_short"]) == (
        12,
        ["h100-b", "h100-c"],
        0,
    )
    assert out.section["node_labels"] == {"h100-b": "tiercast-mps-4", "h100-c": "tiercast-mps-4"}
    assert out.section["device_plugin_configs"] == {"tiercast-mps-4": sharing_config("mps", 4)}

    for a in out.actions:
        result = kube.apply(a)
        assert result.outcome == "applied", result.message
    assert plugin.applied == [("h100-b", "tiercast-mps-4"), ("h100-c", "tiercast-mps-4")]
    for node in ("h100-b", "h100-c"):
        labels = label(fake, node)
        assert labels[CONFIG_LABEL] == "tiercast-mps-4"
        assert labels["nvidia.com/gpu.sharing-strategy"] == "mps"
        assert labels["nvidia.com/gpu.replicas"] == "4"
    for node in ("h100-a", "h100-d", *MIG_NODES):
        assert CONFIG_LABEL not in label(fake, node)
    assert "tiercast-mps-4" in fake.get(DP_PATH)["data"]

    # The next cycle reads the labels back: nothing to change.
    again = plan_on(kube, cfg)
    assert not again.actions
    assert again.section["needs"][0]["nodes_labelled"] == ["h100-b", "h100-c"]
    assert again.section["node_labels"] == out.section["node_labels"]


def test_a_node_labelled_already_is_counted_and_left_alone(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    with_gpu_operator(fake)
    fake.mutate(
        DP_PATH, lambda o: o["data"].update({"tiercast-mps-4": render(sharing_config("mps", 4))})
    )

    def shared(o: dict[str, Any]) -> None:
        o["metadata"]["labels"][CONFIG_LABEL] = "tiercast-mps-4"
        shared_labels("mps", 4)(o)

    fake.mutate("/api/v1/nodes/h100-d", shared)
    cfg = config()
    kube = provider(fake, tmp_path, clock, cfg)
    out = plan_on(kube, cfg)
    # h100-d holds 8 of the 12 GPUs; one more node, and none for h100-d.
    assert [a.details["node"] for a in out.actions] == ["h100-a"]
    assert out.actions[0].reason.params["have"] == 8
    assert "(8 labelled)" in out.actions[0].reason.text()
    (need,) = out.section["needs"]
    assert (need["nodes_labelled"], need["gpus_labelled"]) == (["h100-d"], 8)
    entries = {n["node"]: n for n in out.section["nodes"]}
    assert entries["h100-d"]["changed"] is False and entries["h100-a"]["changed"] is True


def test_a_mig_pool_is_never_shared_even_when_the_other_nodes_run_out(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    with_gpu_operator(fake)
    cfg = config()
    kube = provider(fake, tmp_path, clock, cfg)
    # 48 replicas each: 36 GPUs, more than the 32 of the shared pool.
    out = plan_on(kube, cfg, forecasts(48.0))
    assert sorted(a.details["node"] for a in out.actions) == list(SHARED)
    assert not {n["node"] for n in out.section["nodes"]} & set(MIG_NODES)
    assert out.section["needs"][0]["gpus_short"] == 4
    assert any("4 GPU(s) short of tiercast-mps-4" in str(n) for n in out.notes)
    with pytest.raises(BadInputError, match=r"node_states\['h100-mig'\]: pool h100-mig is MIG"):
        plan_sharing_actions(cfg.fleet, cfg.policy, forecasts(), {}, NOW, {"h100-mig": []})


def test_cordoned_nodes_and_someone_elses_configs_are_never_relabelled(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    with_gpu_operator(fake)
    fake.mutate("/api/v1/nodes/h100-a", lambda o: o["spec"].update({"unschedulable": True}))
    fake.mutate(
        "/api/v1/nodes/h100-b", lambda o: o["metadata"]["labels"].update({CONFIG_LABEL: "custom"})
    )
    fake.mutate(
        "/api/v1/nodes/h100-c",
        lambda o: o["metadata"]["labels"].update({CONFIG_LABEL: "tiercast-time-slicing-2"}),
    )
    cfg = config()
    out = plan_on(provider(fake, tmp_path, clock, cfg), cfg)
    assert [a.details["node"] for a in out.actions] == ["h100-d"]
    why = {n["node"]: n["why"] for n in out.section["nodes"]}
    assert why["h100-a"] == "cordoned"
    assert "is not tiercast's" in why["h100-b"]
    # A tiercast config nothing needs now: the actuator only shares, so it is left, noted.
    assert any(
        str(n).startswith(f"node h100-c keeps {CONFIG_LABEL}=tiercast-time-slicing-2")
        for n in out.notes
    )
    assert out.section["needs"][0]["gpus_short"] == 4


def test_an_isolation_required_workload_gives_no_action() -> None:
    cfg = config(isolation="required")
    nodes = {"h100": [SharedNodeState(f"h100-{i}", 8) for i in range(4)]}
    out = plan_sharing_actions(cfg.fleet, cfg.policy, forecasts(), {"h100": 4}, NOW, nodes)
    assert (out.actions, out.section, out.notes) == ([], {}, [])


def test_no_node_inventory_gives_no_action_and_a_note() -> None:
    cfg = config()
    out = plan_sharing_actions(cfg.fleet, cfg.policy, forecasts(), {"h100": 4}, NOW, None)
    assert not out.actions
    assert out.section["nodes_from"] is None and out.section["node_labels"] == {}
    assert out.section["needs"][0]["held"] == "the nodes' labels could not be read"
    (note,) = out.notes
    assert "needs 12 GPU(s) shared tiercast-mps-4 (2 node(s)" in str(note)
    assert "could not be read: no device-plugin-config action until then" in str(note)
    assert "метки узлов не удалось прочитать" in note.text("ru")


def test_a_stale_signal_holds_the_need() -> None:
    cfg = config()
    nodes = {"h100": [SharedNodeState(f"h100-{i}", 8) for i in range(4)]}
    out = plan_sharing_actions(
        cfg.fleet, cfg.policy, forecasts(), {"h100": 4}, NOW, nodes, stale={"b"}
    )
    assert not out.actions
    assert any("held: signal(s) b stale or missing" in str(n) for n in out.notes)


def test_a_pool_that_grows_gets_a_note_for_the_nodes_to_come() -> None:
    cfg = config(shared_nodes=1)
    nodes = {"h100": [SharedNodeState("h100-0", 8)]}
    out = plan_sharing_actions(
        cfg.fleet, cfg.policy, forecasts(), {"h100": 1}, NOW, nodes, targets={"h100": 2}
    )
    assert [a.details["node"] for a in out.actions] == ["h100-0"]
    assert any("nodes to come (h100 1 -> 2)" in str(n) for n in out.notes)


def test_a_pool_that_shrinks_this_cycle_keeps_its_labels() -> None:
    cfg = config()
    nodes = {"h100": [SharedNodeState(f"h100-{i}", 8) for i in range(4)]}
    out = plan_sharing_actions(
        cfg.fleet, cfg.policy, forecasts(), {"h100": 4}, NOW, nodes, targets={"h100": 3}
    )
    assert not out.actions
    assert "scales down 4 -> 3" in out.section["nodes"][0]["why"]


def test_a_provider_that_reads_no_cluster_plans_the_configured_nodes() -> None:
    from scaler.actuation.protocol import RecordingProvider, capabilities_of

    cfg = config()
    reader = capabilities_of(RecordingProvider({"h100": 4})).sharing
    assert reader is None
    nodes, source, why = shared_node_inventory(reader, cfg.pools, {"h100": 4})
    assert (source, why) == ("config", None) and nodes is not None
    assert [n.name for n in nodes["h100"]] == ["h100-0", "h100-1", "h100-2", "h100-3"]
    assert "h100-mig" not in nodes


def test_a_cluster_without_a_device_plugin_config_map_gives_a_note_not_a_failure(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    # A GPU Operator whose ClusterPolicy names no devicePlugin.config.name: every action
    # would be refused, so none is planned, and the note says what is missing.
    seed_operator_cluster(fake, strategy="single")
    for name in SHARED:
        fake.create("/api/v1/nodes", operator_node(name, {"tiercast.io/pool": "h100"}))
    cfg = config()
    kube = provider(fake, tmp_path, clock, cfg)
    nodes, source, why = shared_node_inventory(kube, cfg.pools, kube.inventory())
    assert nodes is None and source == "cluster"
    assert why is not None and "devicePlugin.config.name" in why
    out = plan_sharing_actions(
        cfg.fleet, cfg.policy, forecasts(), {"h100": 4}, NOW, nodes, unavailable=why
    )
    assert not out.actions
    (note,) = out.notes
    assert "but the cluster cannot take device plugin configs" in str(note)


def test_inventory_reads_shared_nodes_as_physical_gpus(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    with_gpu_operator(fake)

    def shared(o: dict[str, Any]) -> None:
        o["metadata"]["labels"][CONFIG_LABEL] = "tiercast-mps-4"
        shared_labels("mps", 4)(o)

    fake.mutate("/api/v1/nodes/h100-d", shared)
    cfg = config()
    kube = provider(fake, tmp_path, clock, cfg)
    states = shared_node_states(read_nodes(kube.session, cfg.pools, cfg.kubernetes), cfg.pools)
    d = next(s for s in states["h100"] if s.name == "h100-d")
    assert (d.gpus, d.config, d.strategy, d.replicas, d.held) == (
        8,
        "tiercast-mps-4",
        "mps",
        4,
        None,
    )
    assert set(states) == {"h100"}  # the MIG pool's nodes are the MIG planner's


# --- through the cycle, in dry-run -------------------------------------------------------


def history(level: float) -> dict[str, pd.Series]:
    idx = pd.date_range(NOW - pd.Timedelta("3D"), NOW, freq="5min", inclusive="left")
    return {n: pd.Series(np.full(len(idx), level), idx, name=n) for n in NAMES}


@pytest.mark.slow
def test_a_dry_run_cycle_shows_the_config_and_label_and_changes_nothing(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    plugin = with_gpu_operator(fake)
    cfg = config(store=tmp_path / "models")
    kube = provider(fake, tmp_path, clock, cfg, dry_run=True)
    before = len(fake.writes())
    result = run_cycle(cfg, history(16.0), kube, NOW, dry_run=True)
    shares = [r for r in result.results if r.action.kind == ACTION_KIND]
    assert [r.action.details["node"] for r in shares] == ["h100-a", "h100-b"], [
        (a.kind, a.reason) for a in result.plan.actions
    ]
    for r in shares:
        assert r.outcome == "recorded", r.message
        assert "would share each GPU 4 ways by mps" in r.message
        assert f"{CONFIG_LABEL}=tiercast-mps-4" in r.message
        patches = [c for c in r.calls if c["verb"] == "PATCH"]
        relabel = patches[-2]["body"]["metadata"]
        assert relabel["labels"] == {CONFIG_LABEL: "tiercast-mps-4"}
        assert patches[-1]["body"] == {"metadata": {"annotations": {SHARING_ANNOTATION: None}}}
        assert all(c.get("query", {}).get("dryRun") == "All" for c in patches)
    data = [
        c["body"]["data"] for c in shares[0].calls if c["verb"] == "PATCH" and "data" in c["body"]
    ]
    assert data == [{"tiercast-mps-4": render(sharing_config("mps", 4))}]
    # Nothing was written: every write was the server's dry run, the nodes keep their
    # labels, the ConfigMap its keys, and the device plugin saw nothing.
    assert all(r.query.get("dryRun") == "All" for r in fake.writes()[before:])
    assert not plugin.applied
    for node in SHARED:
        assert CONFIG_LABEL not in label(fake, node)
    assert "tiercast-mps-4" not in fake.get(DP_PATH)["data"]
    plan = json.loads(result.plan.to_json())
    jsonschema.validate(plan, SCHEMA)
    assert plan["sharing"]["node_labels"] == {
        "h100-a": "tiercast-mps-4",
        "h100-b": "tiercast-mps-4",
    }
    assert plan["sharing"]["nodes_from"] == "cluster"
    assert yaml.safe_load(render(plan["sharing"]["device_plugin_configs"]["tiercast-mps-4"])) == (
        sharing_config("mps", 4)
    )


def test_the_offline_dry_run_shows_the_config_and_labels_on_its_in_memory_cluster(
    tmp_path: Path,
) -> None:
    # No cluster at all: the in-memory cluster is seeded with a GPU Operator whose
    # ClusterPolicy names a device plugin config ConfigMap, so the actions are recorded
    # with the exact ConfigMap data and label, as against a real cluster.
    cfg = config(store=tmp_path / "models", mig_pool=False)
    kube = build_provider(cfg, dry_run=True)
    result = run_cycle(cfg, history(16.0), kube, NOW, dry_run=True)
    shares = [r for r in result.results if r.action.kind == ACTION_KIND]
    assert [r.action.details["node"] for r in shares] == ["h100-0", "h100-1"], [
        (a.kind, a.reason) for a in result.plan.actions
    ] + result.plan.notes
    for r in shares:
        assert r.outcome == "recorded", r.message
        patches = [c for c in r.calls if c["verb"] == "PATCH"]
        relabel = patches[-2]["body"]["metadata"]
        assert relabel["labels"] == {CONFIG_LABEL: "tiercast-mps-4"}
        assert patches[-1]["body"] == {"metadata": {"annotations": {SHARING_ANNOTATION: None}}}
    data = [
        c["body"]["data"] for c in shares[0].calls if c["verb"] == "PATCH" and "data" in c["body"]
    ]
    assert data == [{"tiercast-mps-4": render(sharing_config("mps", 4))}]


def test_the_offline_dry_run_refuses_mps_beside_the_mixed_mig_strategy(tmp_path: Path) -> None:
    # The seeded GPU Operator runs MIG pools under the mixed strategy, where the device
    # plugin does not start with MPS: the plan says so and changes no node.
    cfg = config(store=tmp_path / "models")
    result = run_cycle(cfg, history(16.0), build_provider(cfg, dry_run=True), NOW, dry_run=True)
    assert not [a for a in result.plan.actions if a.kind == ACTION_KIND]
    assert any("mixed" in n for n in map(str, result.plan.notes)), result.plan.notes
