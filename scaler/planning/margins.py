"""Margins learned from each series' own past: how far above the newest observation to provision.

Capacity asked for now serves only after the lead time, so the planner keeps a
margin over the newest observation for what demand does meanwhile. Two rules
compete on each signal's own history, replayed walk-forward:

* the *growth rule*: ``R_i = (1 + m) * max(y_j * G_j for j in i-h+1..i)``, where
  ``G_j`` is the growth quantile of :mod:`scaler.planning.growth` (the forecast's
  predicted growth over the lead time, calibrated by a walk-forward backtest of the
  forecaster the planner uses, on this history, by time of day), at one of the
  levels :data:`scaler.planning.growth.LEVELS`; h is the window that the planner's
  hysteresis holds (lead time + stabilization), and R never under that window's peak;
* the *reactive rule*: the same with ``G_j = 1``: the newest value with margin m, held
  over the window, as a reactive autoscaler scales;
* where the signal's workload names a leading signal, the *leading rule*
  (:mod:`scaler.planning.leading`): ``R_i = (1 + m) * max(y_j + b * a_j)`` over the same
  window, ``a`` an arrival measure of the leading series and ``b`` its share arriving
  within the lead time; without a leading signal it is no candidate.

Step j is served by what was requested over the lead time before it,
``min(R[j-1-L..j-1])`` with L the lead time in signal steps (conservative: a node
kept from earlier would serve too); the unserved share is
``sum(max(0, y_j - served_j)) / sum(y_j)`` and the cost the capacity held over the
demand, both over the span the forecaster was backtested on (the whole history
where there is no backtest).

The margin is headroom on replicas, as the planner adds it: the level is rounded
up to whole replicas (``replica``, the signal units of one) before the margin, then
the capacity up to whole nodes (``granule``, the signal units one node serves), so
the margin is not asked to cover what the rounding covers already, and the
reactive reference replays exactly the rule a reactive autoscaler runs on GPUs.

The *target* is the unserved share of the reference rule (the newest value plus
:data:`REACTIVE_HEADROOM`, held over the same window) on the same span, and never
more than ``budget`` (``policy.unserved_budget``): prediction has to serve at least
as well as reacting did before it may cost less. The choice is the cheapest
candidate of either rule meeting the target, so the forecast is used near term
exactly where, on this history, it served as well for less than any reactive
margin; the result keeps both rules' costs for the plan's reason ("forecast
growth q0.9 ... 12% less than newest observation x margin"). Where no candidate
meets the target (demand that jumps from nothing, which no multiple of the newest
value covers), it is the cheapest within ``budget`` of the least that any leaves;
where meeting it costs more than the reference rule did, the candidate serving
most at no more than that rule's cost. So a series never gets a rule that was
costlier than reactive scaling over its history.

The rules see only the history they are given; the replay gives them the training
period, the product the collected lookback.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from scaler.planning.growth import LEVELS, Growth, GrowthBacktest, growth_factors
from scaler.planning.leading import (
    SHARES,
    LeadingRule,
    aligned,
    arrivals,
    arrived_share,
    realised_rise,
)

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

Backtester = Callable[[np.ndarray, pd.DatetimeIndex, int], GrowthBacktest | None]
"""``(values, grid, lead_steps) -> backtest``: the forecaster walked forward over a regular
history (:func:`scaler.planning.growth.backtest_growth` with the planner's forecaster)."""


@dataclass(frozen=True)
class Margin:
    """A signal's learned near-term rule and the evidence for it."""

    signal: str
    margin: float
    """Fraction over the newest observation (times the growth quantile, where used) the
    planner provisions near term."""
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
    """Whether the planner applies the forecast's predicted change near term: the growth
    quantile (``growth``), or, without one, the forecast median's change anchored on the
    newest value. False: the newest value with the margin, as reacting does."""
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
    growth: Growth | None = None
    """The calibrated growth quantile the planner applies (None: not the growth rule)."""
    growth_cost_ratio: float | None = None
    """The cheapest growth-rule candidate meeting the target: capacity over demand (None:
    none met it, or no backtest)."""
    flat_cost_ratio: float | None = None
    """The same for the newest observation x margin (the reactive rule's family)."""
    backtest_note: str = ""
    """Why the forecast was not backtested (history too short), where it was not."""
    growth_error: tuple[float, float] | None = None
    """On the backtest: the mean absolute log error of the forecast's predicted growth
    over the lead time, and of assuming none (:meth:`GrowthBacktest.errors`)."""
    leading: LeadingRule | None = None
    """The leading signal's part the planner adds to the newest observation (None: not the
    leading rule)."""
    leading_cost_ratio: float | None = None
    """The cheapest leading-rule candidate meeting the target: capacity over demand (None:
    none met it, or no leading signal)."""
    leading_signal: str | None = None
    """The leading signal that was tried, whether or not its rule won."""
    leading_note: str = ""
    """Why the leading rule was not used though it was cheapest over the history."""

    @property
    def source(self) -> str:
        """Where the near-term number comes from, in a reason's words."""
        if self.growth is not None:
            return f"forecast growth q{self.growth.level:g} ({self.growth.method})"
        if self.leading is not None:
            return f"leading signal {self.leading.signal!r}"
        if self.forecast_shape:
            return "forecast median change"
        return "newest observation x margin"

    def describe(self) -> str:
        """One clause for a reason: where the near-term number comes from, and its evidence."""
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
        if self.growth is not None:
            rule = f"newest observation x {self.growth.describe()} x (1 + {100 * self.margin:.1f}%)"
        elif self.leading is not None:
            rule = (
                f"(newest observation {self.leading.describe()}) x (1 + {100 * self.margin:.1f}%)"
            )
        else:
            rule = f"newest observation x margin {100 * self.margin:.1f}%"
        text = (
            f"near term {rule}, learned for {self.signal!r} from "
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
        text += self._comparison() + self._leading_comparison()
        if self.growth_error is not None and all(math.isfinite(e) for e in self.growth_error):
            fc, none = self.growth_error
            text += (
                f"; growth over the lead time on the backtest: the forecast's off by "
                f"{100 * fc:.1f}% on average, no growth by {100 * none:.1f}%"
            )
        return text

    def _leading_comparison(self) -> str:
        """Whether the leading signal paid on this history, against "no change"."""
        if self.leading_signal is None:
            return ""
        lead, f = self.leading_cost_ratio, self.flat_cost_ratio
        if self.leading is not None:
            if lead is None or f is None or f <= 0:
                return ""
            return (
                f"; the leading signal held {100 * (1 - lead / f):.1f}% less than newest "
                f"observation x margin ({f:.2f}x) at the same service on this history"
            )
        if self.leading_note:
            return f"; leading signal {self.leading_signal!r} not used ({self.leading_note})"
        if lead is None:
            return (
                f"; leading signal {self.leading_signal!r} not used (no share of it served "
                "as well for less here)"
            )
        if f is None or f <= 0:
            return f"; leading signal {self.leading_signal!r} not used"
        return (
            f"; leading signal {self.leading_signal!r} not used: serving as well with it held "
            f"{lead:.2f}x demand ({100 * (lead / f - 1):+.1f}% against newest observation x "
            "margin) on this history"
        )

    def _comparison(self) -> str:
        """Which rule won on this history, and by how much."""
        g, f = self.growth_cost_ratio, self.flat_cost_ratio
        if self.leading is not None:
            return ""
        if self.backtest_note:
            return f"; forecast not used near term ({self.backtest_note})"
        if g is None and f is None:
            return ""
        if self.growth is not None:
            if f is None:
                return "; no newest observation x margin served as well on this history"
            return (
                f"; the forecast's growth held {100 * (1 - g / f):.1f}% less than newest "
                f"observation x margin ({f:.2f}x) at the same service on this history"
                if g is not None and f > 0
                else ""
            )
        if g is None:
            return "; forecast not used near term (its growth rule did not serve as well here)"
        if f is None or f <= 0:
            return ""
        if g < f:
            return (
                f"; forecast not used near term: serving as well with its growth rule held "
                f"{g:.2f}x demand ({100 * (1 - g / f):.1f}% less than newest observation x "
                "margin), but more than the reactive rule cost"
            )
        return (
            f"; forecast not used near term: its growth rule held {g:.2f}x demand, "
            f"{100 * (g / f - 1):.1f}% more than newest observation x margin at the same "
            "service on this history"
        )

    def to_dict(self) -> dict[str, object]:
        def r6(x: float | None) -> float | None:
            return None if x is None or not math.isfinite(x) else round(x, 6)

        out: dict[str, object] = {
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
            "near_term": self.source,
            "growth_cost_ratio": r6(self.growth_cost_ratio),
            "flat_cost_ratio": r6(self.flat_cost_ratio),
        }
        if self.growth_error is not None:
            out["growth_error"] = {
                "forecast": r6(self.growth_error[0]),
                "no_growth": r6(self.growth_error[1]),
            }
        if self.leading_signal is not None:
            out["leading_signal"] = self.leading_signal
            out["leading_cost_ratio"] = r6(self.leading_cost_ratio)
            out["leading"] = self.leading.to_dict() if self.leading is not None else None
        if self.growth is not None:
            out["growth"] = {
                "level": self.growth.level,
                "method": self.growth.method,
                "samples": self.growth.samples,
                "overall_correction": round(self.growth.overall, 6),
            }
        return out


def replay_rule(
    values: np.ndarray,
    lead_steps: int,
    floor_steps: int,
    margins: np.ndarray = MARGIN_GRID,
    factor: np.ndarray | None = None,
    granule: float = 0.0,
    replica: float = 0.0,
    scored_from: int = 0,
    boost: np.ndarray | None = None,
    scored_to: int | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """``(unserved share, capacity / demand)`` of the near-term rule per candidate margin.

    ``values``: one regular series, NaN for gaps. ``factor``: the growth quantile per
    step (None: 1, the reactive rule). ``granule``: signal units of one node (capacity
    is requested in whole nodes; 0: not rounded). ``replica``: signal units of one
    replica, the margin's unit (0: not rounded). Steps before ``scored_from`` are
    replayed but not scored, and so are those from ``scored_to`` on (None: none). ``boost``: signal units added to each step's level before
    the margin (the leading rule, :mod:`scaler.planning.leading`; None: nothing).
    """
    y = np.asarray(values, dtype=float)
    n = len(y)
    margins = np.asarray(margins, dtype=float)
    known = pd.Series(y).ffill().fillna(0.0).to_numpy()
    peak = pd.Series(known).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
    grow = np.ones(n) if factor is None else np.where(np.isfinite(factor), factor, 1.0)
    # R[m, i]: what the rule requests after seeing step i: the largest of the
    # grown levels over the floor window (the planner's hysteresis keeps them).
    base = known * grow if boost is None else known * grow + np.nan_to_num(boost, nan=0.0)
    level = pd.Series(base).rolling(max(1, floor_steps), min_periods=1).max().to_numpy()
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
    scored[: max(0, scored_from)] = False
    if scored_to is not None:
        scored[max(0, scored_to) :] = False
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
) -> np.ndarray:
    """Unserved share of ``values`` (one regular series, NaN for gaps) per candidate margin,
    reacting (the newest value with the margin, held over the floor window)."""
    return replay_rule(values, lead_steps, floor_steps, margins)[0]


@dataclass(frozen=True)
class _Replay:
    """A regular history and the replay's window sizes, in its steps."""

    values: np.ndarray
    """The history on its regular grid, NaN for gaps."""
    grid: pd.DatetimeIndex
    step: pd.Timedelta
    lead_steps: int
    floor_steps: int
    granule: float
    replica: float
    scored_from: int = 0
    """First step scored: the backtest's first origin (0: the whole history)."""
    scored_to: int | None = None
    """Steps from this one on are not scored (None: all to the end)."""

    def rule(
        self,
        margins: np.ndarray,
        factor: np.ndarray | None = None,
        boost: np.ndarray | None = None,
    ) -> tuple[np.ndarray, np.ndarray]:
        """:func:`replay_rule` on this history: unserved share and cost per margin."""
        return replay_rule(
            self.values,
            self.lead_steps,
            self.floor_steps,
            margins,
            factor,
            granule=self.granule,
            replica=self.replica,
            scored_from=self.scored_from,
            boost=boost,
            scored_to=self.scored_to,
        )


_Candidate = tuple[int, int]
"""A rule (the index of its growth level in LEVELS, -1 for newest observation x margin,
:data:`LEADING_BASE` and up for a leading rule) and the index of its margin in MARGIN_GRID."""
LEADING_BASE = 1000
"""Rule numbers of the leading rule's candidates start here."""


def _is_leading(c: _Candidate) -> bool:
    return c[0] >= LEADING_BASE


def _family(c: _Candidate) -> str:
    return "leading" if _is_leading(c) else ("growth" if c[0] >= 0 else "flat")


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
    backtest: Backtester | None = None,
    leading: pd.Series | None = None,
    leading_signal: str | None = None,
) -> Margin | None:
    """The cheapest rule and margin keeping ``history``'s unserved share in ``budget``.

    ``history`` is the signal as observed (its own step, NaN for gaps); ``step`` its
    step (inferred from the index when not given); ``granule`` the signal units one
    node serves (0: capacity not rounded), ``replica`` those of one replica (the margin
    is headroom on replicas; 0: not rounded). ``reactive_headroom``: the reference rule
    the choice may not cost more than (None: no reference). ``backtest``: the planner's
    forecaster walked forward over the history (None: the growth rule is not a
    candidate). ``leading``: the history of the signal's leading signal (named
    ``leading_signal``; None: the leading rule is not a candidate, and the choice is
    exactly the one without it). None when the history is shorter than
    :data:`MIN_HISTORY_STEPS` or carries no demand.
    """
    replay = _regular_replay(history, lead_time_s, step, floor_window, granule, replica)
    if replay is None:
        return None
    bt = backtest(replay.values, replay.grid, replay.lead_steps) if backtest else None
    if bt is not None:
        replay = _Replay(**{**replay.__dict__, "scored_from": int(bt.positions.min())})
    cands, unserved, cost, growths = _candidates(replay, bt)
    # Never more unserved than reacting left on the same history, nor than the budget.
    reactive_cost = reactive_unserved = None
    target = budget
    if reactive_headroom is not None:
        ru, rc = replay.rule(np.array([reactive_headroom]))
        reactive_unserved, reactive_cost = float(ru[0]), float(rc[0])
        target = min(budget, reactive_unserved)
    lead_x = None if leading is None else aligned(leading, replay.grid, replay.step)
    margins = _leading_margins(unserved, target)
    leads = (
        _leading_candidates(
            replay, lead_x, str(leading_signal or "leading"), margins, (cands, unserved, cost)
        )
        if lead_x is not None
        else {}
    )
    chosen, capped = _choose(cands, unserved, cost, target, budget, reactive_cost)
    leading_note, tried = "", cands
    if _is_leading(chosen) and lead_x is not None:
        boost = leads[chosen[0]].share * leads[chosen[0]].arrival.values(replay.values, lead_x)
        placebo = _placebo_cost(replay, lead_x, target, margins)
        if placebo is not None and cost[chosen] >= placebo * (1 - 1e-9):
            # Capacity added at random (the same series from another time) served as well
            # for as little: what won is the extra capacity, not what the series knows.
            leading_note = f"its own values at other times did as well ({placebo:.2f}x)"
        elif not _confirmed_on_halves(replay, boost, budget, reactive_headroom):
            # Chosen on the whole history but not cheaper than "no change" on each half of
            # it: a leading series that won by chance.
            leading_note = "cheaper over the history, but not on each half of it"
        if leading_note:
            # The choice is then exactly the one without the leading signal.
            cands = [c for c in cands if not _is_leading(c)]
            chosen, capped = _choose(cands, unserved, cost, target, budget, reactive_cost)
    rule, k = chosen
    scored = replay.grid[replay.scored_from :]
    lead_rule = leads.get(rule)
    if lead_rule is not None and lead_x is not None:
        lead_rule = lead_rule.at(replay.values, lead_x)
    return Margin(
        signal=str(signal if signal is not None else history.name or "signal"),
        margin=float(MARGIN_GRID[k]),
        unserved_share=unserved[chosen],
        smaller_unserved_share=unserved[(rule, k - 1)] if k > 0 else None,
        budget=budget,
        history_days=(scored[-1] - scored[0] + replay.step) / pd.Timedelta(days=1),
        within_budget=unserved[chosen] <= budget + 1e-12,
        forecast_shape=rule >= 0,
        cost_ratio=cost[chosen],
        reactive_cost_ratio=reactive_cost,
        reactive_unserved_share=reactive_unserved,
        capped=capped,
        target=target,
        growth=growths.get(rule),
        growth_cost_ratio=_best_cost(cands, unserved, cost, target, "growth"),
        flat_cost_ratio=_best_cost(cands, unserved, cost, target, "flat"),
        backtest_note=""
        if bt is not None or backtest is None
        else "too little history to backtest the forecaster",
        growth_error=bt.errors() if bt is not None else None,
        leading=lead_rule,
        leading_cost_ratio=_best_cost(tried, unserved, cost, target, "leading") if leads else None,
        leading_signal=None if leading is None else str(leading_signal or "leading"),
        leading_note=leading_note,
    )


def _choose(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    budget: float,
    reactive_cost: float | None,
) -> tuple[_Candidate, bool]:
    """The chosen candidate, and whether it is capped at the reactive rule's cost."""
    chosen = _cheapest(cands, unserved, cost, target, budget)
    if reactive_cost is not None and cost[chosen] > reactive_cost * (1 + 1e-9):
        return _no_costlier_than_reacting(cands, unserved, cost, target, reactive_cost, chosen)
    return chosen, False


PLACEBOS = 3
"""Placebos the leading rule must beat: its arrival measures moved by 1/4, 2/4 and 3/4 of
the history (the same values at other times)."""


def _placebo_cost(
    replay: _Replay, lead_x: np.ndarray, target: float, margins: np.ndarray
) -> float | None:
    """The least cost meeting ``target`` of the leading rule's candidates with each arrival
    measure moved in time (:data:`PLACEBOS`): what the extra capacity alone buys."""
    n = len(replay.values)
    best: float | None = None
    for arrival in arrivals(replay.step):
        measure = arrival.values(replay.values, lead_x)
        for k in range(1, PLACEBOS + 1):
            moved = np.roll(measure, k * n // (PLACEBOS + 1))
            for share in SHARES:
                u, c = replay.rule(margins, boost=share * moved)
                ok = c[u <= target + 1e-12]
                if ok.size and (best is None or ok.min() < best):
                    best = float(ok.min())
    return best


def _confirmed_on_halves(
    replay: _Replay, boost: np.ndarray, budget: float, reactive_headroom: float | None
) -> bool:
    """Whether the leading rule with ``boost`` costs no more than "no change" (the newest
    observation x margin) at the same service on each half of the scored history, each at
    its own target (the reactive rule's unserved share there, never over ``budget``)."""
    n = len(replay.values)
    mid = (replay.scored_from + n) // 2
    for lo, hi in ((replay.scored_from, mid), (mid, n)):
        half = _Replay(**{**replay.__dict__, "scored_from": lo, "scored_to": hi})
        target = budget
        if reactive_headroom is not None:
            target = min(budget, float(half.rule(np.array([reactive_headroom]))[0][0]))
        flat_u, flat_c = half.rule(MARGIN_GRID)
        lead_u, lead_c = half.rule(MARGIN_GRID, boost=boost)
        flat = flat_c[flat_u <= target + 1e-12]
        lead = lead_c[lead_u <= target + 1e-12]
        if not lead.size or (flat.size and lead.min() > flat.min() * (1 + 1e-9)):
            return False
    return True


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
        granule=granule if math.isfinite(granule) and granule > 0 else 0.0,
        replica=replica if math.isfinite(replica) and replica > 0 else 0.0,
    )


def _candidates(
    replay: _Replay, bt: GrowthBacktest | None
) -> tuple[list[_Candidate], dict[_Candidate, float], dict[_Candidate, float], dict[int, Growth]]:
    """Every candidate with its unserved share and cost over the history, and the growth
    quantile of each level."""
    table = {-1: replay.rule(MARGIN_GRID)}
    growths: dict[int, Growth] = {}
    if bt is not None:
        for r, level in enumerate(LEVELS):
            growths[r] = bt.calibrate(level)
            factor = np.ones(len(replay.values))
            factor[bt.positions] = growth_factors(bt, growths[r])
            table[r] = replay.rule(MARGIN_GRID, factor)
    # The growth rules first so that they win ties.
    rules = [*sorted(growths), -1]
    cands = [(r, k) for r in rules for k in range(len(MARGIN_GRID))]
    unserved = {c: float(table[c[0]][0][c[1]]) for c in cands}
    cost = {c: float(table[c[0]][1][c[1]]) for c in cands}
    return cands, unserved, cost, growths


def _leading_margins(unserved: dict[_Candidate, float], target: float) -> np.ndarray:
    """The margins the leading rule is tried at: up to the least with which the newest
    observation x margin meets ``target`` (the leading rule adds to the newest observation,
    so at a larger margin it costs at least what that rule does, and is never chosen);
    every margin where that rule meets it at none."""
    meets = [k for k in range(len(MARGIN_GRID)) if unserved[(-1, k)] <= target + 1e-12]
    return MARGIN_GRID[: meets[0] + 1] if meets else MARGIN_GRID


def _leading_candidates(
    replay: _Replay,
    lead_x: np.ndarray,
    signal: str,
    margins: np.ndarray,
    table: tuple[list[_Candidate], dict[_Candidate, float], dict[_Candidate, float]],
) -> dict[int, LeadingRule]:
    """The leading rule's candidates (every arrival measure and share, each at the first
    ``margins`` of MARGIN_GRID) added to ``table``'s candidates, unserved shares and costs (in
    place), and the rule of each number."""
    cands, unserved, cost = table
    rise = realised_rise(replay.values, replay.lead_steps)
    rules: dict[int, LeadingRule] = {}
    for arrival in arrivals(replay.step):
        measure = arrival.values(replay.values, lead_x)
        arrived = arrived_share(rise, measure, replay.scored_from)
        if arrived is None:
            continue
        for share in SHARES:
            number = LEADING_BASE + len(rules)
            rules[number] = LeadingRule(signal, arrival, share, replay.step, arrived)
            u, c = replay.rule(margins, boost=share * measure)
            for k in range(len(margins)):
                cands.append((number, k))
                unserved[(number, k)] = float(u[k])
                cost[(number, k)] = float(c[k])
    return rules


def _best_cost(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    family: str,
) -> float | None:
    """The least cost of a candidate of one rule family meeting ``target`` (None: none)."""
    costs = [cost[c] for c in cands if _family(c) == family and unserved[c] <= target + 1e-12]
    return min(costs) if costs else None


def _cheapest(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    budget: float,
) -> _Candidate:
    """The cheapest candidate meeting ``target``, else the cheapest within ``budget`` of the
    least any candidate leaves unserved; ties go to the growth rule, then the smaller margin
    (a leading rule wins only where it is strictly cheaper)."""
    within = any(unserved[c] <= target + 1e-12 for c in cands)
    limit = target if within else min(unserved[c] for c in cands) + budget
    return min(
        (c for c in cands if unserved[c] <= limit + 1e-12),
        key=lambda c: (round(cost[c], 9), _is_leading(c), c[0] < 0, c[1], c[0]),
    )


def _no_costlier_than_reacting(
    cands: list[_Candidate],
    unserved: dict[_Candidate, float],
    cost: dict[_Candidate, float],
    target: float,
    reactive_cost: float,
    chosen: _Candidate,
) -> tuple[_Candidate, bool]:
    """The choice where meeting the target cost more than reacting did, and whether it is
    capped (serves less than the target)."""
    # The cheapest candidate that serves as well as reacting for no more (the reactive
    # rule itself is one where it left no more than the budget), else the one serving
    # most at no more than the reactive rule's cost; ``chosen`` stays where none costs
    # no more.
    affordable = [c for c in cands if cost[c] <= reactive_cost * (1 + 1e-9)]
    dominating = [c for c in affordable if unserved[c] <= target + 1e-12]
    if dominating:
        return min(dominating, key=lambda c: (cost[c], _is_leading(c), c[0] < 0, c[1])), False
    if affordable:
        return min(affordable, key=lambda c: (unserved[c], cost[c], _is_leading(c), c[1])), True
    return chosen, False
