"""Margins learned from each series' own past: how far above the newest observation to provision.

Capacity asked for now serves only after the lead time, so the planner keeps a
margin over the newest observation for what demand does meanwhile. A fixed
margin fits some shapes only (10% leaves a bursty LLM service short; a rise
ratio taken from the last day triples capacity at every peak of a spiky one).
Here the margin of each signal is chosen from its own history by a walk-forward
replay of the near-term rule over that history:

* at every step i of the history the rule requests
  ``R_i = (1 + m) * max(y_j * s_j for j in i-h+1..i)``: the newest values with
  margin m, times ``s_j`` the change the day before made over the next lead time
  (standing in for the forecast's predicted change, which the planner anchors on
  the newest value), the largest over the window h that the planner's
  hysteresis holds (lead time + stabilization), and never under that window's
  peak;
* step j is served by what was requested over the lead time before it,
  ``min(R[j-1-L..j-1])`` with L the lead time in signal steps (conservative: a
  node kept from earlier would serve too);
* the unserved share is ``sum(max(0, y_j - served_j)) / sum(y_j)``.

Cost grows with m, so the chosen margin is the smallest of :data:`MARGIN_GRID`
that keeps the unserved share within ``budget`` (``policy.unserved_budget``). Where
no margin gets there (demand that jumps from nothing, which no multiple of the
newest value covers), it is the smallest margin within ``budget`` of the least
that any margin leaves: more margin would buy nothing. The rule sees only the
history it is given; the replay gives it the training period, the product the
collected lookback. The result carries its evidence (unserved at the margin
and at the next smaller one) for the plan's reasons.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

MARGIN_GRID: np.ndarray = np.round(np.arange(0.0, 2.0 + 1e-9, 0.025), 3)
"""Candidate margins: 0% to 200% of the newest observation, in steps of 2.5%."""
FLOOR_WINDOW = pd.Timedelta(hours=1)
"""Default window of the observed floor's peak; the planner passes its own (lead time +
stabilization, scaler.planning)."""
MIN_HISTORY_STEPS = 288
"""Fewer steps than this (a day at 5 minutes) say too little: no margin is learned."""


@dataclass(frozen=True)
class Margin:
    """A signal's learned margin and the evidence for it."""

    signal: str
    margin: float
    """Fraction over the newest observation the planner provisions near term."""
    unserved_share: float
    """Share of demand the rule left unserved over the history at this margin."""
    smaller_unserved_share: float | None
    """The same at the next smaller candidate (None when the margin is 0)."""
    budget: float
    """``policy.unserved_budget`` the choice was made against."""
    history_days: float
    """Span of history the replay ran over."""
    within_budget: bool
    """False where no candidate reached the budget (the margin stops where more buys nothing)."""

    def describe(self) -> str:
        """One clause for a reason: the margin and its evidence."""
        smaller = (
            f", {100 * self.smaller_unserved_share:.2f}% at "
            f"{100 * (self.margin - float(MARGIN_GRID[1])):.1f}%"
            if self.smaller_unserved_share is not None
            else ""
        )
        budget = "within" if self.within_budget else "budget not reachable;"
        return (
            f"margin {100 * self.margin:.1f}% learned for {self.signal!r} from "
            f"{self.history_days:.1f} d of its history ({100 * self.unserved_share:.2f}% "
            f"unserved{smaller}; {budget} budget {100 * self.budget:.2f}%)"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "margin": self.margin,
            "unserved_share": round(self.unserved_share, 6),
            "smaller_unserved_share": (
                None
                if self.smaller_unserved_share is None
                else round(self.smaller_unserved_share, 6)
            ),
            "budget": self.budget,
            "history_days": round(self.history_days, 3),
            "within_budget": self.within_budget,
        }


def day_shape(known: np.ndarray, lead_steps: int, season_steps: int) -> np.ndarray:
    """Largest ``y[i+k-P] / y[i-P]`` for k = 1..L+1: the change the day before made next.

    The planner anchors its forecast's predicted change on the newest value; the
    day-before change stands in for that forecast here (1 where undefined), so the
    margin covers what the shape does not foresee.
    """
    n = len(known)
    out = np.ones(n)
    if season_steps <= 0 or n <= season_steps:
        return out
    base = np.full(n, np.nan)
    base[season_steps:] = known[: n - season_steps]
    best = np.full(n, -np.inf)
    for k in range(1, min(lead_steps + 1, season_steps - 1) + 1):
        # y[i + k - P]: known at i, since k < P.
        ahead = np.full(n, np.nan)
        ahead[season_steps - k :] = known[: n - season_steps + k]
        with np.errstate(divide="ignore", invalid="ignore"):
            ratio = ahead / base
        best = np.fmax(best, np.where(np.isfinite(ratio) & (base > 0), ratio, np.nan))
    return np.where(np.isfinite(best), np.maximum(best, 1.0), 1.0)


def unserved_by_margin(
    values: np.ndarray,
    lead_steps: int,
    floor_steps: int,
    margins: np.ndarray = MARGIN_GRID,
    season_steps: int = 0,
) -> np.ndarray:
    """Unserved share of ``values`` (one regular series, NaN for gaps) per candidate margin."""
    y = np.asarray(values, dtype=float)
    n = len(y)
    known = pd.Series(y).ffill().fillna(0.0).to_numpy()
    peak = pd.Series(known).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
    shape = day_shape(known, lead_steps, season_steps)
    # R[m, i]: what the rule requests after seeing step i: the largest of the
    # anchored levels over the floor window (the planner's hysteresis keeps them).
    level = pd.Series(known * shape).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
    requested = np.maximum(level[None, :] * (1.0 + margins[:, None]), peak[None, :])
    # Step j is served by min(R[j-1-L .. j-1]).
    width = lead_steps + 1
    served = np.full((len(margins), n), np.nan)
    if n > width:
        windows = np.lib.stride_tricks.sliding_window_view(requested, width, axis=1)
        served[:, width:] = windows.min(axis=2)[:, : n - width]
    demand = np.where(np.isfinite(y), y, np.nan)
    scored = np.isfinite(demand) & np.isfinite(served[0])
    total = float(np.nansum(demand[scored]))
    if total <= 0:
        return np.zeros(len(margins))
    short = np.maximum(0.0, demand[None, scored] - served[:, scored])
    return short.sum(axis=1) / total


def learn_margin(
    history: pd.Series,
    lead_time_s: int,
    budget: float,
    step: pd.Timedelta | None = None,
    signal: str | None = None,
    floor_window: pd.Timedelta = FLOOR_WINDOW,
) -> Margin | None:
    """The smallest margin of :data:`MARGIN_GRID` keeping ``history``'s unserved share in ``budget``.

    ``history`` is the signal as observed (its own step, NaN for gaps); ``step`` its
    step (inferred from the index when not given). None when the history is shorter
    than :data:`MIN_HISTORY_STEPS` or carries no demand.
    """
    seen = history.dropna()
    if len(seen) < 2:
        return None
    if step is None:
        step = pd.Timedelta(pd.Series(pd.DatetimeIndex(seen.index)).diff().median())
    if step <= pd.Timedelta(0):
        return None
    grid = pd.date_range(seen.index[0], seen.index[-1], freq=step)
    values = history.reindex(grid).to_numpy(dtype=float)
    if len(values) < MIN_HISTORY_STEPS or not np.nansum(values) > 0:
        return None
    lead_steps = max(0, math.ceil(lead_time_s / step.total_seconds() - 1e-9))
    floor_steps = max(1, int(floor_window / step))
    season = int(pd.Timedelta(days=1) / step) if step < pd.Timedelta(days=1) else 0
    unserved = unserved_by_margin(values, lead_steps, floor_steps, season_steps=season)
    within = bool((unserved <= budget + 1e-12).any())
    limit = budget if within else float(unserved.min()) + budget
    k = int(np.flatnonzero(unserved <= limit + 1e-12)[0])
    return Margin(
        signal=str(signal if signal is not None else history.name or "signal"),
        margin=float(MARGIN_GRID[k]),
        unserved_share=float(unserved[k]),
        smaller_unserved_share=float(unserved[k - 1]) if k > 0 else None,
        budget=budget,
        history_days=(grid[-1] - grid[0] + step) / pd.Timedelta(days=1),
        within_budget=within,
    )
