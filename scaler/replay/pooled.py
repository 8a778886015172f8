"""A fleet of several workloads replayed with and without sharing and pooling.

``tiercast simulate --history LONG.csv --pooled mps|time-slicing`` reads every series of a
long-format CSV (``timestamp,series,value``) as one workload's demand in replicas
(``value / --units-per-gpu``) on one GPU model, all with the footprint given
(``--memory-gb``, ``--compute-share``), and replays them walk-forward on one grid: every
``reforecast`` a daily seasonal-naive forecast per series (the replay's fast baseline
forecaster, the same for every arrangement) sets the capacity of the window from lead
time to lead time + reforecast at the planner's quantile, never below what the newest
observations need; then the actual demand is served from it. Three arrangements, each
counted with the planner's own packing (:mod:`scaler.planning.demand`,
:mod:`scaler.planning.sharing`):

* ``whole``: a whole GPU per replica (no sharing);
* ``dedicated``: each workload on shared GPUs of its own, ``ceil(replicas / r_w)``;
* ``pooled``: the workloads on the same shared GPUs, from their joint forecast (the
  quantile of the sum: medians plus the spreads' root-sum-square by the correlation of
  the signals' changes on the week before), never more than dedicated.

Scores per arrangement: GPU-hours provisioned and their cost, the peak, and the share of
the GPU-steps needed that the capacity left unserved. This is a capacity replay of the
packing (GPUs, not nodes, tiers or lead-time dynamics of the tier planner's replay).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.estimators import SeasonalNaive
from forecaster.forecasting import SeriesForecast
from forecaster.series import regularize
from forecaster.tables import aligned
from scaler.config import Config, parse_config
from scaler.planning.demand import gpus_of_replicas, packed_by_model, quantile_replicas
from scaler.planning.sharing import pooling_groups

STEP = pd.Timedelta(minutes=5)
ARRANGEMENTS = ("whole", "dedicated", "pooled")


@dataclass(frozen=True)
class PooledSetup:
    """The pooled replay's parameters."""

    mode: str = "mps"
    """``mps`` or ``time-slicing``."""
    memory_gb: float = 16.0
    """GPU memory per replica, GB."""
    compute_share: float | None = None
    """Share of a GPU per replica (default: what memory leaves, as the planner reads it)."""
    gpu_model: str = "H100-80GB"
    units_per_replica: float = 1.0
    """Signal units one replica serves: replicas = ceil(value / this)."""
    lead_time_s: int = 600
    reforecast_s: int = 3600
    quantile: float = 0.9
    price_per_gpu_hour: float = 4.0
    test_days: int | None = None
    """The test period's days: default 7, or 4 for series of 14 days or less."""


@dataclass(frozen=True)
class ArrangementScore:
    """One arrangement's result over the test period."""

    gpu_hours: float
    cost: float
    peak_gpus: float
    unserved_share: float
    """Unserved GPU-steps over the GPU-steps the actual demand needed."""


@dataclass
class PooledResult:
    """The pooled replay: the scores per arrangement and what it ran on."""

    series: list[str]
    setup: PooledSetup
    test_start: pd.Timestamp
    test_end: pd.Timestamp
    replicas_per_gpu: int
    scores: dict[str, ArrangementScore] = field(default_factory=dict)

    def saving(self, against: str = "dedicated") -> tuple[float, float]:
        """GPU-hours and money pooling saves against ``against``."""
        a, b = self.scores[against], self.scores["pooled"]
        return a.gpu_hours - b.gpu_hours, a.cost - b.cost


def _fleet_config(names: list[str], setup: PooledSetup, sharing: str) -> Config:
    workload = {"gpu_model": setup.gpu_model, "units_per_replica": setup.units_per_replica}
    if sharing != "whole":
        workload |= {"sharing": sharing, "isolation": "none", "memory_gb": setup.memory_gb}
        if setup.compute_share is not None:
            workload["compute_share"] = setup.compute_share
        else:
            # What memory leaves: the footprint's compute is its memory's share of the GPU.
            workload["replicas_per_gpu"] = max(1, int(_gpu_memory(setup) // setup.memory_gb))
    return parse_config(
        {
            "signals": [{"name": n} for n in names],
            "workloads": [{"name": n, "signal": n, **workload} for n in names],
            "pools": [
                {
                    "name": "pool",
                    "tier": "on-demand",
                    "gpu_model": setup.gpu_model,
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": setup.price_per_gpu_hour,
                }
            ],
        },
        "pooled replay",
    )


def _gpu_memory(setup: PooledSetup) -> float:
    from scaler.catalog.gpus import gpu_model

    return float(gpu_model(setup.gpu_model).memory_gb)


def _aligned(history: Mapping[str, pd.Series]) -> pd.DataFrame:
    """The series on one 5-minute grid (their common span), gaps carried forward."""
    frame = pd.concat(
        {str(k): regularize(v.sort_index(), STEP) for k, v in history.items()}, axis=1
    )
    frame = frame.dropna(how="all").ffill().dropna()
    if len(frame) < 2 * 288:
        raise BadInputError(
            "--pooled: the series overlap for less than two days on a 5-minute grid; "
            "give series that cover the same period"
        )
    return frame.clip(lower=0.0)


def _forecast(y: pd.Series, steps: int, quantile: float) -> SeriesForecast:
    model = SeasonalNaive(season="1d").fit(y)
    frame = model.predict(steps, [0.5, quantile])
    last = float(y.iloc[-1])
    recent = y[y.index > y.index[-1] - pd.Timedelta(hours=1)]
    return SeriesForecast(
        name=str(y.name),
        frame=frame,
        estimator=model.label(),
        reason="pooled replay baseline",
        step=STEP,
        last_timestamp=y.index[-1],
        last_value=last,
        recent_max=float(recent.max()),
        n_observed=len(y),
    )


def pooled_replay(history: Mapping[str, pd.Series], setup: PooledSetup) -> PooledResult:
    """Replay the fleet of ``history``'s series under each arrangement (module docstring)."""
    if len(history) < 2:
        raise BadInputError("--pooled: give a long-format CSV with two or more series")
    if setup.mode not in ("mps", "time-slicing"):
        raise BadInputError(f"--pooled must be mps or time-slicing; got {setup.mode!r}")
    frame = _aligned(history)
    names = [str(c) for c in frame.columns]
    shared = _fleet_config(names, setup, setup.mode)
    whole = _fleet_config(names, setup, "whole")
    groups = pooling_groups(shared.workloads)
    span_days = (frame.index[-1] - frame.index[0]) / pd.Timedelta(days=1)
    test_days = setup.test_days or (4 if span_days <= 14 else 7)
    test_start = frame.index[-1] - pd.Timedelta(days=test_days) + STEP
    if test_start - frame.index[0] < pd.Timedelta(days=2):
        raise BadInputError("--pooled: needs at least two days of history before the test period")
    test = frame.index[frame.index >= test_start]
    lead = pd.Timedelta(seconds=setup.lead_time_s)
    every = pd.Timedelta(seconds=setup.reforecast_s)
    steps = math.ceil((lead + every) / STEP)
    capacity = {a: pd.Series(np.nan, index=test) for a in ARRANGEMENTS}
    # Decisions a lead time before each window they size.
    t = test_start - lead
    while t <= test[-1]:
        train = frame[(frame.index < t) & (frame.index >= t - pd.Timedelta(days=14))]
        forecasts = {n: _forecast(train[n].rename(n), steps, setup.quantile) for n in names}
        grid = pd.date_range(t, periods=steps, freq=STEP)
        window = (grid >= t + lead) & (grid < t + lead + every)
        levels = _capacity_levels(shared, whole, forecasts, grid, train, setup.quantile)
        slot = (test >= t + lead) & (test < t + lead + every)
        for a in ARRANGEMENTS:
            capacity[a][slot] = float(levels[a][window].max())
        t += every
    actual = {a: _needed(shared, whole, frame.loc[test], a) for a in ARRANGEMENTS}
    step_h = STEP / pd.Timedelta(hours=1)
    result = PooledResult(
        series=names,
        setup=setup,
        test_start=test[0],
        test_end=test[-1],
        replicas_per_gpu=groups[0].replicas_per_gpu if groups else 1,
    )
    for a in ARRANGEMENTS:
        cap = capacity[a].bfill().ffill().to_numpy(float)
        need = actual[a]
        unserved = np.maximum(need - cap, 0.0).sum()
        hours = float(cap.sum() * step_h)
        result.scores[a] = ArrangementScore(
            gpu_hours=round(hours, 2),
            cost=round(hours * setup.price_per_gpu_hour, 2),
            peak_gpus=float(cap.max()),
            unserved_share=float(unserved / need.sum()) if need.sum() > 0 else 0.0,
        )
    return result


def _capacity_levels(
    shared: Config,
    whole: Config,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
    train: pd.DataFrame,
    quantile: float,
) -> dict[str, np.ndarray]:
    """GPUs per step on ``grid`` for each arrangement, at ``quantile`` and never below the
    newest observations' need."""
    history = {str(c): train[c] for c in train.columns}
    out: dict[str, np.ndarray] = {}
    for name, config in (("whole", whole), ("shared", shared)):
        workloads, replicas, joint = quantile_replicas(
            config.fleet, forecasts, grid, quantile, history
        )
        newest = [
            np.full(
                len(grid),
                float(np.ceil(forecasts[w.signal].last_value / w.units_per_replica - 1e-9)),
            )
            for w in workloads
        ]
        replicas = [np.maximum(r, n) for r, n in zip(replicas, newest, strict=True)]
        if name == "whole":
            out["whole"] = np.sum(
                [gpus_of_replicas(w, r) for w, r in zip(workloads, replicas, strict=True)], axis=0
            )
            continue
        joint = {k: np.maximum(v, np.sum(newest, axis=0)) for k, v in joint.items()}
        out["dedicated"] = np.sum(
            [gpus_of_replicas(w, r) for w, r in zip(workloads, replicas, strict=True)], axis=0
        )
        (model,) = packed_by_model(workloads, replicas, joint).values()
        out["pooled"] = model
    return out


def _needed(shared: Config, whole: Config, actual: pd.DataFrame, arrangement: str) -> np.ndarray:
    """GPUs the actual demand needs per test step under ``arrangement``."""
    config = whole if arrangement == "whole" else shared
    workloads = list(config.served_workloads)
    replicas = [
        np.ceil(np.maximum(actual[w.signal].to_numpy(float), 0) / w.units_per_replica - 1e-9)
        for w in workloads
    ]
    if arrangement == "pooled":
        (model,) = packed_by_model(workloads, replicas).values()
        return np.asarray(model, dtype=float)
    return np.sum(
        [gpus_of_replicas(w, r) for w, r in zip(workloads, replicas, strict=True)], axis=0
    )


def format_pooled(result: PooledResult) -> str:
    """The replay's table and the saving line."""
    rows = [
        [
            a,
            f"{s.gpu_hours:,.1f}",
            f"{s.cost:,.2f}",
            f"{s.peak_gpus:g}",
            f"{100 * s.unserved_share:.3f}%",
        ]
        for a, s in result.scores.items()
    ]
    table = "\n".join(
        aligned(
            [["arrangement", "GPU-hours", "cost", "peak GPUs", "unserved"], *rows],
            right=(1, 2, 3, 4),
        )
    )
    hours, money = result.saving()
    whole_h, whole_money = result.saving("whole")
    return (
        f"{table}\n"
        f"pooling {len(result.series)} workloads ({', '.join(result.series)}) by "
        f"{result.setup.mode}, {result.replicas_per_gpu} replicas per GPU: saves "
        f"{hours:,.1f} GPU-hours ({money:,.2f}) against dedicated shared sets and "
        f"{whole_h:,.1f} GPU-hours ({whole_money:,.2f}) against a whole GPU per replica"
    )
