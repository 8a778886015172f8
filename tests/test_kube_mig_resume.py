"""A MIG relayout that outlives a run, a MIG manager as strict as the real one, and Karpenter.

Against the fake API server with the fixtures' rules taken from upstream:

* the MIG manager (:class:`tests.gpu_operator.MigManager`, NVIDIA/mig-parted
  ``cmd/nvidia-mig-manager/main.go`` and ``pkg/mig/reconfigure/reconfigure.go``) acts on
  a change of the label's value only and reads a mounted copy of the ConfigMap that lags
  the API by 95 s;
* Karpenter's emptiness consolidation (:class:`tests.fake_karpenter.Consolidation`,
  kubernetes-sigs/karpenter ``pkg/controllers/disruption/``) deletes an empty node of a
  dynamic NodePool, cordoned or not, unless it is annotated ``karpenter.sh/do-not-disrupt``.

A run is "killed" by a sleep that raises :class:`Killed` (a ``BaseException``, as
SIGKILL leaves nothing to catch): the next run, a fresh provider, must finish the change.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE
from scaler.actuation.kube.karpenter import DO_NOT_DISRUPT
from scaler.actuation.kube.mig_parted import ADDED_AT
from scaler.actuation.kube.mig_relabel import CORDONED_BY
from scaler.actuation.kube.providers import KubeProvider
from scaler.catalog.mig import Layout
from scaler.planning.mig.state import RELAYOUT_ANNOTATION, MigNodeState, Relayout, with_relayout
from scaler.plans import Action
from scaler.service.guarded import GuardedProvider
from scaler.service.runs import Stop
from scaler.service.telemetry import Telemetry
from tests.fake_karpenter import Consolidation
from tests.fake_kube import Clock, FakeKube, pod, start_fake
from tests.gpu_operator import MigManager, mig_config_map, seed_operator_cluster
from tests.test_kube_mig import kube_provider
from tests.test_kube_providers import action, seed

NODE = "/api/v1/nodes/md-a"
SPOT = "/api/v1/nodes/spot-a"
MIXED = [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": 1, "2g.20gb": 2}}]
NEW = "tiercast-all-3g.40gb-2x2g.20gb"


class Killed(BaseException):
    """The run's process ends here (SIGKILL, the Job's deadline): nothing runs after it."""


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    seed_operator_cluster(f)
    for path in (NODE, SPOT):
        f.mutate(
            path,
            lambda o: o["metadata"]["labels"].update(
                {MIG_CONFIG: "all-disabled", MIG_STATE: "success"}
            ),
        )
    f.create(
        "/api/v1/namespaces/default/pods",
        pod("embed-0", "default", "md-a", {"app": "embed"}, gpus=1),
    )
    yield f
    f.stop()


def relayout(node: str = "md-a", pool: str = "capi", name: str = NEW) -> Action:
    details = {"node": node, "layout": name, "mig_parted_entry": MIXED}
    return action(pool, 2, 2, decision="relayout", kind="mig-layout", details=details)


def provider_on(fake: FakeKube, tmp_path: Path, clock: Clock) -> KubeProvider:
    """A provider on ``fake`` whose ``capi`` and ``spot`` pools are MIG-managed."""
    provider = kube_provider(fake, tmp_path, clock, events=False)
    pools = tuple(
        p.model_copy(update={"mig_layouts": ()}) if p.name in ("capi", "spot") else p
        for p in provider.config.pools
    )
    config = provider.config.model_copy(update={"pools": pools})
    return KubeProvider(
        config, provider.session, clock=clock.now, sleep=clock.sleep, wall=provider.wall
    )


def node(fake: FakeKube, path: str = NODE) -> tuple[str | None, str | None, bool, dict]:
    obj = fake.get(path)
    labels = obj["metadata"]["labels"]
    return (
        labels.get(MIG_CONFIG),
        labels.get(MIG_STATE),
        bool(obj["spec"].get("unschedulable")),
        obj["metadata"].get("annotations") or {},
    )


def kill_when(clock: Clock, condition: Callable[[], bool]) -> Callable[[float], None]:
    """``clock.sleep``, except that the run is killed at the first sleep once ``condition``."""

    def sleep(seconds: float) -> None:
        if condition():
            raise Killed()
        clock.sleep(seconds)

    return sleep


def step_of(fake: FakeKube, path: str = NODE) -> str | None:
    record = Relayout.from_annotations(fake.get(path)["metadata"].get("annotations"))
    return record.step if record is not None else None


def resume_of(provider: KubeProvider, pool: str = "capi") -> Action:
    """The action the next run's planner makes of the node's record (``plan_mig`` does the
    same; the end-to-end test goes through it)."""
    from scaler.planning.mig.actions import resume_action

    states, _ = provider.mig_inventory()
    assert states is not None
    (state,) = [s for s in states.get(pool, []) if s.relayout is not None]
    assert state.held is not None and "in progress" in state.held
    cfg_pool = next(p for p in provider.config.pools if p.name == pool)
    return resume_action(cfg_pool, state, {pool: 2}, pd.Timestamp("2026-12-02T09:10:00"))


# ---- the MIG manager fixture follows the real one ------------------------------------------


def test_the_fake_mig_manager_acts_on_a_new_label_value_only(fake: FakeKube, clock: Clock) -> None:
    """``cmd/nvidia-mig-manager/main.go``: ``UpdateFunc`` hands on a changed value only."""
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    fake.handle("GET", NODE, None, b"", None)  # the manager starts and sees the node
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].pop(MIG_STATE))
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].update({MIG_CONFIG: "all-disabled"}))
    for _ in range(3):
        fake.handle("GET", NODE, None, b"", None)
    assert manager.started == [] and node(fake)[1] is None
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].update({MIG_CONFIG: "all-1g.10gb"}))
    for _ in range(3):
        fake.handle("GET", NODE, None, b"", None)
    assert manager.applied == [("md-a", "all-1g.10gb")] and node(fake)[1] == "success"


def test_the_fake_mig_manager_reads_a_copy_of_the_configmap_that_lags(
    fake: FakeKube, clock: Clock
) -> None:
    """The kubelet refreshes the mounted copy at its next pod sync (up to 90 s), then writes it."""
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    fake.handle("GET", NODE, None, b"", None)
    cm = mig_config_map(fake)
    cm["mig-configs"][NEW] = MIXED
    path = "/api/v1/namespaces/gpu-operator/configmaps/custom-mig-parted-config"
    fake.mutate(path, lambda o: o["data"].update({"config.yaml": yaml.safe_dump(cm)}))
    clock.sleep(90)
    fake.mutate(NODE, lambda o: o["metadata"]["labels"].update({MIG_CONFIG: NEW}))
    fake.handle("GET", NODE, None, b"", None)
    assert node(fake)[1] == "failed"  # 90 s on, the copy still lacks the entry


# ---- tiercast against it ------------------------------------------------------------------


def test_a_label_already_at_the_target_is_not_written_again(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    """Writing the same value would start nothing: refused before any cordon."""
    fake.mutate(
        NODE,
        lambda o: o["metadata"]["labels"].update({MIG_CONFIG: "all-1g.10gb", MIG_STATE: "failed"}),
    )
    fake.hooks.append(MigManager("H100-80GB", gpus=8, clock=clock))
    provider = provider_on(fake, tmp_path, clock)
    operator_entry = {"node": "md-a", "layout": "all-1g.10gb"}
    step = action("capi", 2, 2, decision="relayout", kind="mig-layout", details=operator_entry)
    result = provider.apply(step)
    assert result.outcome == "failed" and "only when the label changes" in result.message
    assert fake.writes() == [] and clock.now() == 0


@pytest.mark.slow
def test_a_later_run_waits_out_the_rest_of_the_configmap_refresh(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    """Run 1 adds the entry and is killed 30 s into the wait; run 2 waits the other 90 s."""
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    first = provider_on(fake, tmp_path, clock)

    def slept_30(seconds: float) -> None:
        clock.sleep(30)
        raise Killed()

    first.mig.sleep = slept_30
    with pytest.raises(Killed):
        first.apply(relayout())
    assert NEW in mig_config_map(fake)["mig-configs"]
    cm = fake.get("/api/v1/namespaces/gpu-operator/configmaps/custom-mig-parted-config")
    assert NEW in cm["metadata"]["annotations"][ADDED_AT]
    assert node(fake)[:3] == ("all-disabled", "success", False)  # nothing on the node yet
    second = provider_on(fake, tmp_path, clock)
    result = second.apply(relayout())
    assert result.outcome == "applied", result.message
    assert clock.slept[0] == 30 and clock.slept[1] == pytest.approx(90)
    assert manager.applied == [("md-a", NEW)]


@pytest.mark.slow
def test_a_run_killed_after_the_relabel_is_finished_by_the_next(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    first = provider_on(fake, tmp_path, clock)
    first.mig.sleep = kill_when(clock, lambda: step_of(fake) == "relabelled")
    with pytest.raises(Killed):
        first.apply(relayout())
    label, _state, cordoned, annotations = node(fake)
    assert (label, cordoned, annotations.get(CORDONED_BY)) == (NEW, True, "true")
    # The MIG manager goes on without tiercast and reaches success; nothing else would
    # uncordon the node now, since it is at the layout a planner would want.
    second = provider_on(fake, tmp_path, clock)
    step = resume_of(second)
    assert step.details["resume"] and step.details["layout"] == NEW
    result = second.apply(step)
    assert result.outcome == "applied", result.message
    assert result.message.startswith("resumed (relabelled since")
    label, state, cordoned, annotations = node(fake)
    assert (label, state, cordoned) == (NEW, "success", False)
    assert RELAYOUT_ANNOTATION not in annotations and CORDONED_BY not in annotations
    assert manager.applied == [("md-a", NEW)]
    # Finished: a third run finds nothing to do.
    again = provider_on(fake, tmp_path, clock).apply(step)
    assert "nothing to finish" in again.message


@pytest.mark.slow
def test_a_run_killed_mid_drain_is_drained_on_and_relabelled_by_the_next(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    fake.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "embed"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "embed"}}},
        },
    )
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    fake.hooks.append(manager)
    first = provider_on(fake, tmp_path, clock)
    first.mig.sleep = kill_when(clock, lambda: clock.now() >= 150)  # 30 s into the drain
    with pytest.raises(Killed):
        first.apply(relayout())
    assert step_of(fake) == "draining" and node(fake)[:3] == ("all-disabled", "success", True)
    fake.delete_object("/apis/policy/v1/namespaces/default/poddisruptionbudgets/embed")
    second = provider_on(fake, tmp_path, clock)
    result = second.apply(resume_of(second))
    assert result.outcome == "applied", result.message
    assert node(fake)[:3] == (NEW, "success", False)
    assert manager.applied == [("md-a", NEW)]


@pytest.mark.slow
def test_a_resumed_drain_keeps_the_first_runs_deadline(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    """``drain_timeout_s`` (60) runs from the drain's start, not from each run's."""
    fake.create(
        "/apis/policy/v1/namespaces/default/poddisruptionbudgets",
        {
            "apiVersion": "policy/v1",
            "kind": "PodDisruptionBudget",
            "metadata": {"name": "embed"},
            "spec": {"minAvailable": 1, "selector": {"matchLabels": {"app": "embed"}}},
        },
    )
    fake.hooks.append(MigManager("H100-80GB", gpus=8, clock=clock))
    first = provider_on(fake, tmp_path, clock)
    first.mig.sleep = kill_when(clock, lambda: clock.now() >= 160)  # 40 s into the drain
    with pytest.raises(Killed):
        first.apply(relayout())
    second = provider_on(fake, tmp_path, clock)
    result = second.apply(resume_of(second))
    assert result.outcome == "failed" and "PodDisruptionBudget" in result.message
    assert clock.now() == 180  # 120 s refresh + the drain's 60 s, across both runs
    label, _state, cordoned, annotations = node(fake)
    assert (label, cordoned, RELAYOUT_ANNOTATION in annotations) == ("all-disabled", False, False)


@pytest.mark.slow
def test_a_failure_found_by_the_next_run_is_rolled_back(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    manager = MigManager("H100-80GB", gpus=8, clock=clock)
    manager.fail = True
    fake.hooks.append(manager)
    first = provider_on(fake, tmp_path, clock)
    first.mig.sleep = kill_when(clock, lambda: step_of(fake) == "relabelled")
    with pytest.raises(Killed):
        first.apply(relayout())
    second = provider_on(fake, tmp_path, clock)
    result = second.apply(resume_of(second))
    assert result.outcome == "failed"
    assert "reported failed" in result.message and "restored" in result.message
    label, _state, cordoned, annotations = node(fake)
    assert (label, cordoned, RELAYOUT_ANNOTATION in annotations) == ("all-disabled", False, False)
    # The restored label is a new value: the MIG manager takes it up (it is already there).
    fake.handle("GET", NODE, None, b"", None)
    assert manager.started[-1] == ("md-a", "all-disabled") and node(fake)[1] == "success"


@pytest.mark.slow
def test_an_entry_a_stopped_relayout_still_needs_is_not_pruned(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    fake.hooks.append(MigManager("H100-80GB", gpus=8, clock=clock))
    record = Relayout("draining", NEW, "all-disabled", "2026-12-02T09:00:00.000000Z")
    fake.mutate(
        "/api/v1/nodes/md-b",
        lambda o: (
            o["metadata"]
            .setdefault("annotations", {})
            .update({RELAYOUT_ANNOTATION: record.to_annotation()})
        ),
    )
    provider = provider_on(fake, tmp_path, clock)
    provider.mig_parted.ensure(NEW, MIXED)
    assert provider.mig_parted.prune() == ""
    assert NEW in mig_config_map(fake)["mig-configs"]


# ---- shutdown ------------------------------------------------------------------------------


@pytest.mark.slow
def test_sigterm_ends_the_wait_for_the_mig_manager_and_leaves_the_step_recorded(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    """The stop flag the service sets on SIGTERM ends the wait (the Job's deadline sends it)."""
    manager = MigManager("H100-80GB", gpus=8, after=100, clock=clock)
    fake.hooks.append(manager)
    stop = Stop()

    def sigterm_when_relabelled(f: FakeKube, _request: Any) -> None:
        if step_of(f) == "relabelled" and clock.now() >= 130:
            stop.set(15)

    fake.hooks.append(sigterm_when_relabelled)
    guarded = GuardedProvider(
        provider_on(fake, tmp_path, clock), act=lambda: True, stop=stop, telemetry=Telemetry()
    )
    result = guarded.apply(relayout())
    assert result.outcome == "failed" and "stopped by shutdown" in result.message
    assert "the next run finishes it" in result.message
    assert guarded.abandoned  # the run ends "abandoned" (exit 143), as after any SIGTERM
    assert clock.now() < 150  # not the 120 s of mig_timeout_s after the relabel at 120 s
    label, _state, cordoned, _ = node(fake)
    assert (label, cordoned, step_of(fake)) == (NEW, True, "relabelled")


# ---- Karpenter ---------------------------------------------------------------------------


@pytest.mark.slow
def test_karpenter_does_not_consolidate_the_drained_node(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    fake.create(
        "/api/v1/namespaces/default/pods",
        pod("chat-0", "default", "spot-a", {"app": "chat"}, gpus=1),
    )
    consolidation = Consolidation(clock)
    fake.hooks += [consolidation, MigManager("H100-80GB", gpus=8, clock=clock)]
    provider = provider_on(fake, tmp_path, clock)
    result = provider.apply(relayout("spot-a", "spot"))
    assert result.outcome == "applied", result.message
    patches = [c for c in result.calls if c["verb"] == "PATCH" and c["path"] == SPOT]
    cordon, _relabel, finish = patches
    assert cordon["body"]["metadata"]["annotations"][DO_NOT_DISRUPT] == "true"
    assert finish["body"]["metadata"]["annotations"][DO_NOT_DISRUPT] is None
    assert finish["body"]["spec"] == {"unschedulable": None}
    # Drained at once, empty through the whole change, and not consolidated: the
    # annotation held Karpenter off until tiercast removed it with the uncordon, after
    # which the empty node goes at Karpenter's next look, as any empty node does.
    last_patch = max(
        i for i, r in enumerate(fake.requests, 1) if r.method == "PATCH" and r.path == SPOT
    )
    assert consolidation.deleted == ["spot-a"] and consolidation.deleted_at[0] > last_patch
    assert clock.now() >= 120


@pytest.mark.slow
def test_a_do_not_disrupt_someone_else_set_stays(
    fake: FakeKube, tmp_path: Path, clock: Clock
) -> None:
    fake.mutate(
        SPOT, lambda o: o["metadata"].setdefault("annotations", {}).update({DO_NOT_DISRUPT: "true"})
    )
    fake.hooks += [Consolidation(clock), MigManager("H100-80GB", gpus=8, clock=clock)]
    result = provider_on(fake, tmp_path, clock).apply(relayout("spot-a", "spot"))
    assert result.outcome == "applied", result.message
    assert node(fake, SPOT)[3].get(DO_NOT_DISRUPT) == "true"
    assert Relayout.from_annotations({RELAYOUT_ANNOTATION: "not json"}) is None


def test_the_planner_finishes_a_recorded_relayout_first() -> None:
    from scaler.planning.mig.plan import plan_mig
    from tests.test_kube_providers import make_config

    cfg = make_config()
    pool = cfg.pools[0].model_copy(update={"mig_layouts": ()})
    cfg = cfg.model_copy(update={"pools": (pool, *cfg.pools[1:])})
    record = Relayout("relabelled", NEW, "all-disabled", "2026-12-02T09:00:00.000000Z")
    state = with_relayout(
        MigNodeState("md-a", (Layout(whole=True),) * 8, NEW, "mixed"),
        {RELAYOUT_ANNOTATION: record.to_annotation()},
    )
    assert state.relayout == record and state.held is not None
    plan = plan_mig(
        cfg.fleet,
        cfg.policy,
        {},
        {"capi": 1},
        pd.Timestamp("2026-12-02T09:10:00"),
        node_states={"capi": [state]},
    )
    first = plan.actions[0]
    assert (first.decision, first.details["node"], first.details["resume"]) == (
        "relayout",
        "md-a",
        True,
    )
    assert "finish the relayout of md-a" in first.reason.text()
    assert not [a for a in plan.actions[1:] if a.decision == "relayout"]
