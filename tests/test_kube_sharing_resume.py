"""No node left cordoned: a sharing change or a MIG relayout killed at any step is finished or
rolled back by the next run; a shutdown request ends every wait; MPS waits for its daemon; a
ConfigMap RBAC does not grant refuses one action, not the cycle.

Against the fake API server with the fake device plugin, GPU feature discovery and MPS control
daemon (tests/fake_device_plugin.py) and the fake MIG manager (tests/gpu_operator.py). A run is
"killed" as in tests/test_kube_mig_resume.py: a :class:`Killed` (a ``BaseException``, as SIGKILL
leaves nothing to catch) raised at the k-th wait or right after the k-th write to the node.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.actuation.kube.device_plugin import CONFIG_LABEL
from scaler.actuation.kube.inventory import MIG_CONFIG, MIG_STATE, SHARING_ANNOTATION
from scaler.actuation.kube.mig_relabel import CORDONED_BY
from scaler.actuation.kube.providers import KubeProvider
from scaler.planning.mig.state import RELAYOUT_ANNOTATION
from tests.fake_device_plugin import DevicePlugin, mps_daemon_ready
from tests.fake_kube import Clock, FakeKube, pod, start_fake
from tests.gpu_operator import (
    OPERATOR_NS,
    gfd_view,
    seed_device_plugin_config,
    seed_operator_cluster,
)
from tests.test_device_plugin import DP_CONFIG, DP_PATH, NODE, share
from tests.test_kube_mig import kube_provider
from tests.test_kube_mig_resume import provider_on, relayout, resume_of, step_of
from tests.test_kube_providers import action, seed


class Killed(BaseException):
    """The run's process ends here: nothing runs after it."""


def sharing_cluster(mps_ready_after: int = 3) -> tuple[FakeKube, DevicePlugin]:
    """md-a time-sliced 4 ways with a GPU pod running: moving it to MPS takes its devices,
    so tiercast cordons and drains it first."""
    fake = start_fake()
    seed(fake)
    seed_device_plugin_config(fake, DP_CONFIG, "single")
    labels, alloc = gfd_view("NVIDIA-H100-80GB-HBM3", 8, "none")

    def gfd(o: dict[str, Any]) -> None:
        o["metadata"]["labels"].update(labels)
        o["status"]["allocatable"].update(alloc)

    fake.mutate(NODE, gfd)
    plugin = DevicePlugin(mps_ready_after=mps_ready_after)
    fake.hooks.append(plugin)
    return fake, plugin


def shared_time_slicing(fake: FakeKube, tmp_path: Path, clock: Clock) -> None:
    assert kube_provider(fake, tmp_path, clock).apply(share("time-slicing", 4)).outcome == "applied"
    fake.create("/api/v1/namespaces/default/pods", pod("embed-0", "default", "md-a", gpus=1))


def killing(provider: KubeProvider, clock: Clock, at: tuple[str, int]) -> None:
    """Kill ``provider``'s run at its ``at[1]``-th wait (``sleep``) or right after its
    ``at[1]``-th node write (``write``)."""
    kind, k = at
    seen = [0]
    if kind == "sleep":

        def sleep(seconds: float) -> None:
            seen[0] += 1
            if seen[0] == k:
                raise Killed()
            clock.sleep(seconds)

        provider.mig.sleep = sleep
        return
    real = provider.session.request

    def request(verb: str, path: str, *args: Any, **kwargs: Any) -> dict[str, Any]:
        out = real(verb, path, *args, **kwargs)
        if verb == "PATCH" and path.startswith("/api/v1/nodes/"):
            seen[0] += 1
            if seen[0] == k:
                raise Killed()
        return out

    provider.session.request = request  # type: ignore[method-assign]


def not_cordoned_by_tiercast(fake: FakeKube, path: str) -> None:
    obj = fake.get(path)
    annotations = obj["metadata"].get("annotations") or {}
    assert not obj["spec"].get("unschedulable"), annotations
    assert CORDONED_BY not in annotations
    assert SHARING_ANNOTATION not in annotations and RELAYOUT_ANNOTATION not in annotations


KILL_POINTS = [("sleep", k) for k in range(1, 5)] + [("write", k) for k in range(1, 4)]


@pytest.mark.slow
def test_a_sharing_change_killed_at_any_step_is_finished_or_rolled_back_by_the_next_run(
    tmp_path: Path,
) -> None:
    killed_at: list[tuple[str, int]] = []
    for at in KILL_POINTS:
        fake, _plugin = sharing_cluster()
        try:
            clock = Clock()
            shared_time_slicing(fake, tmp_path, clock)
            first = kube_provider(fake, tmp_path, clock)
            killing(first, clock, at)
            try:
                first.apply(share("mps", 4))
            except Killed:
                killed_at.append(at)
            # The next run: its inventory finishes or rolls back what the first left.
            second = kube_provider(fake, tmp_path, clock)
            second.inventory()
            not_cordoned_by_tiercast(fake, NODE)
            labels = fake.get(NODE)["metadata"]["labels"]
            assert labels[CONFIG_LABEL] in ("tiercast-time-slicing-4", "tiercast-mps-4"), at
            if labels[CONFIG_LABEL] == "tiercast-mps-4":
                assert labels["nvidia.com/gpu.sharing-strategy"] == "mps", at
                assert mps_daemon_ready(fake, "md-a"), at
            # ... and the change can be made again, to its end.
            result = second.apply(share("mps", 4))
            assert result.outcome == "applied", (at, result.message)
            not_cordoned_by_tiercast(fake, NODE)
        finally:
            fake.stop()
    # Every step was reached: the cordon, the relabel and the end, and waits in between.
    assert ("write", 1) in killed_at and ("write", 2) in killed_at and ("write", 3) in killed_at
    assert len([k for k in killed_at if k[0] == "sleep"]) >= 3, killed_at


@pytest.fixture
def mig_fake() -> Iterator[FakeKube]:
    from tests.gpu_operator import MigManager

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
    f.hooks.append(MigManager("H100-80GB", gpus=8, after=3, clock=None))
    yield f
    f.stop()


@pytest.mark.slow
@pytest.mark.parametrize("at", [("sleep", 1), ("sleep", 3), ("write", 1), ("write", 2)])
def test_a_relayout_killed_at_any_step_leaves_no_node_cordoned_after_the_next_run(
    mig_fake: FakeKube, tmp_path: Path, at: tuple[str, int]
) -> None:
    clock = Clock()
    first = provider_on(mig_fake, tmp_path, clock)
    killing(first, clock, at)
    with pytest.raises(Killed):
        first.apply(relayout())
    second = provider_on(mig_fake, tmp_path, clock)
    second.inventory()
    if step_of(mig_fake) is not None:  # the planner's resume action finishes it
        result = second.apply(resume_of(second))
        assert result.outcome == "applied", result.message
    not_cordoned_by_tiercast(mig_fake, NODE)


# ---- a shutdown request ends every wait -----------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("wait", ["configmap refresh", "gpu feature discovery"])
def test_a_shutdown_request_ends_the_sharing_waits_and_rolls_back(
    tmp_path: Path, wait: str
) -> None:
    """With real time: the stop comes 0.2 s into a wait of 30 s; the action ends at once."""
    fake, plugin = sharing_cluster()
    try:
        clock = Clock()
        shared_time_slicing(fake, tmp_path, clock)
        if wait == "gpu feature discovery":
            fake.hooks.remove(plugin)  # nothing ever shows the sharing
        provider = kube_provider(
            fake, tmp_path, clock, mig_config_sync_s=30, mig_timeout_s=30, poll_interval_s=5
        )
        provider.clock, provider.mig.clock, provider.sharing.clock = (time.monotonic,) * 3
        provider.sleep = provider.mig.sleep = time.sleep
        stop = threading.Event()
        provider.stop_waits_on(stop)
        if wait == "gpu feature discovery":
            from scaler.actuation.kube.device_plugin import render, sharing_config

            fake.mutate(  # the config is there already: no refresh to wait out
                DP_PATH,
                lambda o: o["data"].update({"tiercast-mps-4": render(sharing_config("mps", 4))}),
            )
        timer = threading.Timer(0.2, stop.set)
        started = time.monotonic()
        timer.start()
        result = provider.apply(share("mps", 4))
        elapsed = time.monotonic() - started
        timer.cancel()
        assert elapsed < 2, (elapsed, result.message)
        assert result.outcome == "failed" and "stopped by shutdown" in result.message
        not_cordoned_by_tiercast(fake, NODE)
        assert fake.get(NODE)["metadata"]["labels"][CONFIG_LABEL] == "tiercast-time-slicing-4"
    finally:
        fake.stop()


# ---- MPS: uncordoned once the daemon is up ------------------------------------------------


@pytest.mark.slow
def test_an_mps_node_is_uncordoned_only_once_the_mps_daemon_is_ready(tmp_path: Path) -> None:
    fake, _plugin = sharing_cluster(mps_ready_after=4)
    try:
        clock = Clock()
        shared_time_slicing(fake, tmp_path, clock)
        seen: list[bool] = []

        def at_uncordon(f: FakeKube, request: Any) -> None:
            body = request.body if isinstance(request.body, dict) else {}
            uncordon = "spec" in body and body["spec"].get("unschedulable") is None
            if request.method == "PATCH" and request.path == NODE and uncordon:
                seen.append(mps_daemon_ready(f, "md-a"))

        fake.hooks.append(at_uncordon)
        result = kube_provider(fake, tmp_path, clock).apply(share("mps", 4))
        assert result.outcome == "applied", result.message
        assert seen == [True]
        not_cordoned_by_tiercast(fake, NODE)
    finally:
        fake.stop()


# ---- a ConfigMap outside RBAC refuses one action -------------------------------------------


def test_a_config_map_rbac_does_not_grant_refuses_that_action_not_the_cycle(
    tmp_path: Path,
) -> None:
    fake, _plugin = sharing_cluster()
    try:
        clock = Clock()
        other = "someone-elses-config"
        fake.mutate(
            "/apis/nvidia.com/v1/clusterpolicies/cluster-policy",
            lambda o: o["spec"].update({"devicePlugin": {"config": {"name": other}}}),
        )
        fake.forbidden.add(f"/api/v1/namespaces/{OPERATOR_NS}/configmaps/{other}")
        provider = kube_provider(fake, tmp_path, clock)
        result = provider.apply(share("time-slicing", 4))
        assert result.outcome == "failed"
        assert "not one tiercast's RBAC grants" in result.message and "\n" not in result.message
        assert provider.halted is None
        assert provider.apply(action("capi", 2, 3)).outcome == "applied"
        assert CONFIG_LABEL not in fake.get(NODE)["metadata"]["labels"]
    finally:
        fake.stop()
