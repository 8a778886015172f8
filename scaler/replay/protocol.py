"""The replay's constants and its input: :class:`ReplaySetup` (the published protocol's
numbers) and :class:`Trace` (a signal on the 5-minute grid, split into training and test).

The rules these feed are described in :mod:`scaler.replay.simulating`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.series import clean_series, infer_step

STEP = pd.Timedelta(minutes=5)
STEP_H = STEP / pd.Timedelta(hours=1)
STEPS_PER_DAY = int(pd.Timedelta(days=1) / STEP)


@dataclass(frozen=True)
class ReplaySetup:
    """The protocol's constants; the defaults are the published protocol."""

    gpus_per_node: int = 8
    price_per_gpu_hour: float = 4.0
    """On-demand price, and the price of every node in the single-tier replay."""
    lead_time_s: int = 600
    """Seconds a node must be requested before it serves. Default 600 (2 steps)."""
    static_headroom: float = 0.1
    """Static fleet: training peak times (1 + this)."""
    reactive_headroom: float = 0.2
    """Reactive: last demand times (1 + this)."""
    reactive_hold_s: int = 1800
    """Reactive: the target must have been lower this long before it is lowered. The
    frontier (scaler.replay.frontier) also holds it as long as the planner does
    (:func:`planner_hold_s`) and takes the cheaper at each level of service."""
    test_days: int = 7
    """Days replayed; ``short_test_days`` for series of ``short_series_days`` or less."""
    short_test_days: int = 4
    short_series_days: int = 14
    reforecast_s: int = 3600
    """Predictive: how often (simulated seconds) the forecast is refreshed."""
    lookback_s: int = 28 * 86400
    """Predictive: history given to the forecaster each refresh: four weeks, so that
    weekly patterns have whole seasons to learn from."""
    forecast_method: str = "auto"
    quantile: float = 0.9
    """Predictive: forecast quantile the planner covers."""
    growth_backtest_s: int = 7 * 86400
    """Predictive: span of the training period's end over which the forecaster is walked
    forward (refreshed every ``reforecast_s``) to calibrate its growth quantile
    (scaler.planning.growth); 0: the near-term rule never uses the forecast."""
    growth_refresh_s: int | None = None
    """Predictive: how often that backtest refreshes its forecast (None: every
    ``reforecast_s``, the published protocol). ``simulate --config`` takes the file's
    ``policy.growth_refresh_s`` and ``policy.growth_backtest_s``, as the product runs them."""
    headroom_fraction: float = 0.1
    """Predictive: policy.headroom_fraction, the margin only where a signal has too little
    history to learn its own (scaler.planning.margins); the replay's training period always has."""
    stabilization_s: int = 1200
    """Predictive: policy.scale_down_stabilization_s. 1200: with the 10-minute lead time
    the hold window (lead + stabilization) is the 30 minutes over which reversals are
    counted and reactive holds its target (chosen on servegen and azure_vm2019: 600
    gave m_small 58 reversals instead of 13 for no saving)."""
    unserved_budget: float = 0.005
    """Predictive: policy.unserved_budget, what the learnt margin may leave unserved
    in the walk-forward replay of the training period (scaler.planning.margins)."""
    horizon_s: int = 3600
    """Predictive: planning horizon of each step's plan (only the first step is acted on)."""
    # Tier replay.
    reserved_price_per_gpu_hour: float = 2.40
    spot_price_per_gpu_hour: float = 1.40
    spot_interruption_rate_per_hour: float = 0.05
    spot_max_share: float = 0.5
    """Spot market depth: at most this share of the training peak's nodes can be spot."""
    commitment_history_s: int = 14 * 86400
    """The reserved commitment is sized on the training period's last this many seconds:
    the history a cluster's Prometheus keeps by default (15 days), and the level demand
    has now rather than the one it had a month before (0: the whole training period)."""
    seed: int = 0
    reversal_window_s: int = 1800
    """A change of a pool's request undone within this many seconds is a reversal."""

    @property
    def lead_steps(self) -> int:
        return math.ceil(self.lead_time_s / STEP.total_seconds())

    @property
    def node_price_per_step(self) -> float:
        return self.gpus_per_node * self.price_per_gpu_hour * STEP_H


@dataclass(frozen=True)
class Trace:
    """A signal on the 5-minute replay grid and the demand in GPUs it implies."""

    name: str
    signal: pd.Series
    """Signal on the 5-minute grid; NaN where the source has a gap."""
    demand: np.ndarray
    """GPUs per step, gaps holding the last known value (for scoring)."""
    units_per_gpu: float
    test_start: int
    """Index of the first test step."""
    hold: int = 1
    """5-minute steps per source interval (6 for a 30-minute source)."""

    def visible_end(self, t: int) -> int:
        """Steps visible to the decision at step ``t``: those whose source interval ended by t."""
        return (t // self.hold) * self.hold

    def visible_demand(self, t: int) -> float:
        """The newest demand the decision at step ``t`` knows (the scored demand, held over gaps)."""
        end = self.visible_end(t)
        return float(self.demand[end - 1]) if end > 0 else 0.0

    @property
    def index(self) -> pd.DatetimeIndex:
        return pd.DatetimeIndex(self.signal.index)

    @property
    def test_index(self) -> pd.DatetimeIndex:
        return self.index[self.test_start :]


def planner_hold_s(setup: ReplaySetup) -> int:
    """Seconds the replayed planner holds capacity: lead time + stabilization, the window
    its hysteresis and observed floor look back over (``_hold_window`` of
    :mod:`scaler.replay.walkforward`, from the same setup): 30 minutes at the 10-minute
    lead, 40 at 20, 60 at 40."""
    return setup.lead_time_s + setup.stabilization_s


def prepare_trace(
    series: pd.Series, units_per_gpu: float, setup: ReplaySetup | None = None
) -> Trace:
    """Put ``series`` on the 5-minute grid (holding coarser values) and split off the test period."""
    setup = setup or ReplaySetup()
    if not units_per_gpu > 0:
        raise BadInputError(f"--units-per-gpu must be > 0; got {units_per_gpu!r}")
    name = str(series.name or "demand")
    s = clean_series(series, name=name)
    if s.notna().sum() < 2:
        raise BadInputError(f"series {name!r} has fewer than 2 observed values; nothing to replay")
    native = _source_step(s.dropna(), name)
    signal = _on_replay_grid(s, native, name)
    demand = np.ceil(signal.ffill().fillna(0.0).to_numpy() / units_per_gpu - 1e-9)
    test_start = _test_start(pd.DatetimeIndex(signal.index), setup, name)
    return Trace(
        name, signal, np.maximum(demand, 0.0), units_per_gpu, test_start, int(native / STEP)
    )


def _source_step(observed: pd.Series, name: str) -> pd.Timedelta:
    """The source's own step, which must be a multiple of the 5-minute replay step."""
    native = infer_step(observed)
    if native < STEP or native % STEP != pd.Timedelta(0):
        raise BadInputError(
            f"series {name!r} has a step of {native}; the replay needs a multiple of 5 minutes"
        )
    return native


def _on_replay_grid(s: pd.Series, native: pd.Timedelta, name: str) -> pd.Series:
    """``s`` on the 5-minute grid: each source value held over its 5-minute steps."""
    s = s.resample(native, origin="epoch").mean()
    hold = int(native / STEP)
    grid = pd.date_range(s.index[0], s.index[-1] + native - STEP, freq=STEP, name="timestamp")
    # Hold each value over its 5-minute steps, but never across a gap of the source.
    signal = s.reindex(grid).ffill(limit=hold - 1) if hold > 1 else s.reindex(grid)
    return signal.clip(lower=0.0).rename(name)


def _test_start(grid: pd.DatetimeIndex, setup: ReplaySetup, name: str) -> int:
    """Index of the first test step: the last ``test_days`` (or ``short_test_days``)."""
    span = grid[-1] - grid[0] + STEP
    days = (
        setup.short_test_days
        if span <= pd.Timedelta(days=setup.short_series_days)
        else setup.test_days
    )
    start = grid[-1] + STEP - pd.Timedelta(days=days)
    test_start = int(np.searchsorted(grid.asi8, start.value))
    if test_start < STEPS_PER_DAY:
        raise BadInputError(
            f"series {name!r} spans {span}; the replay needs at least one day of training "
            f"before its {days}-day test period"
        )
    return test_start
