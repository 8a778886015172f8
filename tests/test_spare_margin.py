"""The near-term margin learnt on the fleet it plans for: spot spares held against reclaims
count as capacity where no reclaim is pending (scaler.planning.margins.SpareCover)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy.stats import binom

from scaler.config import Config, parse_config
from scaler.planning.margins import Margin, SpareCover, learn_margin, replay_rule
from scaler.planning.tiers import signal_granule, signal_spares

NOW = pd.Timestamp("2026-03-02T00:00:00")
STEP = pd.Timedelta(minutes=5)


def _spiky(n: int = 1200) -> np.ndarray:
    """A level of 40 with a rise of 5 for two steps every 50 minutes: less than a node's 8."""
    y = np.full(n, 40.0)
    for i in range(5, n, 10):
        y[i : i + 2] = 45.0
    return y


def _history(y: np.ndarray) -> pd.Series:
    return pd.Series(y, index=pd.date_range(NOW - len(y) * STEP, periods=len(y), freq=STEP))


def _config(pools: list[dict[str, object]]) -> Config:
    shape = {"gpu_model": "H100-80GB", "gpus_per_node": 8, "lead_time_s": 600}
    return parse_config(
        {
            "signals": [{"name": "rps", "step_s": 300}],
            "workloads": [
                {"name": "chat", "signal": "rps", "gpu_model": "H100-80GB", "units_per_replica": 2}
            ],
            "pools": [{**shape, **p} for p in pools],
            "policy": {"quantile": 0.9, "cycle_s": 300},
        },
        source="test",
    )


def test_the_free_spares_follow_the_binomial_reclaims() -> None:
    cover = SpareCover.of(committed=16.0, unit=8.0, nodes=10, loss=0.05, spares=2)
    k = binom(10, 0.05)
    assert cover.count == 2
    # Two free with no reclaim, one with one, none with two or more.
    assert cover.free == pytest.approx((k.sf(1), k.pmf(1), k.pmf(0)))
    assert sum(cover.free) == pytest.approx(1.0)


def test_a_spare_serves_what_the_capacity_misses_unless_a_reclaim_holds_it() -> None:
    y = _spiky()
    plain_u, plain_c = replay_rule(y, 2, 1, np.array([0.0]), granule=8.0)
    cover = SpareCover.of(committed=0.0, unit=8.0, nodes=4, loss=0.1, spares=1)
    u, c = replay_rule(y, 2, 1, np.array([0.0]), granule=8.0, spares=cover)
    # Every miss (5 of a rise) is within one spare: unserved only where it is reclaimed.
    assert plain_u[0] > 0
    assert u[0] == pytest.approx(cover.free[0] * plain_u[0])
    # The spare is held (and paid) at every step.
    assert c[0] == pytest.approx(plain_c[0] + 8.0 * plain_c[0] / 40.0, rel=0.02)


def test_no_spare_is_held_where_the_commitment_serves_the_request() -> None:
    y = _spiky()
    plain = replay_rule(y, 2, 1, np.array([0.0, 0.1]), granule=8.0)
    cover = SpareCover.of(committed=64.0, unit=8.0, nodes=4, loss=0.1, spares=1)
    held = replay_rule(y, 2, 1, np.array([0.0, 0.1]), granule=8.0, spares=cover)
    assert held[0] == pytest.approx(plain[0]) and held[1] == pytest.approx(plain[1])


def test_the_margin_does_not_cover_again_what_the_spares_cover() -> None:
    h = _history(_spiky())
    cover = SpareCover.of(committed=0.0, unit=8.0, nodes=4, loss=0.01, spares=1)

    # No hold: each rise is a miss the margin or a spare must cover.
    def learn(spares: SpareCover | None) -> Margin | None:
        return learn_margin(
            h, 600, 0.001, granule=8.0, reactive_headroom=None, floor_window=STEP, spares=spares
        )

    alone, spared = learn(None), learn(cover)
    assert alone is not None and spared is not None
    assert alone.margin > 0 and spared.margin == 0.0
    assert spared.unserved_share <= 0.001
    # Without spares the margin is exactly the one learnt before.
    before = learn_margin(h, 600, 0.001, granule=8.0, reactive_headroom=None, floor_window=STEP)
    assert before == alone


def test_the_spares_are_the_planners_and_only_where_spot_serves() -> None:
    on_demand = {"name": "od", "tier": "on-demand", "price_per_gpu_hour": 4.0, "max_nodes": 50}
    reserved = {
        "name": "res",
        "tier": "reserved",
        "price_per_gpu_hour": 2.4,
        "min_nodes": 3,
        "max_nodes": 3,
    }
    spot = {
        "name": "spot",
        "tier": "spot",
        "price_per_gpu_hour": 1.4,
        "max_nodes": 10,
        "spot_interruption_rate_per_hour": 0.05,
    }
    plain = _config([on_demand])
    assert signal_spares(plain.fleet, "rps", plain.policy) is None
    tiered = _config([on_demand, reserved, spot])
    cover = signal_spares(tiered.fleet, "rps", tiered.policy)
    assert cover is not None
    # 8 GPUs a node, 2 units a GPU: a node serves 16 units, the 3 reserved nodes 48.
    assert cover.unit == signal_granule(tiered.fleet, "rps") == 16.0
    assert cover.committed == 48.0
    # Reclaims over a replacement window (lead time + a cycle) at 5%/h, 10 nodes: N+1.
    loss = 0.05 * (600 + 300) / 3600
    assert cover.count == 1
    assert cover.free == pytest.approx((binom(10, loss).sf(0), binom(10, loss).pmf(0)))
