"""A leading signal in the near-term rule: demand that waits now and runs after a delay.

A workload may name a *leading signal* (``leading_signal:`` in its config): demand that
is queued before it becomes the running demand its own signal measures (Kueue's pending
GPU-hours, pending GPU pods, an inference server's waiting requests such as vLLM's
``vllm:num_requests_waiting``, or running plus queued jobs). Part of what it holds
arrives within the lead time; the near-term rule of :mod:`scaler.planning.margins` can
then provision for it before it shows in the signal itself.

What arrives is one of these *arrival* measures of the leading series ``x`` against the
signal ``y`` at step ``i`` (:data:`KINDS`):

* ``excess``: ``max(0, x_i - y_i)``, all that waits (the leading minus the current);
* ``rise over w``: ``max(0, x_i - x_{i-w})``, what joined the leading signal over the last
  ``w`` (new queued demand), for ``w`` in :data:`RISE_WINDOWS`.

The *leading rule* is the growth rule's twin: ``R_i = (1 + m) * max(y_j + b * a_j, j in the
hold window)``, never under the window's observed peak, where ``a`` is one arrival
measure and ``b`` the *share* of it that arrives within the lead time (:data:`SHARES`).
Every (measure, share, margin) is replayed walk-forward on the signal's own training
history, with the same service target as the growth and reactive rules, and the
cheapest candidate of all wins (:func:`scaler.planning.margins.learn_margin`): the
leading signal is used only where, on that history, it served as well as "no change"
(the newest observation with a margin) for less. A leading series that says nothing
about the next lead time is therefore ablated away, and a workload without one plans
exactly as before. Each candidate's *arrived share*, ``sum(min(rise, a)) / sum(a)`` of
the realised rise over the lead time against its arrival measure, is the evidence the
plan states.

The rule sees only values at or before each step (the leading series is aligned to the
signal's grid by the last value at or before each step, at most one step old).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaler.config import WorkloadConfig

SHARES: tuple[float, ...] = (0.25, 0.5, 0.75, 1.0, 1.5)
"""Candidate shares of the arrival measure expected within the lead time."""
RISE_WINDOWS: tuple[pd.Timedelta, ...] = (
    pd.Timedelta(minutes=5),
    pd.Timedelta(minutes=15),
    pd.Timedelta(minutes=30),
)
"""Windows over which new leading demand is counted (``rise over w``)."""
EXCESS = "excess"
RISE = "rise"


@dataclass(frozen=True)
class Arrival:
    """One arrival measure of a leading series: ``excess``, or ``rise`` over ``window_steps``."""

    kind: str
    window_steps: int = 0
    """Steps of the signal's grid the rise is taken over (0 for ``excess``)."""

    def values(self, current: np.ndarray, leading: np.ndarray) -> np.ndarray:
        """The measure at each step of ``current`` (the signal) and ``leading`` on one grid;
        0 where either is missing."""
        y = np.asarray(current, dtype=float)
        x = np.asarray(leading, dtype=float)
        if self.kind == EXCESS:
            out = x - y
        else:
            w = max(1, self.window_steps)
            before = np.full(len(x), np.nan)
            if len(x) > w:
                before[w:] = x[:-w]
            out = x - before
        out = np.where(np.isfinite(out), out, 0.0)
        return np.maximum(out, 0.0)

    def describe(self, signal: str, step: pd.Timedelta) -> str:
        """The measure in words, of the leading signal ``signal``."""
        if self.kind == EXCESS:
            return f"what {signal!r} holds over the newest observation"
        return f"the rise of {signal!r} over {_minutes(self.window_steps * step)}"


def _minutes(span: pd.Timedelta) -> str:
    minutes = span / pd.Timedelta(minutes=1)
    return f"{minutes:g} min" if minutes < 120 else f"{minutes / 60:g} h"


def arrivals(step: pd.Timedelta) -> list[Arrival]:
    """The arrival measures a leading series is tried with on a grid of ``step``."""
    out = [Arrival(EXCESS)]
    for window in RISE_WINDOWS:
        steps = max(1, round(window / step)) if step > pd.Timedelta(0) else 1
        if all(a.window_steps != steps for a in out):
            out.append(Arrival(RISE, steps))
    return out


def aligned(leading: pd.Series, grid: pd.DatetimeIndex, step: pd.Timedelta) -> np.ndarray:
    """``leading`` on ``grid``: at each step its last value at or before it, at most one
    ``step`` old (NaN where there is none): never a value from after the step."""
    seen = leading.dropna()
    seen = seen[~seen.index.duplicated(keep="last")].sort_index()
    if seen.empty or not len(grid):
        return np.full(len(grid), np.nan)
    idx = pd.DatetimeIndex(seen.index)
    if idx.tz is None and grid.tz is not None:
        idx = idx.tz_localize(grid.tz)
    elif idx.tz is not None and grid.tz is None:
        idx = idx.tz_convert(None)
    on = pd.Series(seen.to_numpy(dtype=float), index=idx)
    return on.reindex(grid, method="ffill", tolerance=step).to_numpy(dtype=float)


def realised_rise(values: np.ndarray, lead_steps: int) -> np.ndarray:
    """``max(y[i+1 .. i+lead+1]) - y[i]``: how far demand rose within the lead time (NaN where
    the window runs past the end)."""
    y = pd.Series(np.asarray(values, dtype=float)).ffill().fillna(0.0).to_numpy()
    n, width = len(y), lead_steps + 1
    out = np.full(n, np.nan)
    if n > width:
        ahead = np.lib.stride_tricks.sliding_window_view(y[1:], width).max(axis=1)
        out[: len(ahead)] = ahead - y[: len(ahead)]
    return out


def arrived_share(rise: np.ndarray, measure: np.ndarray, scored_from: int = 0) -> float | None:
    """``sum(min(max(rise, 0), a)) / sum(a)`` over the scored steps where ``a > 0``: the share
    of the arrival measure the signal rose by within the lead time (None: nothing waited)."""
    r, a = np.asarray(rise[scored_from:], float), np.asarray(measure[scored_from:], float)
    ok = np.isfinite(r) & (a > 0)
    total = float(a[ok].sum())
    if total <= 0:
        return None
    return float(np.minimum(np.maximum(r[ok], 0.0), a[ok]).sum() / total)


@dataclass(frozen=True)
class LeadingRule:
    """The leading signal's part in a signal's near-term rule, as learnt and as it stands now."""

    signal: str
    """The leading signal's name."""
    arrival: Arrival
    share: float
    """Share of the arrival measure provisioned for within the lead time."""
    step: pd.Timedelta
    """Step of the grid the rule was learnt on."""
    arrived: float | None = None
    """On the training history: :func:`arrived_share` of the chosen measure."""
    cost_ratio: float | None = None
    """Capacity the cheapest leading candidate meeting the target held, over demand."""
    boost: float = 0.0
    """Signal units added to the newest observation now (``share x`` the measure now)."""

    def at(self, current: np.ndarray, leading: np.ndarray) -> LeadingRule:
        """The rule with ``boost`` from the newest values of the signal (``current``) and the
        leading series (``leading``), both on the rule's grid and ending at the same step;
        0 where the newest leading value is missing (a missing signal adds nothing)."""
        n = min(len(current), len(leading))
        if n == 0 or not math.isfinite(float(leading[-1])):
            return _with_boost(self, 0.0)
        keep = max(2, self.arrival.window_steps + 1)
        a = self.arrival.values(current[-min(n, keep) :], leading[-min(n, keep) :])
        return _with_boost(self, float(self.share * a[-1]))

    def describe(self) -> str:
        arrived = (
            f"; {100 * self.arrived:.0f}% of it arrived within the lead time on the history"
            if self.arrived is not None
            else ""
        )
        return (
            f"+ {self.share:g} x {self.arrival.describe(self.signal, self.step)} "
            f"(now {self.boost:.4g}){arrived}"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "signal": self.signal,
            "measure": self.arrival.kind,
            "window_s": int(self.arrival.window_steps * self.step.total_seconds()),
            "share": self.share,
            "arrived_share": None if self.arrived is None else round(self.arrived, 6),
            "boost": round(self.boost, 6),
        }


def _with_boost(rule: LeadingRule, boost: float) -> LeadingRule:
    return LeadingRule(
        rule.signal, rule.arrival, rule.share, rule.step, rule.arrived, rule.cost_ratio, boost
    )


def newest_boost(
    rule: LeadingRule, history: pd.Series, leading: pd.Series, at: pd.Timestamp
) -> LeadingRule:
    """``rule`` at the newest observation ``at`` of ``history``: the leading series aligned on
    the rule's grid up to ``at`` (never after it)."""
    step = rule.step
    keep = rule.arrival.window_steps + 2
    grid = pd.date_range(end=pd.Timestamp(at), periods=keep, freq=step)
    y = history[history.index <= at].reindex(grid, method="ffill", tolerance=step)
    x = aligned(leading[leading.index <= at], grid, step)
    return rule.at(y.to_numpy(dtype=float), x)


def leading_signal_of(workloads: Iterable[WorkloadConfig], signal: str) -> str | None:
    """The leading signal the workloads driven by ``signal`` name (None: none, or several
    that disagree: the rule is then the one without a leading signal)."""
    named = {w.leading_signal for w in workloads if w.signal == signal and w.leading_signal}
    return next(iter(named)) if len(named) == 1 else None
