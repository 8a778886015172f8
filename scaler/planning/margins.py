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

The margin is headroom on replicas, as the planner adds it: the level is rounded
up to whole replicas (``replica``, the signal units of one) before the margin, then
the capacity up to whole nodes (``granule``, the signal units one node serves), so
the margin is not asked to cover what the rounding covers already, and the
reactive reference replays exactly the rule a reactive autoscaler runs on GPUs.

The reference is a *reactive* rule (the newest value plus
:data:`REACTIVE_HEADROOM`, held over the same window) replayed on the same
history. The margin is the cheapest that leaves no more of the demand unserved
than that rule did, and never more than ``budget`` (``policy.unserved_budget``):
prediction has to serve at least as well as reacting on the series' own past
before it may cost less. Where no margin gets there (demand that jumps from
nothing, which no multiple of the newest value covers), it is the cheapest within
``budget`` of the least that any margin leaves: more margin would buy nothing.

Where that choice costs more than the reactive rule did, prediction did not pay
on this series' own past, and the choice falls back to the same rule without the
day-before shape (``s_j = 1``: the newest value with margin, held over the window,
as reacting does; the planner then anchors on a flat forecast near term and holds
the window's newest values with the margin): the cheapest of those that serves as
well as reacting for no more (the reactive rule itself is one, where it left no
more than the budget), else the candidate that leaves the least unserved at no
more than the reactive rule's cost. So a series never gets a margin that was
costlier than reactive scaling over its history. The rule without shape is only
the fallback: the day-before change is a poor stand-in for the forecaster's
shape, and where the shaped rule pays the planner uses the forecaster's.

The rule sees only the history it is given; the replay gives it the training
period, the product the collected lookback. The result carries its evidence
(unserved at the margin and at the next smaller one, cost against the reactive
rule's) for the plan's reasons.
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
stabilization, scaler.planning.tiers)."""
MIN_HISTORY_STEPS = 288
"""Fewer steps than this (a day at 5 minutes) say too little: no margin is learned."""
REACTIVE_HEADROOM = 0.2
"""The reference rule's margin: the newest value plus 20%, the usual reactive autoscaler
target (the replay's reactive baseline, README "Replay")."""


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
    forecast_shape: bool = True
    """Whether the planner applies the forecast's predicted change near term. False where,
    on this history, the rule without it served as well for less."""
    cost_ratio: float | None = None
    """Capacity the chosen rule held over the history, as a multiple of demand."""
    reactive_cost_ratio: float | None = None
    """The same for the reactive reference rule (:data:`REACTIVE_HEADROOM`)."""
    reactive_unserved_share: float | None = None
    """Share of demand the reactive reference rule left unserved over the history."""
    capped: bool = False
    """True where no candidate served as well as the reactive rule (or the budget) at no
    more than its cost, so the margin is the one serving most at no more than that cost."""
    target: float | None = None
    """Unserved share aimed at: the budget, or less where the reactive rule left less."""

    def describe(self) -> str:
        """One clause for a reason: the margin and its evidence."""
        smaller = (
            f", {100 * self.smaller_unserved_share:.2f}% at "
            f"{100 * (self.margin - float(MARGIN_GRID[1])):.1f}%"
            if self.smaller_unserved_share is not None
            else ""
        )
        target = self.budget if self.target is None else self.target
        if target < self.budget - 1e-12:
            aim = (
                f"{'within' if self.unserved_share <= target + 1e-12 else 'over'} the "
                f"reactive rule's {100 * target:.2f}% on it (budget {100 * self.budget:.2f}%)"
            )
        else:
            aim = (
                "within"
                if self.within_budget
                else ("over" if self.capped else "budget not reachable;")
            ) + f" budget {100 * self.budget:.2f}%"
        text = (
            f"margin {100 * self.margin:.1f}% learned for {self.signal!r} from "
            f"{self.history_days:.1f} d of its history ({100 * self.unserved_share:.2f}% "
            f"unserved{smaller}; {aim})"
        )
        if self.cost_ratio is not None and self.reactive_cost_ratio is not None:
            reactive = (
                f"{self.reactive_cost_ratio:.2f}x, "
                f"{100 * (self.reactive_unserved_share or 0.0):.2f}% unserved"
            )
            text += (
                f", holding {self.cost_ratio:.2f}x demand: serving that well cost more than "
                f"the reactive rule ({reactive}), so the margin serves most at no more than "
                "its cost"
                if self.capped
                else f", holding {self.cost_ratio:.2f}x demand where the reactive rule held "
                f"{reactive}"
            )
        if not self.forecast_shape:
            text += "; forecast shape not used near term (it did not pay on this history)"
        return text

    def to_dict(self) -> dict[str, object]:
        def r6(x: float | None) -> float | None:
            return None if x is None else round(x, 6)

        return {
            "margin": self.margin,
            "unserved_share": round(self.unserved_share, 6),
            "smaller_unserved_share": r6(self.smaller_unserved_share),
            "budget": self.budget,
            "history_days": round(self.history_days, 3),
            "within_budget": self.within_budget,
            "forecast_shape": self.forecast_shape,
            "cost_ratio": r6(self.cost_ratio),
            "reactive_cost_ratio": r6(self.reactive_cost_ratio),
            "reactive_unserved_share": r6(self.reactive_unserved_share),
            "capped": self.capped,
            "target": r6(self.target),
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


def replay_rule(
    values: np.ndarray,
    lead_steps: int,
    floor_steps: int,
    margins: np.ndarray = MARGIN_GRID,
    season_steps: int = 0,
    granule: float = 0.0,
    shape: bool = True,
    replica: float = 0.0,
) -> tuple[np.ndarray, np.ndarray]:
    """``(unserved share, capacity / demand)`` of the near-term rule per candidate margin.

    ``values``: one regular series, NaN for gaps. ``granule``: signal units of one node
    (capacity is requested in whole nodes; 0: not rounded). ``shape``: whether the
    day-before change stands in for the forecast's (False: the newest value only).
    ``replica``: signal units of one replica, the margin's unit (0: not rounded).
    """
    y = np.asarray(values, dtype=float)
    n = len(y)
    margins = np.asarray(margins, dtype=float)
    known = pd.Series(y).ffill().fillna(0.0).to_numpy()
    peak = pd.Series(known).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
    factor = day_shape(known, lead_steps, season_steps) if shape else np.ones(n)
    # R[m, i]: what the rule requests after seeing step i: the largest of the
    # anchored levels over the floor window (the planner's hysteresis keeps them).
    level = pd.Series(known * factor).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
    if replica > 0:
        # Headroom on whole replicas (scaler.planning.demand.gpus_for), in signal units.
        level = np.ceil(level / replica - 1e-9)
        grown = np.ceil(level[None, :] * (1.0 + margins[:, None]) - 1e-9) * replica
        requested = np.maximum(grown, np.ceil(peak / replica - 1e-9)[None, :] * replica)
    else:
        requested = np.maximum(level[None, :] * (1.0 + margins[:, None]), peak[None, :])
    if granule > 0:
        requested = np.ceil(requested / granule - 1e-9) * granule
    # Step j is served by min(R[j-1-L .. j-1]).
    width = lead_steps + 1
    served = np.full((len(margins), n), np.nan)
    held = np.full((len(margins), n), np.nan)
    if n > width:
        windows = np.lib.stride_tricks.sliding_window_view(requested, width, axis=1)
        served[:, width:] = windows.min(axis=2)[:, : n - width]
        held[:, width:] = requested[:, width - 1 : n - 1]
    demand = np.where(np.isfinite(y), y, np.nan)
    scored = np.isfinite(demand) & np.isfinite(served[0])
    total = float(np.nansum(demand[scored]))
    if total <= 0:
        return np.zeros(len(margins)), np.zeros(len(margins))
    short = np.maximum(0.0, demand[None, scored] - served[:, scored])
    return short.sum(axis=1) / total, held[:, scored].sum(axis=1) / total


def unserved_by_margin(
    values: np.ndarray,
    lead_steps: int,
    floor_steps: int,
    margins: np.ndarray = MARGIN_GRID,
    season_steps: int = 0,
) -> np.ndarray:
    """Unserved share of ``values`` (one regular series, NaN for gaps) per candidate margin."""
    return replay_rule(values, lead_steps, floor_steps, margins, season_steps)[0]


@dataclass(frozen=True)
class _Replay:
    """A regular history and the replay's window sizes, in its steps."""

    values: np.ndarray
    """The history on its regular grid, NaN for gaps."""
    grid: pd.DatetimeIndex
    step: pd.Timedelta
    lead_steps: int
    floor_steps: int
    season: int
    """Steps in a day (the day-before shape), 0 where the step is a day or more."""
    granule: float
    replica: float

    def rule(self, margins: np.ndarray, shape: bool) -> tuple[np.ndarray, np.ndarray]:
        """:func:`replay_rule` on this history: unserved share and cost per margin."""
        return replay_rule(
            self.values,
            self.lead_steps,
            self.floor_steps,
            margins,
            self.season,
            granule=self.granule,
            shape=shape,
            replica=self.replica,
        )


_Candidate = tuple[bool, int]
"""A rule (with the day-before shape or not) and the index of its margin in MARGIN_GRID."""


def learn_margin(
    history: pd.Series,
    lead_time_s: int,
    budget: float,
    step: pd.Timedelta | None = None,
    signal: str | None = None,
    floor_window: pd.Timedelta = FLOOR_WINDOW,
    granule: float = 0.0,
    reactive_headroom: float | None = REACTIVE_HEADROOM,
    replica: float = 0.0,
) -> Margin | None:
    """The cheapest rule and margin keeping ``history``'s unserved share in ``budget``.

    ``history`` is the signal as observed (its own step, NaN for gaps); ``step`` its
    step (inferred from the index when not given); ``granule`` the signal units one
    node serves (0: capacity not rounded), ``replica`` those of one replica (the margin
    is headroom on replicas; 0: not rounded). ``reactive_headroom``: the reference rule
    the choice may not cost more than (None: no reference). None when the history is
    shorter than :data:`MIN_HISTORY_STEPS` or carries no demand.
    """
    replay = _regular_replay(history, lead_time_s, step, floor_window, granule, replica)
    if replay is None:
        return None
    cands, unserved, cost = _candidates(replay)
    # Never more unserved than reacting left on the same history, nor than the budget.
    reactive_cost = reactive_unserved = None
    target = budget
    if reactive_headroom is not None:
        ru, rc = replay.rule(np.array([reactive_headroom]), shape=False)
        reactive_unserved, reactive_cost = float(ru[0]), float(rc[0])
        target = min(budget, reactive_unserved)
    chosen = _cheapest_shaped(cands, unserved, cost, target, budget)
    capped = False
    if reactive_cost is not None and cost[chosen] > reactive_cost * (1 + 1e-9):
        chosen, capped = _no_costlier_than_reacting(
            cands, unserved, cost, target, reactive_cost, chosen
        )
    sh, k = chosen
    return Margin(
        signal=str(signal if signal is not None else history.name or "signal"),
        margin=float(MARGIN_GRID[k]),
        unserved_share=unserved[chosen],
        smaller_unserved_share=unserved[(sh, k - 1)] if k > 0 else None,
        budget=budget,
        history_days=(replay.grid[-1] - replay.grid[0] + replay.step) / pd.Timedelta(days=1),
        within_budget=unserved[chosen] <= budget + 1e-12,
        forecast_shape=sh,
        cost_ratio=cost[chosen],
        reactive_cost_ratio=reactive_cost,
        reactive_unserved_share=reactive_unserved,
        capped=capped,
        target=target,
    )


def _regular_replay(
    history: pd.Series,
    lead_time_s: int,
    step: pd.Timedelta | None,
    floor_window: pd.Timedelta,
    granule: float,
    replica: float,
) -> _Replay | None:
    """``history`` on its regular grid with the replay's windows in its steps; None where
    it is too short (or its step not positive) or it carries no demand."""
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
    return _Replay(
        values=values,
        grid=grid,
        step=step,
        lead_steps=max(0, math.ceil(lead_time_s / step.total_seconds() - 1e-9)),
        floor_steps=max(1, int(floor_window / step)),
        season=int(pd.Timedelta(days=1) / step) if step < pd.Timedelta(days=1) else 0,
        granule=granule if math.isfinite(granule) and granule > 0 else 0.0,
        replica=replica if math.isfinite(replica) and replica > 0 else 0.0,
    )


def _candidates(
    replay: _Replay,
) -> tuple[list[_Candidate], dict[_Candidate, float], dict[_Candidate, float]]:
    """Every candidate with its unserved share and cost over the history."""
    # The forecast-shaped rule first so that it wins ties.
    shapes = (True, False) if 0 < replay.season < len(replay.values) else (True,)
    table = {sh: replay.rule(MARGIN_GRID, shape=sh) for sh in shapes}
    cands = [(sh, k) for sh in shapes for k in range(len(MARGIN_GRID))]
    unserved = {c: float(table[c[0]][0][c[1]]) for c in cands}
    cost = {c: float(table[c[0]][1][c[1]]) for c in cands}
    return cands, unserved, cost


def _cheapest_shaped(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    budget: float,
) -> _Candidate:
    """The cheapest forecast-shaped candidate meeting ``target``, else the cheapest within
    ``budget`` of the least any shaped candidate leaves unserved."""
    # The target is met with the forecast's shape: the day-before change is a poor
    # stand-in for the forecaster's, so the rule without it is only the fallback.
    shaped = [c for c in cands if c[0]]
    within = any(unserved[c] <= target + 1e-12 for c in shaped)
    limit = target if within else min(unserved[c] for c in shaped) + budget
    # Cheapest first; among equal costs the smaller margin.
    return min((c for c in shaped if unserved[c] <= limit + 1e-12), key=lambda c: (cost[c], c[1]))


def _no_costlier_than_reacting(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    reactive_cost: float,
    chosen: _Candidate,
) -> tuple[_Candidate, bool]:
    """The choice where meeting the target with the forecast's shape cost more than
    reacting did, and whether it is capped (serves less than the target)."""
    # The cheapest candidate that serves as well as reacting for no more (the reactive
    # rule itself is one where it left no more than the budget), else the one serving
    # most at no more than the reactive rule's cost; ``chosen`` stays where none costs
    # no more.
    affordable = [c for c in cands if cost[c] <= reactive_cost * (1 + 1e-9)]
    dominating = [c for c in affordable if unserved[c] <= target + 1e-12]
    if dominating:
        return min(dominating, key=lambda c: (cost[c], not c[0], c[1])), False
    if affordable:
        return min(affordable, key=lambda c: (unserved[c], cost[c], c[1])), True
    return chosen, False
