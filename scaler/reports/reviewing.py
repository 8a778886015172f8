"""Forecast against actual: how the forecasts and plans of the last review period fared.

A capacity review asks what the report's forecasts are worth by looking back: what
was forecast for each moment of the last review period, what happened, what capacity
was planned for it, and what that cost in idle GPUs and in demand left unserved.
Two sources, the same output (:class:`Hindsight`):

* **Run records** (``tiercast serve`` writes one per cycle, :mod:`scaler.records`):
  for each cycle, the forecast one lead time ahead (the signal's quantiles from the
  record, the GPU demand at the policy quantile from the recorded plan) and the
  capacity the plan targeted for that moment (the plan's node timeline at the lead
  time), against the history at that moment.
* **A backtest** when there are no records: the estimator in use refitted at daily
  origins over the period, each forecasting the next day; the planned capacity is the
  planner's allocation (:func:`scaler.reports.finance.fill_pools`, commitments pinned) of the
  GPU demand at the policy quantile. It replays the allocation, not the whole planner
  (lead time, stabilization and step limits are ``tiercast simulate``'s job).

Actual demand is the history translated to GPUs the way the planner translates a
forecast. Per moment, planned GPUs serve actual demand in the planner's order
(reserved, then the cheapest pool); what is left of a pool is idle and costs its
price per GPU-hour; demand beyond every pool is short, costed at
``finance.unserved_price_per_gpu_hour`` or, without one, at the price of the pool
that would have had to serve it (the cheapest pool off commitment). Spot is counted
at its nominal GPUs here: the reclaims that happened are not in the history.

Pure functions of values apart from :func:`load_records`, which reads the SQLite file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster.estimators import quantile_column
from forecaster.series import History, infer_step
from scaler.catalog.gpus import gpu_model
from scaler.config import TIER_ORDER, PoolConfig, WorkloadConfig
from scaler.planning.demand import gpus_for
from scaler.reports.finance import PricedFleet, fill_pools

if TYPE_CHECKING:
    from forecaster.backtesting import Backtest

SOURCES: tuple[str, ...] = ("records", "backtest")


@dataclass
class Hindsight:
    """Forecasts of the review period against what happened, and what the plans cost."""

    source: str
    """``records`` or ``backtest``."""
    start: pd.Timestamp
    end: pd.Timestamp
    quantile: float
    """The policy quantile capacity was planned to."""
    signals: pd.DataFrame
    """Columns: timestamp, signal, actual, and one per forecast quantile (``q0.1``, ...)."""
    gpus: pd.DataFrame
    """Columns: timestamp, gpu_model, actual_gpus, forecast_gpus, planned_gpus, weight_h."""
    pools: pd.DataFrame
    """Columns: pool, tier, gpu_model, planned_gpu_hours, used_gpu_hours, idle_gpu_hours,
    idle_cost, short_gpu_hours, short_cost."""
    notes: list[str] = field(default_factory=list)
    waited: pd.DataFrame = field(default_factory=pd.DataFrame)
    """GPU demand that waited for capacity (``risk.starvation`` of the recorded plans), per
    GPU model: waited_gpu_hours, peak_waiting_gpus, cycles (those with any waiting),
    threshold_s. Empty when no recorded cycle read it."""
    drift: pd.DataFrame = field(default_factory=pd.DataFrame)
    """Models refitted ahead of schedule because their forecasts drifted (``risk.drift`` of
    the recorded plans): at, signal, coverage, band, error, points."""

    @property
    def empty(self) -> bool:
        return self.gpus.empty

    def accuracy(self) -> pd.DataFrame:
        """Per signal: points, mean absolute error of the median, band coverage, share above q."""
        rows = []
        q = quantile_column(self.quantile)
        cols = [c for c in self.signals.columns if c.startswith("q")]
        lo, hi = (min(cols, key=_level), max(cols, key=_level)) if cols else ("", "")
        for name, g in self.signals.groupby("signal", sort=False):
            g = g.dropna(subset=["actual"])
            if g.empty:
                continue
            a = g["actual"].to_numpy(dtype=float)
            rows.append(
                {
                    "signal": str(name),
                    "points": len(g),
                    "mae": float(np.mean(np.abs(a - g["q0.5"].to_numpy(dtype=float))))
                    if "q0.5" in g
                    else float("nan"),
                    "coverage": float(
                        np.mean(
                            (a >= g[lo].to_numpy(dtype=float)) & (a <= g[hi].to_numpy(dtype=float))
                        )
                    )
                    if cols
                    else float("nan"),
                    "above_q": float(np.mean(a > g[q].to_numpy(dtype=float)))
                    if q in g
                    else float("nan"),
                }
            )
        return pd.DataFrame(rows)

    def by_tier(self) -> pd.DataFrame:
        if self.pools.empty:
            return self.pools
        cols = [c for c in self.pools.columns if c not in ("pool", "tier", "gpu_model")]
        out = self.pools.groupby("tier", sort=False)[cols].sum().reset_index()
        return out.sort_values("tier", key=lambda s: s.map(TIER_ORDER)).reset_index(drop=True)


def _level(column: str) -> float:
    return float(column[1:])


def actual_gpus(
    workloads: Sequence[WorkloadConfig], history: History, times: pd.DatetimeIndex
) -> dict[str, np.ndarray]:
    """GPUs per GPU model that the history needed at ``times`` (the value at or just before)
    for ``workloads``."""
    out: dict[str, np.ndarray] = {}
    for w in workloads:
        y = history.get(w.signal)
        if y is None:
            continue
        values = y.dropna().reindex(times, method="ffill").to_numpy(dtype=float)
        key = gpu_model(w.gpu_model).name
        out[key] = out.get(key, np.zeros(len(times))) + np.where(
            np.isnan(values), 0.0, gpus_for(w, values)
        )
    return out


def _serve(
    pools: Sequence[PoolConfig], nodes: np.ndarray, demand: np.ndarray, cycle_s: int
) -> tuple[np.ndarray, np.ndarray]:
    """(GPUs used per pool, GPUs short) when planned ``nodes`` (steps x pools) meet ``demand``."""
    from scaler.planning.coverage import spot_loss_fraction

    order = sorted(
        range(len(pools)),
        key=lambda i: (
            TIER_ORDER[pools[i].tier] if pools[i].tier == "reserved" else 1,
            pools[i].price_per_gpu_hour / max(1e-9, 1.0 - spot_loss_fraction(pools[i], cycle_s)),
            pools[i].name,
        ),
    )
    used = np.zeros_like(nodes, dtype=float)
    left = np.maximum(demand.astype(float), 0.0)
    for i in order:
        cap = nodes[:, i] * pools[i].gpus_per_node
        used[:, i] = np.minimum(cap, left)
        left = left - used[:, i]
    return used, left


def _fallback_price(pools: Sequence[PoolConfig]) -> float:
    elastic = [p for p in pools if p.tier != "reserved"] or list(pools)
    return min(p.price_per_gpu_hour for p in elastic)


def _pool_rows(
    fleet: PricedFleet,
    model: str,
    nodes: np.ndarray,
    demand: np.ndarray,
    weight_h: np.ndarray,
) -> list[dict[str, Any]]:
    pools = fleet.pools_for(model)
    used, short = _serve(pools, nodes, demand, fleet.cycle_s)
    unserved_price = fleet.unserved_price
    fallback = min(
        (p for p in pools if p.tier != "reserved"),
        key=lambda p: p.price_per_gpu_hour,
        default=pools[0],
    )
    short_price = unserved_price if unserved_price is not None else _fallback_price(pools)
    short_h = float((short * weight_h).sum())
    rows = []
    for i, p in enumerate(pools):
        planned = float((nodes[:, i] * p.gpus_per_node * weight_h).sum())
        used_h = float((used[:, i] * weight_h).sum())
        mine = p.name == fallback.name
        rows.append(
            {
                "pool": p.name,
                "tier": p.tier,
                "gpu_model": model,
                "planned_gpu_hours": planned,
                "used_gpu_hours": used_h,
                "idle_gpu_hours": planned - used_h,
                "idle_cost": (planned - used_h) * p.price_per_gpu_hour,
                "short_gpu_hours": short_h if mine else 0.0,
                "short_cost": short_h * short_price if mine else 0.0,
            }
        )
    return rows


def from_backtests(
    fleet: PricedFleet,
    history: History,
    backtests: Mapping[str, Backtest],
    quantile: float,
) -> Hindsight:
    """The review period as the backtest's daily origins saw it (no run records), the
    forecasts filled into ``fleet``'s pools."""
    per_signal = {name: _day_ahead(history[name], bt) for name, bt in backtests.items()}
    if not per_signal:
        return _empty("backtest", quantile, ["no signal had a backtest over the review period"])
    times = pd.DatetimeIndex(sorted(set().union(*[f.index for f in per_signal.values()])))
    step_h = float(min(infer_step(history[n].dropna()) for n in per_signal) / pd.Timedelta(hours=1))
    forecast = _forecast_gpus(fleet.workloads, per_signal, times, quantile_column(quantile))
    actual = actual_gpus(fleet.workloads, history, times)
    pinned = fleet.pinned()
    gpu_rows: list[pd.DataFrame] = []
    pool_rows: list[dict[str, Any]] = []
    weight = np.full(len(times), step_h)
    for model in sorted(forecast):
        pools = pinned.pools_for(model)
        nodes = fill_pools(pools, forecast[model], fleet.cycle_s)
        d = actual.get(model, np.zeros(len(times)))
        gpu_rows.append(
            pd.DataFrame(
                {
                    "timestamp": times,
                    "gpu_model": model,
                    "actual_gpus": d,
                    "forecast_gpus": forecast[model],
                    "planned_gpus": (nodes * [p.gpus_per_node for p in pools]).sum(axis=1),
                    "weight_h": weight,
                }
            )
        )
        pool_rows += _pool_rows(pinned, model, nodes, d, weight)
    signal_rows = [
        f.rename_axis("timestamp").reset_index().assign(signal=name)
        for name, f in per_signal.items()
    ]
    return Hindsight(
        source="backtest",
        start=times[0],
        end=times[-1] + pd.Timedelta(hours=step_h),
        quantile=quantile,
        signals=pd.concat(signal_rows, ignore_index=True),
        gpus=pd.concat(gpu_rows, ignore_index=True) if gpu_rows else pd.DataFrame(),
        pools=pd.DataFrame(pool_rows),
        notes=[],
    )


def _day_ahead(y: pd.Series, bt: Backtest) -> pd.DataFrame:
    """One signal's backtest as one frame: each origin's quantiles and the actual, by time."""
    step = infer_step(y.dropna())
    parts = []
    for k, origin in enumerate(bt.origins):
        times = pd.date_range(origin, periods=bt.forecasts.shape[1], freq=step)
        frame = pd.DataFrame(
            bt.forecasts[k], index=times, columns=[quantile_column(q) for q in bt.quantiles]
        )
        frame["actual"] = bt.actuals[k]
        parts.append(frame)
    # Newer origins win where day-ahead forecasts overlap.
    joined = pd.concat(parts[::-1])
    return joined[~joined.index.duplicated(keep="last")].sort_index()


def _forecast_gpus(
    workloads: Sequence[WorkloadConfig],
    per_signal: Mapping[str, pd.DataFrame],
    times: pd.DatetimeIndex,
    col: str,
) -> dict[str, np.ndarray]:
    """GPU demand per model at the quantile column ``col``, the workloads' signals translated."""
    forecast: dict[str, np.ndarray] = {}
    for w in workloads:
        f = per_signal.get(w.signal)
        if f is None or col not in f:
            continue
        values = f[col].reindex(times).ffill().bfill().to_numpy(dtype=float)
        key = gpu_model(w.gpu_model).name
        forecast[key] = forecast.get(key, np.zeros(len(times))) + gpus_for(w, values)
    return forecast


def _empty(source: str, quantile: float, notes: list[str]) -> Hindsight:
    now = pd.Timestamp(0)
    return Hindsight(
        source=source,
        start=now,
        end=now,
        quantile=quantile,
        signals=pd.DataFrame(columns=["timestamp", "signal", "actual"]),
        gpus=pd.DataFrame(),
        pools=pd.DataFrame(),
        notes=notes,
    )


@dataclass(frozen=True)
class RecordedCycle:
    """What one recorded cycle forecast and planned (from its record and full plan)."""

    created_at: pd.Timestamp
    forecast: Mapping[str, Any]
    """The record's forecast summary (per signal: last_timestamp, at_lead per quantile)."""
    plan: Mapping[str, Any]
    """The full plan JSON."""


def load_records(path: str | Path, start: pd.Timestamp, end: pd.Timestamp) -> list[RecordedCycle]:
    """Cycles recorded in ``[start, end)`` that made a plan, oldest first; [] when no file."""
    from scaler.records import RunStore

    p = Path(path)
    if not p.is_file():
        return []
    store = RunStore(p)
    out = []
    for rec in store.recent(limit=100_000, job="cycle"):
        at = _naive(rec.started_at)
        if not (start <= at < end) or rec.plan is None:
            continue
        plan = store.full_plan(rec.run_id)
        if plan is None:
            continue
        out.append(RecordedCycle(created_at=at, forecast=rec.forecast, plan=plan))
    return sorted(out, key=lambda c: c.created_at)


def _naive(ts: str) -> pd.Timestamp:
    t = pd.Timestamp(ts)
    return t.tz_convert(None) if t.tzinfo is not None else t


def from_records(
    fleet: PricedFleet, history: History, cycles: Sequence[RecordedCycle], quantile: float
) -> Hindsight:
    """The review period as the recorded cycles forecast and planned it, one lead time ahead,
    priced on ``fleet``'s pools."""
    if not cycles:
        return _empty("records", quantile, ["no recorded cycle in the review period"])
    lead_s = max(p.lead_time_s for p in fleet.pools)
    sig = pd.DataFrame(_recorded_signals(history, cycles, lead_s))
    pools_by_model: dict[str, list[PoolConfig]] = {}
    for p in fleet.pools:
        pools_by_model.setdefault(gpu_model(p.gpu_model).name, []).append(p)
    gpu_rows, nodes_at = _recorded_plans(cycles, pools_by_model, fleet.cycle_s)
    gpus = pd.DataFrame(gpu_rows)
    notes: list[str] = []
    pool_rows: list[dict[str, Any]] = []
    if not gpus.empty:
        newest = max(y.dropna().index[-1] for y in history.values() if y.notna().any())
        happened = gpus["timestamp"] <= newest
        if not happened.all():
            notes.append(f"{int((~happened).sum())} planned moment(s) are after the newest sample")
        gpus = gpus[happened].reset_index(drop=True)
        keep_nodes = {m: np.asarray(v, dtype=float) for m, v in nodes_at.items()}
        actual_col = np.zeros(len(gpus))
        for model, g in gpus.groupby("gpu_model", sort=False):
            times = pd.DatetimeIndex(g["timestamp"])
            d = actual_gpus(fleet.workloads, history, times).get(model, np.zeros(len(times)))
            actual_col[g.index.to_numpy()] = d
            mask = happened.to_numpy()[
                [i for i, r in enumerate(gpu_rows) if r["gpu_model"] == model]
            ]
            nodes = keep_nodes[model][mask]
            pool_rows += _pool_rows(
                fleet, str(model), nodes, d, g["weight_h"].to_numpy(dtype=float)
            )
        gpus["actual_gpus"] = actual_col
    return Hindsight(
        source="records",
        start=cycles[0].created_at,
        end=cycles[-1].created_at + pd.Timedelta(seconds=fleet.cycle_s),
        quantile=quantile,
        signals=sig if not sig.empty else pd.DataFrame(columns=["timestamp", "signal", "actual"]),
        gpus=gpus,
        pools=pd.DataFrame(pool_rows),
        notes=notes,
        waited=recorded_waiting(cycles, fleet.cycle_s),
        drift=recorded_drift(cycles),
    )


def recorded_drift(cycles: Sequence[RecordedCycle]) -> pd.DataFrame:
    """Each drift refit the recorded cycles made, oldest first (empty when none)."""
    rows = []
    for c in cycles:
        drift = c.plan.get("risk", {}).get("drift")
        if not isinstance(drift, Mapping):
            continue
        for signal, d in sorted(drift.items()):
            if isinstance(d, Mapping):
                rows.append({"at": c.created_at, "signal": str(signal), **dict(d)})
    return pd.DataFrame(rows)


def recorded_waiting(cycles: Sequence[RecordedCycle], cycle_s: int) -> pd.DataFrame:
    """Per GPU model, the GPU-hours that waited for capacity over the recorded cycles: each
    cycle's waiting GPUs (``risk.starvation``) held for one cycle, the most at once, and
    in how many cycles any waited. Empty when no cycle recorded starvation."""
    weight = cycle_s / 3600.0
    rows: dict[str, dict[str, float]] = {}
    threshold = None
    for c in cycles:
        read = c.plan.get("risk", {}).get("starvation")
        if not isinstance(read, Mapping):
            continue
        threshold = read.get("threshold_s", threshold)
        for model, w in read.get("models", {}).items():
            gpus = float(w.get("waiting_gpus", 0.0)) if isinstance(w, Mapping) else 0.0
            row = rows.setdefault(
                model, {"waited_gpu_hours": 0.0, "peak_waiting_gpus": 0.0, "cycles": 0}
            )
            row["waited_gpu_hours"] += gpus * weight
            row["peak_waiting_gpus"] = max(row["peak_waiting_gpus"], gpus)
            row["cycles"] += 1 if gpus > 0 else 0
    if threshold is None:
        return pd.DataFrame()
    return pd.DataFrame(
        [{"gpu_model": m, **r, "threshold_s": threshold} for m, r in sorted(rows.items())],
        columns=["gpu_model", "waited_gpu_hours", "peak_waiting_gpus", "cycles", "threshold_s"],
    )


def _recorded_signals(
    history: History, cycles: Sequence[RecordedCycle], lead_s: int
) -> list[dict[str, Any]]:
    """Each cycle's forecast of each signal one lead time ahead, beside what happened then
    (NaN for a moment after the newest sample)."""
    rows = []
    for c in cycles:
        for name, f in c.forecast.items():
            y = history.get(name)
            if y is None or not f.get("last_timestamp"):
                continue
            at = _naive(f["last_timestamp"]) + pd.Timedelta(seconds=lead_s)
            seen = y.dropna()
            actual = float(seen[seen.index <= at].iloc[-1]) if (seen.index <= at).any() else np.nan
            if at > seen.index[-1]:
                actual = np.nan  # not happened yet by the newest sample
            rows.append(
                {"timestamp": at, "signal": name, "actual": actual, **dict(f.get("at_lead", {}))}
            )
    return rows


def _recorded_plans(
    cycles: Sequence[RecordedCycle], pools_by_model: Mapping[str, list[PoolConfig]], cycle_s: int
) -> tuple[list[dict[str, Any]], dict[str, list[list[float]]]]:
    """Per cycle and GPU model, the GPUs its plan forecast and targeted one lead time ahead
    (rows), and the node counts per pool behind each row (per model, in row order)."""
    rows: list[dict[str, Any]] = []
    nodes_at: dict[str, list[list[float]]] = {m: [] for m in pools_by_model}
    weight = cycle_s / 3600.0
    for c in cycles:
        plan = c.plan
        timeline = [_naive(x) for x in plan.get("timeline", [])]
        if not timeline:
            continue
        step_s = float(plan.get("step_s", cycle_s))
        by_pool = {pp["pool"]: pp for pp in plan.get("pools", [])}
        for model, pools in pools_by_model.items():
            lead = max(p.lead_time_s for p in pools)
            k = min(len(timeline) - 1, int(np.ceil(lead / step_s - 1e-9)))
            demand = plan.get("demand_gpus", {}).get(model)
            if demand is None:
                continue
            nodes = [
                float(by_pool[p.name]["target_nodes"][k]) if p.name in by_pool else 0.0
                for p in pools
            ]
            nodes_at[model].append(nodes)
            rows.append(
                {
                    "timestamp": timeline[k],
                    "gpu_model": model,
                    "forecast_gpus": float(demand[k]),
                    "planned_gpus": sum(
                        n * p.gpus_per_node for n, p in zip(nodes, pools, strict=True)
                    ),
                    "weight_h": weight,
                }
            )
    return rows, nodes_at


def to_dict(h: Hindsight) -> dict[str, Any]:
    """Totals for the report's JSON (the time series are in its tables and charts)."""
    return json.loads(
        json.dumps(
            {
                "source": h.source,
                "start": str(h.start),
                "end": str(h.end),
                "quantile": h.quantile,
                "pools": h.pools.to_dict(orient="records") if not h.pools.empty else [],
                "waited": h.waited.to_dict(orient="records") if not h.waited.empty else [],
                "drift": h.drift.to_dict(orient="records") if not h.drift.empty else [],
                "notes": h.notes,
            },
            default=str,
        )
    )
