"""``tiercast lab bench-commit``: reserved commitments from the forecast against a rule without one.

The tier replay gives tiercast's plan and its reactive baseline the same reserved
commitment, so it cannot tell whether a forecast sizes a commitment better. This benchmark
does, on every public trace of at least 35 days, from the long-horizon benchmark's origins
(:mod:`forecaster.benchmarks.long_horizon`: up to 3 a week apart, the newest 28 days before
the end, each seeing at most ``--max-history`` before it and nothing after):

- the fleet: the series scaled so that the history's peak is :data:`PEAK_GPUS` GPUs, as
  hourly peaks; a reserved, a spot (at most half the peak in nodes) and an uncapped
  on-demand pool at the tier replay's prices (:class:`scaler.replay.protocol.ReplaySetup`);
- ``rule``: the commitment that would have served the history's last 14 days cheapest,
  exactly (what a team without a forecast commits; the tier replay's rule);
- ``advice``: tiercast's commitment advice (:func:`scaler.reports.finance.advise_pool`,
  what ``tiercast finance`` gives) from ``rule``'s commitment, on the 28-day forecast's
  q0.1, q0.5 and q0.9 (``auto`` with the long-horizon rule past day 7) as its bands;
- ``hindsight``: the commitment that serves the 28 days that followed cheapest.

Each is costed on the 28 days that followed, served exactly by the finance projection's
fill of the other pools. The table gives per group the regret of ``rule`` and ``advice``
over ``hindsight`` and ``advice`` against ``rule``; groups are averaged with equal weight
and the groups chosen on (``--choose``) are reported apart from those that confirm.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from forecaster.benchmarks.accuracy import CHOOSE, BenchSeries
from forecaster.benchmarks.long_horizon import (
    HORIZON,
    QUANTILES,
    long_series,
    model_frame,
    origins_of,
    traces_folder,
)
from forecaster.long_horizon import long_horizon_frame
from forecaster.series import infer_step, regularize
from forecaster.tables import aligned
from scaler.config import PoolConfig
from scaler.replay.protocol import ReplaySetup
from scaler.reports.finance import (
    HOURS_PER_MONTH,
    CommitmentOption,
    PricedFleet,
    advise_pool,
    commitment_options,
)

PEAK_GPUS = 80
"""GPUs at the history's peak (10 nodes of 8): the scale every series is planned at."""
RULE_HISTORY = pd.Timedelta(days=14)
"""History the rule sizes the commitment on (the tier replay's ``commitment_history_s``)."""
MODEL = "H100-80GB"
CYCLE_S = 300
BANDS = {"low": "q0.1", "expected": "q0.5", "high": "q0.9"}
POLICIES = ("rule", "advice", "expected", "minimax", "swanson")
"""The commitments scored against ``hindsight``."""


def fleet_for(setup: ReplaySetup, committed: int) -> PricedFleet:
    """The benchmark's pools: ``committed`` reserved nodes, spot up to half the peak, and
    on-demand without a cap, at the tier replay's prices."""
    shape: dict[str, Any] = {"gpu_model": MODEL, "gpus_per_node": setup.gpus_per_node}
    peak_nodes = math.ceil(PEAK_GPUS / setup.gpus_per_node)
    pools = (
        PoolConfig(
            name="reserved",
            tier="reserved",
            price_per_gpu_hour=setup.reserved_price_per_gpu_hour,
            min_nodes=committed,
            max_nodes=committed,
            **shape,
        ),
        PoolConfig(
            name="spot",
            tier="spot",
            price_per_gpu_hour=setup.spot_price_per_gpu_hour,
            max_nodes=math.floor(peak_nodes * setup.spot_max_share),
            spot_interruption_rate_per_hour=setup.spot_interruption_rate_per_hour,
            lead_time_s=setup.lead_time_s,
            **shape,
        ),
        PoolConfig(
            name="on-demand",
            tier="on-demand",
            price_per_gpu_hour=setup.price_per_gpu_hour,
            max_nodes=100_000,
            **shape,
        ),
    )
    return PricedFleet(pools=pools, workloads=(), cycle_s=CYCLE_S, unserved_price=None)


def costs_of(fleet: PricedFleet, gpus: np.ndarray) -> dict[int, float]:
    """Money of serving ``gpus`` (per hour) exactly, per reserved commitment in nodes."""
    pool = fleet.pools[0]
    options = commitment_options(fleet, pool, {"low": gpus, "expected": gpus, "high": gpus})
    return {o.nodes: o.cost["expected"] for o in options if o.term == ""}


SWANSON = {"low": 0.3, "expected": 0.4, "high": 0.3}
"""Swanson's weights: a mean approximated from the 10th, 50th and 90th percentiles."""


def decide(options: Sequence[CommitmentOption]) -> dict[str, int]:
    """Three decision rules over the advice's options on the forecast's bands: ``expected``,
    the cheapest in the expected band; ``minimax``, the least largest regret over the bands
    (an option's cost in a band less the cheapest option's there); ``swanson``, the least
    cost weighted over the bands by :data:`SWANSON`."""
    bands = tuple(BANDS)
    best = {b: min(o.cost[b] for o in options) for b in bands}

    def regret(o: CommitmentOption) -> float:
        return max(o.cost[b] - best[b] for b in bands)

    def weighted(o: CommitmentOption) -> float:
        return sum(w * o.cost[b] for b, w in SWANSON.items())

    return {
        "expected": min(options, key=lambda o: (round(o.cost["expected"], 6), o.nodes)).nodes,
        "minimax": min(options, key=lambda o: (round(regret(o), 6), o.nodes)).nodes,
        "swanson": min(options, key=lambda o: (round(weighted(o), 6), o.nodes)).nodes,
    }


def cheapest(costs: Mapping[int, float]) -> int:
    """The commitment of least cost (the smaller one on a tie)."""
    return min(costs, key=lambda n: (round(costs[n], 6), n))


def hourly(y: pd.Series, scale: float) -> np.ndarray:
    """GPUs per hour: the hourly peak of ``y`` times ``scale``."""
    return (y.resample("1h").max().dropna() * scale).to_numpy(dtype=float)


@dataclass(frozen=True)
class Outcome:
    """One series at one origin: each policy's commitment and the money of the weeks after."""

    group: str
    series: str
    origin: pd.Timestamp
    nodes: dict[str, int]
    cost: dict[str, float]


def forecast_bands(history: pd.Series, cache: Path | None, key: str) -> pd.DataFrame:
    """The 28-day forecast a review would plan with: ``auto``, its long-horizon rule past
    day 7 (:func:`forecaster.long_horizon.long_horizon_frame`)."""
    frame, _ = model_frame(history, cache, key)
    regular = regularize(history)
    return long_horizon_frame(regular, frame, infer_step(regular), QUANTILES)[0]


def score_origin(
    s: BenchSeries,
    origin: pd.Timestamp,
    setup: ReplaySetup,
    max_history: pd.Timedelta,
    cache: Path | None,
) -> Outcome | None:
    """The three commitments of one series at one origin and what each costs after it."""
    history = s.y[(s.y.index <= origin) & (s.y.index > origin - max_history)]
    actual = s.y[(s.y.index > origin) & (s.y.index <= origin + HORIZON)]
    peak = float(np.nanmax(history.to_numpy(dtype=float))) if len(history) else 0.0
    if not peak > 0 or actual.empty:
        return None
    scale = PEAK_GPUS / peak
    after = hourly(actual, scale)
    recent = hourly(history[history.index > origin - RULE_HISTORY], scale)
    bands = forecast_bands(history, cache, f"{s.relative}|{origin}|{max_history}")
    bands = bands[bands.index <= origin + HORIZON]
    rule = cheapest(costs_of(fleet_for(setup, 0), recent))
    fleet = fleet_for(setup, rule)
    demand = {band: hourly(bands[col].clip(lower=0.0), scale) for band, col in BANDS.items()}
    months = len(demand["expected"]) / HOURS_PER_MONTH
    advice = advise_pool(fleet, MODEL, fleet.pools[0], setup.price_per_gpu_hour, demand, months)
    nodes = {"rule": rule, "advice": advice.recommended_nodes, **decide(advice.options)}
    # Costed from no commitment up to past the largest one here (the options' range).
    realized = costs_of(fleet_for(setup, max(nodes.values())), after)
    nodes["hindsight"] = cheapest(realized)
    return Outcome(s.group, s.relative, origin, nodes, {k: realized[n] for k, n in nodes.items()})


def by_group(outcomes: Sequence[Outcome]) -> pd.DataFrame:
    """Per group (series first, then origins averaged): each policy's regret over hindsight,
    %, and the share of origins where the advice moved from the rule's commitment."""
    rows = []
    for o in outcomes:
        best = o.cost["hindsight"]
        row: dict[str, Any] = {"group": o.group, "series": o.series}
        row |= {p: 100 * (o.cost[p] / best - 1) for p in POLICIES}
        row["moved"] = float(o.nodes["advice"] != o.nodes["rule"])
        rows.append(row)
    per_series = pd.DataFrame(rows).groupby(["group", "series"]).mean(numeric_only=True)
    return per_series.groupby("group").mean()


def table(outcomes: Sequence[Outcome], choose: Sequence[str]) -> str:
    """Regret over hindsight, %, per group, then the mean over the groups of each half."""
    groups = by_group(outcomes)
    rows = [["group", "half", *(f"{p} %" for p in POLICIES), "advice moved"]]

    def line(name: str, half: str, r: pd.Series) -> list[str]:
        return [name, half, *(f"{r[p]:.2f}" for p in POLICIES), f"{r['moved']:.2f}"]

    for g, r in groups.iterrows():
        rows.append(line(str(g), "choose" if g in choose else "confirm", r))
    for half in ("choose", "confirm"):
        mask = groups.index.isin(choose) == (half == "choose")
        if mask.any():
            rows.append(line(f"mean, {half}", half, groups[mask].mean()))
    return "\n".join(aligned(rows, right=range(2, len(POLICIES) + 3)))


def run(
    traces: Path,
    groups: Sequence[str] | None,
    origins: int,
    max_history: pd.Timedelta,
    cache: Path | None,
    setup: ReplaySetup | None = None,
) -> list[Outcome]:
    """Every origin of every trace of at least :data:`~forecaster.benchmarks.long_horizon.MIN_DAYS`."""
    setup = setup or ReplaySetup()
    out: list[Outcome] = []
    for s in long_series(traces, groups):
        for origin in origins_of(s.y, origins):
            outcome = score_origin(s, origin, setup, max_history, cache)
            if outcome is not None:
                out.append(outcome)
    return out


def cmd_bench_commit(args: argparse.Namespace) -> int:
    traces = traces_folder(args.traces)
    if traces is None:
        return 0
    try:
        max_history = pd.Timedelta(args.max_history.upper())
    except ValueError:
        print(
            f"error: --max-history {args.max_history!r} is not a duration such as 60d",
            file=sys.stderr,
        )
        return 2
    wanted = [g for g in args.groups.split(",") if g] or None
    cache = Path(args.cache) if args.cache else None
    outcomes = run(traces, wanted, args.origins, max_history, cache)
    if not outcomes:
        print("no trace of 35 days or more", file=sys.stderr)
        return 0
    if args.rows:
        pd.DataFrame(
            [
                {"group": o.group, "series": o.series, "origin": str(o.origin)}
                | {f"{k}_nodes": v for k, v in o.nodes.items()}
                | {f"{k}_cost": v for k, v in o.cost.items()}
                for o in outcomes
            ]
        ).to_csv(args.rows, index=False)
    print(table(outcomes, [g for g in args.choose.split(",") if g]))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench-commit",
        help="reserved commitments from the forecast's advice against a rule without one",
        description="On every public trace of 35 days or more, from rolling origins: the "
        "reserved commitment a 14-day rule makes, the one tiercast's advice makes from it on "
        "the 28-day forecast, and the hindsight one, each costed on the 28 days that followed.",
    )
    p.add_argument("--traces", default="../shared/data/traces", help="the public traces folder")
    p.add_argument("--groups", default="", help="comma-separated groups to run (default: all)")
    p.add_argument("--choose", default=",".join(CHOOSE), help="groups chosen on; others confirm")
    p.add_argument("--origins", type=int, default=3, help="origins a week apart per series")
    p.add_argument("--max-history", default="60d", help="most history an origin sees")
    p.add_argument("--cache", default="", help="folder keeping each origin's model forecast")
    p.add_argument("--rows", default="", help="write every series and origin as CSV here")
    p.set_defaults(func=cmd_bench_commit)
