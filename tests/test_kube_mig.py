"""MIG relabel through the fake API server: cordon, evict, relabel, wait, uncordon, or roll back.

A simulated GPU Operator MIG manager (a hook in the fake) reacts to the
``nvidia.com/mig.config`` label the way the real one does: it sets
``nvidia.com/mig.config.state=pending``, then ``success`` or ``failed``, or
never answers.
"""

from __future__ import annotations

import datetime
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.mig_relabel import CORDONED_BY
from scaler.actuation.kube.providers import KubeProvider
from scaler.actuation.kube.transport import RetryPolicy, Session
from scaler.catalog.mig import Layout
from scaler.planning.mig.state import Relayout
from scaler.plans import Action
from tests.fake_kube import Clock, FakeKube, Request, connect_to, gpu_node, pod, start_fake
from tests.gpu_operator import CLUSTER_POLICY, OPERATOR_NS, mig_config_map, seed_operator_cluster
from tests.test_kube_providers import action, make_config, seed

NODE = "/api/v1/nodes/md-a"


class MigManager:
    """Takes up a change of a node's ``nvidia.com/mig.config`` value, ending in ``outcome``.

    As the real MIG manager (NVIDIA/mig-parted ``cmd/nvidia-mig-manager/main.go``, the
    informer's ``UpdateFunc``), only a new label *value* starts a change: dropping the
    state label or writing the same value does nothing. A return to the config the GPUs
    are in is ``success`` at once (``pkg/mig/reconfigure/reconfigure.go``
    ``isConfigAlreadyApplied``); any other change is ``pending`` for ``after`` requests,
    then ``outcome`` (``silent``: never answers).
    """

    def __init__(self, outcome: str, after: int = 2) -> None:
        self.outcome, self.after = outcome, after
        self.pending: dict[str, int] = {}
        self.seen: dict[str, str | None] = {}
        self.current: dict[str, str | None] = {}

    def __call__(self, fake: FakeKube, request: Request) -> None:
        for (api, plural, _, name), node in list(fake.state.objects.items()):
            if (api, plural) != ("v1", "nodes"):
                continue
            value = (node["metadata"].get("labels") or {}).get(MIG_CONFIG)
            if name not in self.seen:
                self.seen[name] = self.current[name] = value
            elif value != self.seen[name]:
                self.seen[name] = value
                if value == self.current[name]:
                    self.pending.pop(name, None)
                    _set_state(fake, name, "success")
                elif value:
                    self.pending[name] = 0
                    _set_state(fake, name, "pending")
            elif name in self.pending:
                self.pending[name] += 1
                if self.pending[name] >= self.after and self.outcome in ("success", "failed"):
                    del self.pending[name]
                    _set_state(fake, name, self.outcome)
                    if self.outcome == "success":
                        self.current[name] = value


def _set_state(fake: FakeKube, node: str, state: str) -> None:
    fake.mutate(
        f"/api/v1/nodes/{node}", lambda o: o["metadata"]["labels"].update({MIG_STATE: state})
    )


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    seed_operator_cluster(f)
    f.mutate(
        NODE,
        lambda o: o["metadata"]["labels"].update(
            {MIG_CONFIG: "all-disabled", MIG_STATE: "success"}
        ),
    )
    f.create(
        "/api/v1/namespaces/default/pods",
        pod("embed-0", "default", "md-a", {"app": "embed"}, gpus=1),
    )
    f.create(
        "/api/v1/namespaces/kube-system/pods",
        pod("dcgm-x", "kube-system", "md-a", owner_kind="DaemonSet"),
    )
    yield f
    f.stop()


EPOCH = datetime.datetime(2026, 12, 2, 9, 0, tzinfo=datetime.UTC)


def wall_of(clock: Clock) -> Callable[[], datetime.datetime]:
    """UTC time that moves with ``clock`` (the steps kept on nodes are timed on it)."""
    return lambda: EPOCH + datetime.timedelta(seconds=clock.now())


def kube_provider(fake: FakeKube, folder: Path, clock: Clock, **kube: Any) -> KubeProvider:
    """A provider on ``fake`` whose waits and wall clock both run on ``clock``."""
    transport = connect_to(fake, folder, RetryPolicy(2, 0.01, 0.02, sleep=clock.sleep))
    return KubeProvider(
        make_config(**kube),
        Session(transport),
        clock=clock.now,
        sleep=clock.sleep,
        wall=wall_of(clock),
    )


@pytest.fixture
def provider(fake: FakeKube, tmp_path: Path, clock: Clock) -> KubeProvider:
    return kube_provider(fake, tmp_path, clock)


def relayout(config: str = "all-1g.10gb", node: str = "md-a") -> Action:
    return action(
        "capi",
        2,
        2,
        decision="relayout",
        kind="mig-layout",
        details={"node": node, "mig_config": config},
    )


def node_state(fake: FakeKube) -> tuple[str | None, str | None, bool, dict]:
    node = fake.get(NODE)
    labels = node["metadata"]["labels"]
    return (
        labels.get(MIG_CONFIG),
        labels.get(MIG_STATE),
        bool(node["spec"].get("unschedulable")),
        {  # what tiercast may write (Cluster API's own annotations left out)
            k: v
            for k, v in (node["metadata"].get("annotations") or {}).items()
            if not k.startswith("cluster.x-k8s.io/")
        },
    )


def test_relabel_reaches_success_then_uncordons(fake: FakeKube, provider: KubeProvider) -> None:
    fake.hooks.append(MigManager("success"))
    result = provider.apply(relayout())
    assert result.outcome == "applied", result.message
    assert node_state(fake) == ("all-1g.10gb", "success", False, {})
    steps = [(c["verb"], c["path"].rsplit("/", 1)[-1]) for c in result.calls if c["verb"] != "GET"]
    assert steps == [
        ("PATCH", "md-a"),  # cordon (and mark it as tiercast's)
        ("POST", "eviction"),  # the workload pod; the DaemonSet pod stays
        ("PATCH", "md-a"),  # relabel, dropping the stale state label
        ("PATCH", "md-a"),  # uncordon
        ("POST", "events"),  # one Event on the node, with the action's reason
    ]
    event = next(c for c in result.calls if c["path"].endswith("/events"))["body"]
    assert event["regarding"] == {"apiVersion": "v1", "kind": "Node", "name": "md-a"}
    assert (event["reason"], event["action"], event["type"]) == ("MigRelayout", "Relabel", "Normal")
    assert event["note"].startswith("test -> applied: node md-a")
    cordon, relabel, _ = [c for c in result.calls if c["verb"] == "PATCH"]
    # The cordon records the relayout on the node; the relabel moves the record on.
    started = Relayout.from_annotations(cordon["body"]["metadata"]["annotations"])
    assert started is not None and (started.step, started.target) == ("draining", "all-1g.10gb")
    assert relabel["body"]["metadata"]["labels"] == {MIG_CONFIG: "all-1g.10gb", MIG_STATE: None}
    moved = Relayout.from_annotations(relabel["body"]["metadata"]["annotations"])
    assert moved is not None and (moved.step, moved.previous) == ("relabelled", "all-disabled")
    assert fake.exists("/api/v1/namespaces/kube-system/pods/dcgm-x")
    assert not fake.exists("/api/v1/namespaces/default/pods/embed-0")
    again = provider.apply(relayout())
    assert "no change" in again.message
    assert {c["verb"] for c in again.calls} == {"GET"}


def test_relabel_that_fails_restores_the_label_and_uncordons(
    fake: FakeKube, provider: KubeProvider
) -> None:
    fake.hooks.append(MigManager("failed"))
    result = provider.apply(relayout())
    assert result.outcome == "failed"
    assert "reported failed" in result.message and "restored" in result.message
    config, _state, cordoned, annotations = node_state(fake)
    assert (config, cordoned, CORDONED_BY in annotations) == ("all-disabled", False, False)


@pytest.mark.slow
def test_relabel_that_times_out_restores_the_label_and_uncordons(
    fake: FakeKube, provider: KubeProvider, clock: Clock
) -> None:
    fake.hooks.append(MigManager("silent"))
    result = provider.apply(relayout())
    assert result.outcome == "failed" and "no success within 120 s" in result.message
    config, _state, cordoned, _ = node_state(fake)
    assert (config, cordoned) == ("all-disabled", False)
    assert 120 <= clock.now() <= 130


@pytest.mark.slow
def test_eviction_blocked_by_a_budget_aborts_cleanly(
    fake: FakeKube, provider: KubeProvider, clock: Clock
) -> None:
    fake.hooks.append(MigManager("success"))
    fake.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "embed"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "embed"}}},
        },
    )
    result = provider.apply(relayout())
    assert result.outcome == "failed"
    assert "default/embed-0" in result.message and "PodDisruptionBudget" in result.message
    assert node_state(fake) == ("all-disabled", "success", False, {})
    assert fake.exists("/api/v1/namespaces/default/pods/embed-0")
    evictions = [c for c in result.calls if c["path"].endswith("/eviction")]
    assert len(evictions) == 13 and {c["status"] for c in evictions} == {429}
    assert clock.now() == 60
    # A clean abort is not an API failure: the cycle goes on.
    assert provider.halted is None


@pytest.mark.slow
def test_a_node_cordoned_by_someone_else_stays_cordoned(
    fake: FakeKube, provider: KubeProvider
) -> None:
    fake.hooks.append(MigManager("success"))
    fake.mutate(NODE, lambda o: o["spec"].update(unschedulable=True))
    result = provider.apply(relayout())
    assert result.outcome == "applied"
    assert node_state(fake)[:3] == ("all-1g.10gb", "success", True)


def test_relabel_is_revalidated_against_the_node(fake: FakeKube, provider: KubeProvider) -> None:
    missing = provider.apply(relayout(node="gone"))
    assert missing.outcome == "failed" and "not found" in missing.message
    other_pool = provider.apply(relayout(node="spot-a"))
    assert other_pool.outcome == "failed" and "pool spot" in other_pool.message
    assert fake.writes() == []
    details = {"node": "n9", "layout": "x", "new_node": True}
    planned = provider.apply(
        action("capi", 2, 2, decision="relayout", kind="mig-layout", details=details)
    )
    assert planned.outcome == "applied" and "not provisioned yet" in planned.message
    incomplete = provider.apply(
        action("capi", 2, 2, decision="relayout", kind="mig-layout", details={"node": "md-a"})
    )
    assert incomplete.outcome == "failed" and "mig_config" in incomplete.message


def test_dry_run_lists_the_relabel_and_the_wait() -> None:
    from scaler.actuation.kube.providers import build_provider

    provider = build_provider(make_config(), dry_run=True)
    store = provider.session.transport
    store.add(  # type: ignore[attr-defined]
        NODE,
        gpu_node(
            "md-a", {"tiercast.io/pool": "capi", MIG_CONFIG: "all-disabled", MIG_STATE: "success"}
        ),
    )
    fake = FakeKube()
    seed_operator_cluster(fake)
    for path in (
        CLUSTER_POLICY,
        f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/custom-mig-parted-config",
    ):
        store.add(path, fake.get(path))  # type: ignore[attr-defined]
    result = provider.apply(relayout())
    assert result.outcome == "recorded"
    assert [c["verb"] for c in result.calls if c["verb"] != "GET"] == [
        "PATCH",
        "PATCH",
        "WAIT",
        "PATCH",
    ]


# ---- the mig-parted ConfigMap the ClusterPolicy names ---------------------------------------

MIXED = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 2}}]
CONFIG_MAP = f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/custom-mig-parted-config"


def planned(name: str = "tiercast-all-3g.40gb-2x2g.20gb", entry: object = MIXED) -> Action:
    return action(
        "capi",
        2,
        2,
        decision="relayout",
        kind="mig-layout",
        details={"node": "md-a", "layout": name, "mig_parted_entry": entry},
    )


@pytest.mark.slow
def test_a_new_layout_is_added_to_the_configmap_then_applied(
    fake: FakeKube, provider: KubeProvider, clock: Clock
) -> None:
    from tests.gpu_operator import MigManager as OperatorMigManager
    from tests.gpu_operator import default_mig_parted_config

    manager = OperatorMigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    result = provider.apply(planned())
    assert result.outcome == "applied", result.message
    writes = [(c["verb"], c["path"]) for c in result.calls if c["verb"] != "GET"]
    assert writes[0] == ("PATCH", CONFIG_MAP)  # before any cordon
    # Merged: every operator entry kept as it was, tiercast's added under its own name.
    configs = mig_config_map(fake)["mig-configs"]
    operator = default_mig_parted_config()["mig-configs"]
    assert {k: configs[k] for k in operator} == operator
    assert configs["tiercast-all-3g.40gb-2x2g.20gb"] == MIXED
    # The kubelet's refresh of the mounted copy is waited out before the relabel.
    assert clock.slept[0] == 120
    assert manager.applied == [("md-a", "tiercast-all-3g.40gb-2x2g.20gb")]
    alloc = fake.get(NODE)["status"]["allocatable"]
    assert alloc["nvidia.com/mig-3g.40gb"] == "8" and alloc["nvidia.com/mig-2g.20gb"] == "16"
    # A second run finds the entry and the label: nothing written.
    before = len(fake.writes())
    assert "no change" in provider.apply(planned()).message
    assert len(fake.writes()) == before


@pytest.mark.slow
def test_tiercasts_unused_entries_are_removed_and_nothing_else(
    fake: FakeKube, provider: KubeProvider
) -> None:
    from tests.gpu_operator import MigManager as OperatorMigManager
    from tests.gpu_operator import default_mig_parted_config

    old = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 7}}]
    kept = [{"devices": "all", "mig-enabled": True, "mig-devices": {"7g.80gb": 1}}]

    def add(o: dict) -> None:
        doc = yaml.safe_load(o["data"]["config.yaml"])
        doc["mig-configs"] |= {"tiercast-old": old, "tiercast-kept": kept}
        o["data"]["config.yaml"] = yaml.safe_dump(doc, sort_keys=False)

    fake.mutate(CONFIG_MAP, add)
    # md-a leaves tiercast-old; md-b (outside any MIG pool) still names tiercast-kept.
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].update({MIG_CONFIG: "tiercast-old"}))
    fake.mutate(
        "/api/v1/nodes/md-b",
        lambda o: o["metadata"]["labels"].update(
            {MIG_CONFIG: "tiercast-kept", MIG_STATE: "success"}
        ),
    )
    fake.hooks.append(OperatorMigManager("H100-80GB", gpus=8))
    result = provider.apply(planned())
    assert result.outcome == "applied", result.message
    assert "removed unused tiercast-old from ConfigMap custom-mig-parted-config" in result.message
    configs = mig_config_map(fake)["mig-configs"]
    operator = default_mig_parted_config()["mig-configs"]
    # Every operator entry stays, named by a node or not; tiercast's in use stay too.
    assert set(configs) == set(operator) | {"tiercast-kept", "tiercast-all-3g.40gb-2x2g.20gb"}
    assert {k: configs[k] for k in operator} == operator
    # The prune is one JSON merge patch carrying the resourceVersion it read.
    patches = [c for c in result.calls if c["verb"] == "PATCH" and c["path"] == CONFIG_MAP]
    assert len(patches) == 2 and patches[-1]["body"]["metadata"]["resourceVersion"]
    # md-a moves on to one of the operator's names: the entry it left goes the same way.
    fake.hooks.append(OperatorMigManager("H100-80GB", gpus=8))
    again = provider.apply(planned("all-1g.10gb", None))
    assert again.outcome == "applied"
    assert again.message.endswith(
        "removed unused tiercast-all-3g.40gb-2x2g.20gb from ConfigMap custom-mig-parted-config"
    )
    assert set(mig_config_map(fake)["mig-configs"]) == set(operator) | {"tiercast-kept"}
    # Nothing left to remove: the next relayout writes no prune.
    fake.hooks.append(OperatorMigManager("H100-80GB", gpus=8))
    last = provider.apply(planned("all-disabled", None))
    assert last.outcome == "applied" and "removed" not in last.message
    assert "tiercast-kept" in mig_config_map(fake)["mig-configs"]


@pytest.mark.slow
def test_the_operators_own_configmap_is_never_edited(
    fake: FakeKube, provider: KubeProvider
) -> None:
    fake.mutate(
        CLUSTER_POLICY,
        lambda o: o["spec"]["migManager"]["config"].update(name="default-mig-parted-config"),
    )
    seed_operator_cluster_copy(fake, "default-mig-parted-config")
    result = provider.apply(planned())
    assert result.outcome == "failed" and "rewrites" in result.message
    assert not fake.writes() and node_state(fake)[:3] == ("all-disabled", "success", False)
    # A name already there is applied as it is.
    fake.hooks.append(MigManager("success"))
    assert provider.apply(relayout("all-3g.40gb")).outcome == "applied"


def seed_operator_cluster_copy(fake: FakeKube, name: str) -> None:
    cm = fake.get(CONFIG_MAP)
    cm["metadata"] = {"name": name}
    fake.create(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps", cm)


def test_a_name_with_other_content_or_no_operator_is_refused(
    fake: FakeKube, provider: KubeProvider
) -> None:
    other = [{"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": 1}}]
    result = provider.apply(planned("all-1g.10gb", other))
    assert result.outcome == "failed" and "never replaces" in result.message
    fake.delete_object(CLUSTER_POLICY)
    result = provider.apply(planned())
    assert result.outcome == "failed" and "GPU Operator installed" in result.message
    assert not fake.writes()


def test_a_mixed_layout_is_refused_under_the_single_strategy(
    fake: FakeKube, provider: KubeProvider
) -> None:
    fake.mutate(CLUSTER_POLICY, lambda o: o["spec"]["mig"].update(strategy="single"))
    step = planned()
    step.details["needs_mixed_strategy"] = True
    result = provider.apply(step)
    assert result.outcome == "failed" and "mig.strategy=mixed" in result.message
    assert not fake.writes()


def test_mig_inventory_covers_the_pools_this_provider_acts_on() -> None:
    from scaler.actuation.kube.providers import build_provider
    from scaler.config import parse_config

    pool = {"tier": "reserved", "gpu_model": "A100-80GB", "gpus_per_node": 2}
    cfg = parse_config(
        {
            "signals": [{"name": "s"}],
            "workloads": [
                {"name": "w", "signal": "s", "gpu_model": "A100", "units_per_replica": 1}
            ],
            "pools": [
                {**pool, "name": "rec", "price_per_gpu_hour": 1.0, "current_nodes": 1,
                 "mig_layouts": ["1g.10gb:7"]},
                {**pool, "name": "md", "price_per_gpu_hour": 1.0, "current_nodes": 2,
                 "mig_layouts": ["3g.40gb:2", "whole"],
                 "provider": {"kind": "cluster-api", "machine_deployment": "md"}},
            ],
        }
    )  # fmt: skip
    # The offline dry-run seeds a GPU Operator cluster from mig_layouts and reads it back.
    states, known = build_provider(cfg, dry_run=True).mig_inventory()
    assert states is not None and known is not None
    assert set(states) == {"md"}  # the recording pool keeps its configured layouts
    (a, b) = states["md"]
    assert (a.name, a.mig_config, a.held) == ("md-0", "tiercast-all-2x3g.40gb", None)
    assert a.current[0].count("3g.40gb") == 2 and b.current == (Layout(whole=True),) * 2
    assert b.mig_config == "all-disabled" and a.mig_config in known


def test_a_node_of_another_gpu_model_is_held_and_never_relabelled(
    fake: FakeKube, provider: KubeProvider
) -> None:
    from scaler.actuation.kube.inventory import mig_node_state, node_info

    # GPU feature discovery says A100 80GB; the pool says H100-80GB.
    fake.mutate(
        NODE,
        lambda o: o["metadata"]["labels"].update(
            {"nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB"}
        ),
    )
    fake.hooks.append(MigManager("success"))
    result = provider.apply(relayout())
    assert result.outcome == "failed"
    assert result.message == (
        "node md-a: nvidia.com/gpu.product=NVIDIA-A100-SXM4-80GB is not pool capi's H100-80GB; "
        "fix the pool's gpu_model or its node selector; nothing changed"
    )
    assert not fake.writes()
    # The inventory holds it, with the same line, so the planner never relayouts it.
    cfg = make_config()
    disabled = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    info = node_info(fake.get(NODE), cfg.pools, cfg.kubernetes, {"md-a": "capi"})
    state = mig_node_state(info, cfg.pools[0], disabled, "mixed")
    assert state.held is not None
    assert "NVIDIA-A100-SXM4-80GB is not pool capi's H100-80GB" in state.held
    # The same model in another spelling (the single strategy's MIG suffix) is fine.
    fake.mutate(
        NODE,
        lambda o: o["metadata"]["labels"].update(
            {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}
        ),
    )
    info = node_info(fake.get(NODE), cfg.pools, cfg.kubernetes, {"md-a": "capi"})
    assert mig_node_state(info, cfg.pools[0], disabled, "mixed").held is None
