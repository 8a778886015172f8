"""Walk-forward replay: how a scaling policy would have done on a real demand trace, and
:func:`run_replay`, which runs every policy on one trace and scores them.

The replay follows one fixed protocol so that numbers are comparable across
policies and series (README, "Replay"):

* Demand is GPUs per 5-minute step, ``ceil(signal / units_per_gpu)``; a source
  with a longer step holds each value over its 5-minute steps for scoring. A gap
  in the source is a gap for the policies (they see no data) and is scored with
  the last known demand held.
* A value becomes visible to the policies at the *end* of its interval: the
  decision at step t sees the values whose intervals ended by t (for a 30-minute
  source, the decision at 10:20 knows the 9:30-10:00 value, not 10:00-10:30's).
  The scored demand and the clairvoyant and oracle yardsticks are unchanged.
* Nodes have ``gpus_per_node`` GPUs. ``R(t)`` is the nodes requested at step t,
  all of them billed (booting ones included). A node is usable once requested
  continuously for the lead time (L steps): ``U(t) = min(R(t), max(U(t-1),
  min(R(t-L..t))))``; lowering the request cancels booting nodes first and
  releases usable ones at once. Every policy starts the test period warm: before
  its first step it is taken to have requested, and be serving, its first request.
* The decision at step t uses demand up to t-1 only (walk-forward), and of a
  coarse source only the intervals that ended by t.
* A *reversal* is a change of a pool's request undone within 30 minutes (a raise
  followed by a cut, or a cut by a raise); the table counts them for every policy.
* The test period is the last 7 days (the last 4 for series of 14 days or less);
  everything before it is training.

Policies: ``static`` (training peak x 1.1), ``reactive`` (last demand x 1.2, lowered
after the target has been lower for 30 minutes), ``predictive`` (tiercast's
planner, :func:`scaler.planning.tiers.plan_capacity`, fed the latest forecast and the
demand observed so far), ``clairvoyant`` (perfect foresight under the lead time:
the cheapest schedule that serves everything) and ``oracle`` (demand itself, no
lead time; a lower bound no policy can reach).

The tier replay adds a reserved pool (billed whether used or not) and a spot pool
whose nodes are each reclaimed at a fixed hourly probability (seeded); a
reclaimed node's GPUs vanish at once and its replacement boots for the lead time.

Where each part lives: :mod:`~scaler.replay.protocol` (the constants and the trace),
:mod:`~scaler.replay.fleets` (the lead-time rule, spot reclaims, a run),
:mod:`~scaler.replay.baselines` (static, reactive, clairvoyant, oracle),
:mod:`~scaler.replay.walkforward` (predictive), :mod:`~scaler.replay.tiers` (the tier
fleet's sizes), :mod:`~scaler.replay.scoring`; the suites in :mod:`~scaler.replay.suite`
and :mod:`~scaler.replay.suite_runner`, the output in :mod:`~scaler.replay.tables` and
:mod:`~scaler.replay.timeline`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from forecaster.errors import BadInputError
from scaler.config import Config
from scaler.replay.baselines import BASELINES
from scaler.replay.fleets import FleetRun, single_pool_run
from scaler.replay.frontier import (
    DayTotals,
    Frontier,
    Matched,
    central,
    day_seed,
    matched_draws,
    reactive_frontier,
)
from scaler.replay.protocol import STEP, STEPS_PER_DAY, ReplaySetup, Trace
from scaler.replay.scoring import Score, score
from scaler.replay.tiers import tiered_reactive_frontiers
from scaler.replay.walkforward import ForecastCache, replay_config, tiercast_run

POLICIES: tuple[str, ...] = ("static", "reactive", "predictive", "clairvoyant", "oracle")
YARDSTICKS: tuple[str, ...] = ("clairvoyant", "oracle")
"""Policies no real scaler can run: every cost is measured against them."""


def ablation(method: str) -> str:
    """The policy name of the planner replayed with forecast ``method`` instead of the
    setup's (``predictive[last_value]``): the same planner, so a gain is the forecast's."""
    return f"predictive[{method}]"


def _ablated_method(policy: str) -> str | None:
    """The forecast method of an ablation's policy name (None: not an ablation)."""
    if policy.startswith("predictive[") and policy.endswith("]") and len(policy) > 12:
        return policy[len("predictive[") : -1]
    return None


@dataclass
class Replay:
    """Every policy's run and score on one trace, and the reactive frontier beside them."""

    trace: Trace
    setup: ReplaySetup
    runs: dict[str, FleetRun]
    scores: dict[str, Score]
    frontier: Frontier | None = None
    matched: dict[str, Matched] = field(default_factory=dict)
    """Each real policy at matched service against the frontier (scaler.replay.frontier)."""
    tier_matched: dict[str, Matched] = field(default_factory=dict)
    """The tiered planner at matched service against the tiered reactive baseline, its
    commitment sized by rule, at hindsight and as the floor of every commitment
    (scaler.replay.tiers.RESERVED_RULES)."""
    draws: dict[str, np.ndarray] = field(default_factory=dict)
    """The planner's saving at matched service (``predictive`` and its ablations) on each
    bootstrap draw of the test days (scaler.replay.frontier.matched_draws)."""
    tier_draws: dict[str, np.ndarray] = field(default_factory=dict)
    """The same for each of :attr:`tier_matched`."""
    tier_frontiers: dict[str, Frontier] = field(default_factory=dict)
    """The tiered reactive baseline's frontiers :attr:`tier_matched` was matched against."""

    @property
    def intervals(self) -> dict[str, tuple[float, float]]:
        """:attr:`draws` as 90% intervals."""
        return {p: central(d) for p, d in self.draws.items()}

    @property
    def tier_intervals(self) -> dict[str, tuple[float, float]]:
        return {r: central(d) for r, d in self.tier_draws.items()}


def run_replay(
    trace: Trace,
    setup: ReplaySetup,
    policies: Sequence[str] = POLICIES,
    tiers: bool = False,
    progress: Callable[[str], None] | None = None,
    cache: ForecastCache | None = None,
    fleet: Config | None = None,
) -> Replay:
    """Run ``policies`` (and, with ``tiers``, tiercast on reserved + spot + on-demand).

    ``predictive[METHOD]`` replays the planner with forecast METHOD (an ablation).
    ``cache``: forecasts shared with other replays of the same trace (other lead times).
    ``fleet``: the user's own pools (``simulate --config``, scaler.replay.user_fleet):
    with ``tiers`` the tiered planner runs on them and ``predictive`` on on-demand only at
    the setup's price; without, ``predictive`` runs on them.
    """
    unknown = [p for p in policies if p not in POLICIES and _ablated_method(p) is None]
    if unknown:
        raise BadInputError(
            f"--policies: unknown policy {unknown[0]!r}; expected some of {', '.join(POLICIES)} "
            "or predictive[METHOD]"
        )
    runs = _policy_runs(trace, setup, policies, tiers, progress, cache, fleet)
    scores = _scores(trace, setup, runs)
    frontier = reactive_frontier(trace, setup)
    matched = {p: frontier.match(s) for p, s in scores.items() if p not in YARDSTICKS}
    tiered = scores.get("predictive-tiers")
    # The baseline takes the replay's own tiers: not a user's pools (--config).
    tier_frontiers = (
        tiered_reactive_frontiers(trace, setup) if tiered is not None and fleet is None else {}
    )
    tier_matched = {r: f.match(tiered) for r, f in tier_frontiers.items() if tiered is not None}
    demand = trace.demand[trace.test_start :]

    seed = day_seed(trace.test_index[0])

    def drawn(f: Frontier, policy: str) -> np.ndarray | None:
        days = DayTotals.of(runs[policy], demand, setup.gpus_per_node)
        return matched_draws(f, scores[policy], days, demand, seed=seed)

    planners = [p for p in matched if p == "predictive" or _ablated_method(p) is not None]
    draws = {p: d for p in planners if (d := drawn(frontier, p)) is not None}
    tier_draws = {
        r: d
        for r in tier_matched
        if (d := drawn(tier_frontiers[r], "predictive-tiers")) is not None
    }
    return Replay(
        trace,
        setup,
        runs,
        scores,
        frontier,
        matched,
        tier_matched,
        draws,
        tier_draws,
        tier_frontiers,
    )


def planner_days(trace: Trace, policies: Sequence[str], tiers: bool) -> int:
    """Simulated days :func:`run_replay` reports to its ``progress``: one per day of each run
    of the planner."""
    runs = sum(p == "predictive" or _ablated_method(p) is not None for p in policies) + int(tiers)
    return runs * (len(trace.test_index) // STEPS_PER_DAY)


def _policy_runs(
    trace: Trace,
    setup: ReplaySetup,
    policies: Sequence[str],
    tiers: bool,
    progress: Callable[[str], None] | None,
    cache: ForecastCache | None,
    fleet: Config | None = None,
) -> dict[str, FleetRun]:
    """Each policy's run, in the order asked, then the yardsticks, then the tiered planner."""
    runs: dict[str, FleetRun] = {}
    # The on-demand and the tiered planner forecast the same data.
    cache = cache if cache is not None else {}
    # The clairvoyant and the oracle are always run: every cost is measured against them.
    for name in (*policies, *YARDSTICKS):
        if name in runs:
            continue
        method = _ablated_method(name)
        if name == "predictive" or method is not None:
            ran = setup if method is None else replace(setup, forecast_method=method)
            own = fleet is not None and not tiers and method is None
            runs[name] = tiercast_run(
                trace,
                ran,
                fleet if own and fleet is not None else replay_config(trace, ran),
                name,
                progress=progress,
                forecast_cache=cache,
            )
        else:
            runs[name] = single_pool_run(name, BASELINES[name](trace, setup), setup)
    if tiers:
        config = fleet if fleet is not None else replay_config(trace, setup, tiers=True)
        runs["predictive-tiers"] = tiercast_run(
            trace, setup, config, "predictive-tiers", progress=progress, forecast_cache=cache
        )
    return runs


def _scores(trace: Trace, setup: ReplaySetup, runs: dict[str, FleetRun]) -> dict[str, Score]:
    """Every run scored, in the order of :data:`POLICIES`, then the tiered planner."""
    demand = trace.demand[trace.test_start :]
    oracle = runs["oracle"].cost()
    clair = runs["clairvoyant"].cost()
    order = [p for p in POLICIES if p in runs] + [p for p in runs if p not in POLICIES]
    window = max(1, round(setup.reversal_window_s / STEP.total_seconds()))
    return {p: score(runs[p], demand, setup.gpus_per_node, oracle, clair, window) for p in order}
