"""Placeholder priorities the cluster autoscaler acts on.

The cluster autoscaler treats pods below ``--expendable-pods-priority-cutoff`` (default
-10) as expendable: "they don't cause scale up" (kubernetes/autoscaler
``cluster-autoscaler/FAQ.md``, commit 55c37cd, 2026-08-22). A placeholder below it would
hold headroom that no autoscaler ever provisions.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from scaler.actuation.kube.transport import RetryPolicy
from tests.fake_kube import Clock, FakeKube, connect_to, start_fake
from tests.test_kube_config import config_with, error
from tests.test_kube_providers import HOLD, action, provider_for, seed

PRIORITY_CLASS = "/apis/scheduling.k8s.io/v1/priorityclasses/tiercast-placeholder"


@pytest.fixture
def fake() -> Iterator[FakeKube]:
    f = start_fake()
    seed(f)
    yield f
    f.stop()


def test_a_priority_below_the_cutoff_is_refused_in_the_config() -> None:
    msg = error(config_with({"kind": "placeholder", "priority": -11}))
    assert "priority" in msg and "-11" in msg
    msg = error(config_with({"kind": "capacity-buffer", "priority": -1000}))
    assert "priority" in msg and "-1000" in msg


def test_an_existing_class_below_the_cutoff_is_refused_before_any_write(
    fake: FakeKube, tmp_path: Path
) -> None:
    fake.create(
        "/apis/scheduling.k8s.io/v1/priorityclasses",
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": "tiercast-placeholder"},
            "value": -100,
        },
    )
    before = len(fake.writes())
    clock = Clock()
    transport = connect_to(fake, tmp_path, RetryPolicy(1, 0.01, 0.01, sleep=clock.sleep))
    result = provider_for(transport, clock).apply(action("hold", 2, 4))
    assert result.outcome == "failed" and "expendable-pods-priority-cutoff" in result.message
    assert len(fake.writes()) == before and not fake.exists(HOLD)
    fake.mutate(PRIORITY_CLASS, lambda o: o.update(value=-10))
    assert provider_for(transport, clock).apply(action("hold", 2, 4)).outcome == "applied"
