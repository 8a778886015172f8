"""The need of each GPU model on the planning grid: the GPUs the tier plan must cover.

:mod:`scaler.planning.tiers` describes the rule; this module computes it in three steps:

* :func:`demand_levels`: per GPU model, what the forecasts and the newest observations
  say (the quantile demand, the anchored demand with and without margin, the observed
  floor and the newest demand);
* :func:`near_term_need`: the quantile beyond reach, the anchored demand within reach
  and up to lead time + stabilization, never under the observed floor and the keep
  level; the newest observation alone for a model held on bad data;
* :func:`hold_across_cycles`: the need over the hold window raised to what this plan
  or an earlier cycle within it asks for again, never above what is held now.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import Fleet, PolicyConfig, PoolConfig, WorkloadConfig
from scaler.planning.demand import (
    anchored_demand_by_model,
    current_demand_by_model,
    demand_by_model,
    newest_demand_by_model,
)
from scaler.planning.margins import Margin
from scaler.plans import PastCycle
from scaler.wording import HELD_IMPLAUSIBLE, HELD_NO_DATA, HELD_STALE, Reason, legacy


@dataclass(frozen=True)
class DemandLevels:
    """Per GPU model, what the forecasts and the newest observations say, in GPUs."""

    quantile: dict[str, np.ndarray]
    """Forecast demand at the policy quantile, per grid step."""
    observed: dict[str, float]
    """The observed floor: the newest demand (or the window's peak) with its margin."""
    recorded: dict[str, float]
    """The observed floor this cycle records as its own for later cycles' hold rules."""
    anchored: dict[str, np.ndarray]
    """The forecast's predicted change applied to the newest observation, with margin."""
    steady: dict[str, np.ndarray]
    """The anchored demand without margin (the keep level is its window maximum)."""
    newest: dict[str, float]
    """The newest observation alone (what a model held on bad data covers)."""


def demand_levels(
    fleet: Fleet,
    policy: PolicyConfig,
    forecasts: Mapping[str, SeriesForecast],
    history: Mapping[str, pd.Series],
    grid: pd.DatetimeIndex,
    learned: Mapping[str, Margin],
    headroom: Mapping[str, float],
) -> DemandLevels:
    """Every GPU model's demand levels at the policy quantile on ``grid``."""
    # The observed floor keeps the peak of the last lead time + stabilization.
    hold_window = pd.Timedelta(
        seconds=max((p.lead_time_s for p in fleet.pools), default=0)
        + policy.scale_down_stabilization_s
    )
    peaks, record_peaks, peak_headroom = _observed_peaks(
        forecasts, history, learned, headroom, hold_window
    )
    # Near term each signal follows the rule learnt on its own history
    # (scaler.planning.margins): the growth quantile of its forecast, the forecast median's
    # change, or (where the forecast did not pay) its newest value, held flat.
    shaped = {name: near_term_forecast(fc, learned.get(name)) for name, fc in forecasts.items()}
    # The growth rule's floor is the window's peak as observed: its margin is on the growth.
    floor_headroom = {
        name: 0.0
        if name in learned
        and (learned[name].growth is not None or learned[name].leading is not None)
        else m
        for name, m in headroom.items()
    }
    return DemandLevels(
        quantile=demand_by_model(fleet, dict(forecasts), grid, policy.quantile, history),
        observed=current_demand_by_model(
            fleet, dict(forecasts), floor_headroom, peaks, peak_headroom
        ),
        recorded=current_demand_by_model(
            fleet, dict(forecasts), floor_headroom, record_peaks, peak_headroom
        ),
        anchored=anchored_demand_by_model(fleet, shaped, grid, headroom),
        steady=anchored_demand_by_model(fleet, shaped, grid, 0.0),
        newest=newest_demand_by_model(fleet, dict(forecasts)),
    )


def _observed_peaks(
    forecasts: Mapping[str, SeriesForecast],
    history: Mapping[str, pd.Series],
    learned: Mapping[str, Margin],
    headroom: Mapping[str, float],
    hold_window: pd.Timedelta,
) -> tuple[dict[str, float], dict[str, float], dict[str, float]]:
    """Per signal, the peak the observed floor keeps, the value this cycle records, and
    the margin on the peak (only where the rule without the forecast's shape was learnt)."""
    peaks: dict[str, float] = {}
    # What this cycle records as its own near-term need for later cycles' hold rules.
    record_peaks: dict[str, float] = {}
    # The margin on the window's peak: only where the rule without shape was learnt.
    peak_headroom: dict[str, float] = {}
    for name, sf in forecasts.items():
        y = history.get(name)
        if y is None:
            continue
        seen = y[(y.index <= sf.last_timestamp) & (y.index > sf.last_timestamp - hold_window)]
        peaks[name] = max([sf.last_value, *seen.dropna().tolist()])
        if learned.get(name) is not None and not learned[name].forecast_shape:
            # A signal whose margin fell back to the rule without the forecast's shape
            # scales as that rule was replayed (scaler.planning.margins): the largest newest value
            # of the window, with its margin. The cycle records only its newest value
            # with the margin, so that the records do not hold the window's peak for
            # another window on top (that held nodes reacting would not).
            peak_headroom[name] = headroom[name]
            record_peaks[name] = sf.last_value
        else:
            record_peaks[name] = peaks[name]
    return peaks, record_peaks, peak_headroom


def near_term_forecast(fc: SeriesForecast, margin: Margin | None) -> SeriesForecast:
    """``fc`` as the near-term rule anchors it: with its growth quantile applied to the
    newest value and a flat median (the growth rule), as it is (the forecast median's
    change), or with a flat median (the rule without the forecast); the leading rule
    (:mod:`scaler.planning.leading`): the newest value plus its leading signal's share,
    with a flat median."""
    if margin is not None and margin.leading is not None:
        frame = fc.frame.copy()
        frame["q0.5"] = 1.0
        return replace(fc, frame=frame, last_value=fc.last_value + margin.leading.boost)
    if margin is None or (margin.forecast_shape and margin.growth is None):
        return fc
    frame = fc.frame.copy()
    frame["q0.5"] = 1.0
    flat = replace(fc, frame=frame)
    if margin.growth is None:
        return flat
    return replace(flat, last_value=fc.last_value * margin.growth.factor(fc, fc.last_timestamp))


def held_models(
    workloads: Iterable[WorkloadConfig],
    forecasts: Mapping[str, SeriesForecast],
    stale: set[str],
    suspect: Mapping[str, Sequence[Reason] | str] | None = None,
) -> dict[str, list[Reason]]:
    """GPU models fed by a signal that is suspect, stale or missing (those pools hold), and
    why, as reasons (:mod:`scaler.wording`'s ``held.*`` and ``suspect.*`` codes).
    ``suspect``: signal -> what its data was found to be (:mod:`forecaster.suspect`, as
    :func:`scaler.planning.reasons.suspicion_reasons` states it; a sentence is shown as it
    is)."""
    held: dict[str, list[Reason]] = {}
    suspect = suspect or {}
    for w in workloads:
        key = gpu_model(w.gpu_model).name
        if w.signal in suspect:
            why = suspect[w.signal]
            held[key] = (
                [legacy(f"signal {w.signal!r}: {why}")] if isinstance(why, str) else list(why)
            )
        elif w.signal not in forecasts:
            held.setdefault(key, [Reason(HELD_NO_DATA, {"signal": w.signal})])
        elif w.signal in stale:
            held.setdefault(key, [Reason(HELD_STALE, {"signal": w.signal})])
    return held


IMPLAUSIBLE_FACTOR = 1000.0
"""A need over this many times the GPUs a model's pools can hold at most is bad data."""


def implausible_models(pools: Iterable[PoolConfig], levels: DemandLevels) -> dict[str, Reason]:
    """GPU models whose demand is past any plausible need, and why (their pools hold).

    No fleet grows a thousandfold past the most its pools may hold: such a need comes
    from a unit error or a broken exporter, and planning on it would buy each pool's
    maximum. The model is held as on bad data, and its newest demand does not count.
    """
    most: dict[str, int] = {}
    for p in pools:
        key = gpu_model(p.gpu_model).name
        most[key] = most.get(key, 0) + p.max_nodes * p.gpus_per_node
    out: dict[str, Reason] = {}
    for model, cap in sorted(most.items()):
        peaks = [levels.observed.get(model, 0.0), levels.newest.get(model, 0.0)]
        for table in (levels.quantile, levels.anchored):
            values = np.asarray(table.get(model, ()), dtype=float)
            if values.size:
                peaks.append(float(np.nanmax(values)) if not np.isnan(values).all() else 0.0)
        peak = max(peaks)
        if not peak <= IMPLAUSIBLE_FACTOR * max(cap, 1):
            out[model] = Reason(
                HELD_IMPLAUSIBLE,
                {"peak_gpus": peak, "factor": IMPLAUSIBLE_FACTOR, "capacity_gpus": cap},
            )
    return out


@dataclass(frozen=True)
class Reach:
    """One GPU model's windows on the planning grid."""

    lead_max: pd.Timedelta
    """The longest lead time of the model's pools."""
    near: np.ndarray
    """Steps within reach of this cycle's action (before ``now + lead + cycle``)."""
    window: np.ndarray
    """Steps before ``now + lead + stabilization + cycle``: the hold window."""


def reach_of(
    pools: Sequence[PoolConfig],
    grid: pd.DatetimeIndex,
    now: pd.Timestamp,
    cycle: pd.Timedelta,
    stab: pd.Timedelta,
) -> Reach:
    """The windows of the GPU model whose pools are ``pools``."""
    lead_max = pd.Timedelta(seconds=max(p.lead_time_s for p in pools))
    near = grid < now + lead_max + cycle
    window = grid < now + lead_max + stab + cycle
    return Reach(lead_max, near, window)


def window_max(
    values: np.ndarray, grid: pd.DatetimeIndex, start: pd.Timestamp, end: pd.Timestamp
) -> float:
    """The largest of ``values`` on the grid steps in ``[start, end)``."""
    mask = (grid >= start) & (grid < end)
    if not mask.any():
        # The window starts past the horizon: use the last planned step.
        mask = grid == grid[-1] if start >= grid[-1] else grid >= start
    return float(np.max(values[mask]))


def near_term_need(
    levels: DemandLevels,
    model: str,
    grid: pd.DatetimeIndex,
    now: pd.Timestamp,
    reach: Reach,
    stab: pd.Timedelta,
    cycle: pd.Timedelta,
    held: bool,
) -> tuple[np.ndarray, float]:
    """``model``'s need per step before the hold across cycles, and the near-term need
    this cycle records for later cycles' hold rules."""
    n = len(grid)
    near, window = reach.near, reach.window
    floor = levels.observed.get(model, 0.0)
    anchor = levels.anchored.get(model, np.zeros(n))
    keep = 0.0
    if held:
        # Stale or missing data: no forecast counts, only the demand already
        # observed; the pools hold (lower bound) and grow only where it exceeds them.
        need = np.full(n, levels.newest.get(model, 0.0))
    else:
        keep = window_max(
            levels.steady.get(model, np.zeros(n)), grid, now, now + reach.lead_max + stab + cycle
        )
        need = levels.quantile.get(model, np.zeros(n)).astype(float).copy()
        # Within reach of this cycle's action, the forecast conditioned on the newest
        # observation replaces the unconditioned quantile (module docstring).
        need[near] = np.maximum(anchor[near], max(floor, keep))
        # Up to lead time + stabilization, too: what the hold rules below keep is
        # the forecast conditioned on now, not the day-ahead quantile's level.
        need[window & ~near] = anchor[window & ~near]
    # What this cycle itself asks for near term; later cycles' hysteresis reads it.
    # With the forecast's shape it includes the observed peak the floor holds, so
    # through the records a peak is held up to twice lead + stabilization: leaving
    # it out was measured to cost more demand unserved and more reversals than the
    # capacity it saved (README, "Replay"). Without the shape the record is the
    # newest value with its margin, as the margin's rule was replayed.
    record = need[near]
    if not held and near.any():
        record = np.maximum(anchor[near], max(levels.recorded.get(model, floor), keep))
    return need, round(float(record.max()) if near.any() else 0.0, 4)


def hold_across_cycles(
    need: np.ndarray,
    model: str,
    reach: Reach,
    past: Sequence[PastCycle],
    now: pd.Timestamp,
    stab: pd.Timedelta,
    held_gpus: float,
) -> np.ndarray:
    """``need`` (changed in place) raised over the hold window to what is asked again.

    No flapping (:mod:`scaler.planning.tiers`, "No flapping"): capacity that this plan's
    own need, or the need of a cycle within lead time + stabilization, asks for again
    within that window is not released; never more than ``held_gpus``, what the pools
    hold now, count for.
    """
    near, window = reach.near, reach.window
    provision = float(need[near].max()) if near.any() else 0.0
    recent = [c for c in past if now - (reach.lead_max + stab) < pd.Timestamp(c.at) < now]
    again = max(
        float(need[window].max()) if window.any() else 0.0,
        max((c.need_gpus.get(model, 0.0) for c in recent), default=0.0),
    )
    # What this plan provisions near term counts as held: the level kept over
    # the window is then the same before and after this plan's own raise is
    # applied (re-planning from the applied targets keeps them).
    held_level = max(held_gpus, provision)
    need[window] = np.maximum(need[window], min(held_level, again))
    return need


@dataclass(frozen=True)
class PoolLevels:
    """The need one pool's first step answers to (what its action's reason names)."""

    need_up: float
    """The need once a node requested now would serve (at the pool's lead time)."""
    need_keep: float
    """The most the need reaches over the hold window."""
    needed_at: pd.Timestamp
    """When a node requested now would serve."""
    hold_until: pd.Timestamp
    """The end of the hold window its GPU model's need is kept over."""
    lead_hold: pd.Timedelta
    """The model's longest lead time (the hold window is lead + stabilization)."""


def pool_levels(
    pool: PoolConfig,
    need: np.ndarray,
    reach: Reach,
    grid: pd.DatetimeIndex,
    now: pd.Timestamp,
    cycle: pd.Timedelta,
    stab: pd.Timedelta,
) -> PoolLevels:
    """The levels of ``need`` that ``pool``'s first step answers to."""
    lead = pd.Timedelta(seconds=pool.lead_time_s)
    need_up = window_max(need, grid, now + lead, now + lead + cycle)
    kept = float(need[reach.window].max()) if reach.window.any() else need_up
    return PoolLevels(need_up, kept, now + lead, now + reach.lead_max + stab, reach.lead_max)
