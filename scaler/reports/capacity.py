"""The capacity review: what a dry-run cycle planned, why, and what it will cost.

:func:`build_capacity_report` reads the plan, the forecasts and the history of one
cycle (and the run records of the review period when there are any) and builds a
:class:`~scaler.reports.document.Report` section by section: the summary, the
signals with their forecast bands, the forecasts' accuracy against the baselines,
forecast against actual over the review period, capacity against demand per GPU
model and pool (MIG included), the actions with their reasons, cost by tier per
day and month, utilization and waste, commitment advice, and the planner's notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from forecaster import __version__
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from forecaster.progress import Progress
from forecaster.series import History
from scaler.config import (
    TIER_ORDER,
    Config,
    Fleet,
    ForecastConfig,
    PolicyConfig,
    PoolConfig,
    SignalConfig,
)
from scaler.planning.coverage import effective_gpus
from scaler.planning.demand import demand_by_model
from scaler.plans import CapacityPlan
from scaler.reports import reviewing
from scaler.reports.accuracy import accuracy_rows, accuracy_section
from scaler.reports.actions import actions_section
from scaler.reports.capacity_charts import capacity_chart, signal_chart, tier_cost_chart
from scaler.reports.charts import by_day
from scaler.reports.commitments import COMMITMENT_NOTES, commitment_section
from scaler.reports.document import Column, KeyFigure, Report, Section, Table, money_label
from scaler.reports.finance import FinanceProjection, PricedFleet, project_fleet
from scaler.reports.hindsight import hindsight_section
from scaler.reports.horizon_accuracy import (
    add_horizon_accuracy,
    horizon_accuracy,
    horizon_flags,
    lead_days_asked,
)
from scaler.reports.i18n import (
    fmt_number,
    month_label,
    t,
    translate_bound,
    translate_source,
)
from scaler.reports.mig_review import add_mig
from scaler.reports.reconcile import reconciliation_section
from scaler.reports.rightsizing import rightsizing_rows, rightsizing_section
from scaler.reports.summary import capacity_recommendations, plan_figures, summary_section
from scaler.reports.tokens import token_costs, token_section
from scaler.reports.workload_costs import served_workload_costs, workload_section
from scaler.wording import Reason, render

if TYPE_CHECKING:
    from forecaster.backtesting import Backtest

HISTORY_WINDOW = pd.Timedelta(days=7)
"""History shown before the forecast in each signal chart."""
REPORT_STEPS = 5
"""Units :func:`build_capacity_report` counts besides backtests and scenarios: one after
the signals, the accuracy table, the forecast against actual, capacity, actions to
utilization."""


@dataclass(frozen=True)
class _Frame:
    """What every section reads the plan through: its quantiles and its timeline."""

    q: float
    """The policy quantile capacity is sized to."""
    quantiles: list[float]
    """The configured quantiles with the median and ``q``, ascending."""
    grid: pd.DatetimeIndex
    step_h: float

    @property
    def low(self) -> float:
        return self.quantiles[0]

    @property
    def high(self) -> float:
        return self.quantiles[-1]

    @classmethod
    def of(cls, forecast: ForecastConfig, plan: CapacityPlan) -> _Frame:
        q = plan.quantile
        return cls(
            q=q,
            quantiles=sorted(set(forecast.quantiles) | {0.5, q}),
            grid=pd.DatetimeIndex(
                pd.to_datetime(plan.timeline).tz_localize(None), name="timestamp"
            ),
            step_h=plan.step_s / 3600.0,
        )


@dataclass(frozen=True)
class _ModelCapacity:
    """One GPU model's planned capacity and forecast demand on the plan's timeline."""

    model: str
    pools: list[tuple[str, str, np.ndarray]]
    """(pool, tier, effective GPUs) of each of the model's pools."""
    demand_q: np.ndarray
    """Demand at the policy quantile, in GPUs."""
    demand_median: np.ndarray
    capacity: np.ndarray
    """Effective GPUs (spot discounted for reclamation)."""
    paid: np.ndarray
    """GPUs paid for, spot at its nominal count."""


def build_capacity_report(
    config: Config,
    history: History,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    source: str,
    lang: str = "en",
    history_window: pd.Timedelta = HISTORY_WINDOW,
    backtest_origins: int = 3,
    recorded: Sequence[reviewing.RecordedCycle] = (),
    progress: Progress | None = None,
) -> Report:
    """The capacity review: history and forecast, accuracy, forecast against actual over the
    review period (from ``recorded`` cycles, or the backtest when there are none), plan,
    actions, cost, utilization.

    ``progress`` counts one unit per group of sections below, each backtest origin and
    each scenario of the commitment projection."""
    bar = progress or Progress(False)
    bar.add_total(REPORT_STEPS)
    frame = _Frame.of(config.forecast, plan)
    sections = [
        _signals_section(config.signals, history, plan, forecasts, frame, history_window, lang)
    ]
    bar.update(label="accuracy")

    scores, skipped, backtests = _backtests(
        config.forecast, history, forecasts, frame, backtest_origins, bar
    )
    accuracy = accuracy_section(scores, skipped, frame.low, frame.high, backtest_origins, lang)
    at_horizon = pd.Timedelta(seconds=plan.horizon_s)
    lead_flags: list[tuple[int, str, str]] = []
    if lead_days_asked(at_horizon) > 1:
        leads = horizon_accuracy(
            history,
            forecasts,
            at_horizon,
            frame.quantiles,
            backtest_origins,
            config.forecast.method,
            bar,
        )
        add_horizon_accuracy(accuracy, leads, frame.low, frame.high, lang)
        lead_flags = horizon_flags(leads, frame.low, frame.high, lang)
    sections.append(accuracy)
    bar.update(label="forecast against actual")

    fleet = PricedFleet.of(config)
    hindsight = (
        reviewing.from_records(fleet, history, recorded, frame.q)
        if recorded
        else reviewing.from_backtests(fleet, history, backtests, frame.q)
    )
    sections.append(hindsight_section(hindsight, config.finance, frame.low, frame.high, lang))
    bar.update(label="capacity")

    models = _model_capacity(config.fleet, config.policy, plan, forecasts, frame.grid)
    utilization = _utilization_rows(models, frame.step_h)
    sections.append(
        _capacity_section(config.pools, config.finance.currency, plan, models, frame, lang)
    )
    bar.update(label="actions and cost")

    sections.append(actions_section(plan, lang, config.finance.currency))
    sections.append(_cost_section(plan, frame.grid, config.finance.currency, lang))
    served = config.served_workloads
    tokens = token_section(token_costs(served, plan, forecasts), config.finance.currency, lang)
    if tokens is not None:
        sections.append(tokens)
    sizing = rightsizing_section(rightsizing_rows(served, history), lang)
    if sizing is not None:
        sections.append(sizing)
    currency = config.finance.currency
    costs = served_workload_costs(config.fleet, plan, forecasts, history)
    if costs is not None:
        sections.append(workload_section(costs, plan.quantile, currency, lang))
    sections.append(_utilization_section(utilization, frame.q, lang))
    bar.update(label="commitment advice")

    projection = _projection(fleet, config.signals, config.forecast, plan, forecasts, bar)
    advice = projection.commitments if projection is not None else []
    idle = projection.reserved_idle if projection is not None else []
    if projection is not None and (
        advice or any(n.key in COMMITMENT_NOTES for n in projection.notes)
    ):
        unserved_price = config.finance.unserved_price_per_gpu_hour
        sections.append(
            commitment_section(advice, unserved_price, lang, currency, projection.notes, idle)
        )
    reconciliation = reconciliation_section(plan, projection, costs, currency, lang)
    if reconciliation is not None:
        sections.append(reconciliation)
    recommendations = capacity_recommendations(
        config.fleet, config.policy, currency, plan, advice, scores, hindsight, lang, idle
    )
    return Report(
        kind="report",
        lang=lang,
        title=t(lang, "title_report"),
        subtitle=_subtitle(plan, source, lang),
        created_at=plan.created_at,
        figures=_key_figures(config.fleet, config.policy, currency, plan, utilization, lang),
        sections=[
            summary_section([*recommendations, *lead_flags], lang),
            *sections,
            *_notes(plan.notes, lang),
        ],
        data={"plan": plan.to_dict()},
    )


def _backtests(
    forecast: ForecastConfig,
    history: History,
    forecasts: Mapping[str, SeriesForecast],
    frame: _Frame,
    origins: int,
    bar: Progress,
) -> tuple[list[dict[str, Any]], list[str], dict[str, Backtest]]:
    """Accuracy rows, what was skipped, and each signal's backtest of the estimator in use."""
    backtests: dict[str, Backtest] = {}
    rows, skipped = accuracy_rows(
        history,
        forecasts,
        frame.quantiles,
        origins,
        forecast.method,
        keep=backtests,
        progress=bar,
    )
    return rows, skipped, backtests


# ---------------------------------------------------------------- signals


def _signals_section(
    signals: Sequence[SignalConfig],
    history: History,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    frame: _Frame,
    history_window: pd.Timedelta,
    lang: str,
) -> Section:
    """Each signal's recent history with its forecast bands, and a table of the signals."""
    sec = Section(
        "signals",
        t(lang, "sec_signals"),
        [
            t(
                lang,
                "sec_signals_intro",
                q=quantile_column(frame.q),
                low=quantile_column(frame.low),
                high=quantile_column(frame.high),
            )
        ],
    )
    if _daily(frame.grid):
        sec.paragraphs.append(t(lang, "charts_daily", days=DAILY_CHARTS_AFTER.days))
    rows = []
    units = {s.name: s.unit for s in signals}
    horizon = pd.Timedelta(seconds=plan.horizon_s)
    for s in plan.signals:
        fc = forecasts.get(s.name)
        if fc is None:
            continue
        y = history[s.name]
        # Beside a long forecast, as much history as there is, up to the horizon.
        held = pd.Timedelta(days=_history_days(y))
        window = max(history_window, min(horizon, held))
        tail = y[y.index > fc.last_timestamp - window]
        view = _forecast_over_plan(fc, frame.grid)
        unit = units.get(s.name, s.unit)
        if _daily(frame.grid):
            tail, view = by_day(tail), _daily_forecast(view)
        sec.charts.append(
            signal_chart(s.name, unit, tail, view, frame.low, frame.high, frame.q, lang)
        )
        rows.append(
            {
                "signal": s.name,
                "unit": s.unit,
                "estimator": s.estimator,
                "history_days": _history_days(y),
                "last_value": s.last_value,
                "last_timestamp": s.last_timestamp,
                "peak_q": s.peak_at_quantile,
                "stale": t(lang, "yes") if s.stale else t(lang, "no"),
            }
        )
    sec.tables.append(
        Table(
            "signals",
            t(lang, "tbl_signals"),
            [
                Column("signal", t(lang, "col_signal")),
                Column("unit", t(lang, "col_unit")),
                Column("estimator", t(lang, "col_estimator")),
                Column("history_days", t(lang, "col_history_days"), 1),
                Column("last_value", t(lang, "col_last_value"), 2),
                Column("last_timestamp", t(lang, "col_last_timestamp")),
                Column("peak_q", t(lang, "col_peak_q", q=quantile_column(frame.q)), 2),
                Column("stale", t(lang, "col_stale")),
            ],
            rows,
        )
    )
    return sec


def _history_days(y: pd.Series) -> float:
    """Days of history the forecast was made from: first to newest observed sample."""
    seen = y.dropna()
    if len(seen) < 2:
        return 0.0
    return float((seen.index[-1] - seen.index[0]) / pd.Timedelta(days=1))


DAILY_CHARTS_AFTER = pd.Timedelta(days=7)
"""Charts of a longer plan show daily means: 5-minute steps over weeks draw a barcode."""
WEEKLY_TABLES_AFTER = pd.Timedelta(days=14)
"""The cost table of a longer plan has a row a week, not a row a day."""


def _daily(grid: pd.DatetimeIndex) -> bool:
    return len(grid) > 1 and grid[-1] - grid[0] > DAILY_CHARTS_AFTER


def _day_index(grid: pd.DatetimeIndex) -> pd.DatetimeIndex:
    """The whole days of ``grid`` (:func:`~scaler.reports.charts.by_day`)."""
    return pd.DatetimeIndex(by_day(pd.Series(0.0, index=grid)).index)


def _daily_mean(grid: pd.DatetimeIndex, values: np.ndarray) -> np.ndarray:
    """Daily means of ``values`` on ``grid``, one per day of :func:`_day_index`."""
    return by_day(pd.Series(np.asarray(values, dtype=float), index=grid)).to_numpy()


def _daily_forecast(fc: SeriesForecast) -> SeriesForecast:
    """``fc`` as daily means of each quantile, whole days only."""
    return SeriesForecast(**{**fc.__dict__, "frame": by_day(fc.frame)})


def _forecast_over_plan(fc: SeriesForecast, grid: pd.DatetimeIndex) -> SeriesForecast:
    """The forecast cut to the plan's timeline, when that leaves a line."""
    shown = fc.frame[fc.frame.index <= grid[-1]]
    return SeriesForecast(**{**fc.__dict__, "frame": shown}) if len(shown) >= 2 else fc


# ---------------------------------------------------------------- capacity


def _model_capacity(
    fleet: Fleet,
    policy: PolicyConfig,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    grid: pd.DatetimeIndex,
) -> list[_ModelCapacity]:
    """Per GPU model of the plan (sorted): its pools' GPUs and its demand over the timeline."""
    pool_gpus = _pool_gpus(fleet.pools, policy, plan)
    median = demand_by_model(fleet, dict(forecasts), grid, 0.5)
    n = len(grid)
    out = []
    for model in sorted({p.gpu_model for p in plan.pools}):
        pools = [
            (p.pool, p.tier, pool_gpus[p.pool])
            for p in plan.pools
            if p.gpu_model == model and p.pool in pool_gpus
        ]
        paid = sum(
            (
                np.array(p.target_nodes, dtype=float) * p.gpus_per_node
                for p in plan.pools
                if p.gpu_model == model
            ),
            np.zeros(n),
        )
        out.append(
            _ModelCapacity(
                model=model,
                pools=pools,
                demand_q=np.array(plan.demand_gpus.get(model, [0.0] * n), dtype=float),
                demand_median=median.get(model, np.zeros(n)),
                capacity=sum((g for _, _, g in pools), np.zeros(n)),
                paid=paid,
            )
        )
    return out


def _pool_gpus(
    fleet: Sequence[PoolConfig], policy: PolicyConfig, plan: CapacityPlan
) -> dict[str, np.ndarray]:
    """Effective GPUs per pool on the plan's timeline (spot discounted for reclamation)."""
    pools = {p.name: p for p in fleet}
    return {
        pp.pool: np.array(pp.target_nodes, dtype=float)
        * effective_gpus(pools[pp.pool], 1, policy.cycle_s)
        for pp in plan.pools
        if pp.pool in pools
    }


def _capacity_section(
    fleet: Sequence[PoolConfig],
    currency: str,
    plan: CapacityPlan,
    models: Sequence[_ModelCapacity],
    frame: _Frame,
    lang: str,
) -> Section:
    """Capacity against demand per GPU model, the pools' plan, and the MIG layouts."""
    sec = Section(
        "capacity",
        t(lang, "sec_capacity"),
        [t(lang, "sec_capacity_intro", q=quantile_column(frame.q))],
    )
    daily = _daily(frame.grid)
    if daily:
        sec.paragraphs.append(t(lang, "charts_daily", days=DAILY_CHARTS_AFTER.days))
    for m in models:
        grid, pools = frame.grid, m.pools
        demand_q, demand_median = m.demand_q, m.demand_median
        if daily:
            grid = _day_index(frame.grid)
            pools = [(n, tier, _daily_mean(frame.grid, g)) for n, tier, g in m.pools]
            demand_q = _daily_mean(frame.grid, m.demand_q)
            demand_median = _daily_mean(frame.grid, m.demand_median)
        sec.charts.append(
            capacity_chart(m.model, grid, pools, demand_q, demand_median, frame.q, lang)
        )
    sec.tables.append(_pools_table(plan, currency, lang))
    if plan.mig.get("models"):
        sec.paragraphs.append(t(lang, "mig_intro"))
        prices = {p.name: p.price_per_gpu_hour for p in fleet}
        add_mig(sec, prices, plan, frame.grid, lang, currency, daily=daily)
    return sec


def _pools_table(plan: CapacityPlan, currency: str, lang: str) -> Table:
    """Each pool's nodes now and planned, its price, lead time and what binds it."""
    rows = [
        {
            "pool": p.pool,
            "tier": t(lang, "tier_" + p.tier),
            "gpu_model": p.gpu_model,
            "gpus_per_node": p.gpus_per_node,
            "current_nodes": p.current_nodes,
            "target_now": p.target_nodes[0] if p.target_nodes else p.current_nodes,
            "target_max": max(p.target_nodes) if p.target_nodes else p.current_nodes,
            "price_per_gpu_hour": p.price_per_gpu_hour,
            "lead_time_min": p.lead_time_s / 60,
            "binding": ", ".join(translate_bound(b, lang) for b in p.binding) or "–",
        }
        for p in plan.pools
    ]
    return Table(
        "pools",
        t(lang, "tbl_pools"),
        [
            Column("pool", t(lang, "col_pool")),
            Column("tier", t(lang, "col_tier")),
            Column("gpu_model", t(lang, "col_gpu_model")),
            Column("gpus_per_node", t(lang, "col_gpus_per_node"), 0),
            Column("current_nodes", t(lang, "col_current_nodes"), 0),
            Column("target_now", t(lang, "col_target_now"), 0),
            Column("target_max", t(lang, "col_target_max"), 0),
            Column("price_per_gpu_hour", money_label(t(lang, "col_price_gpu_hour"), currency), 2),
            Column("lead_time_min", t(lang, "col_lead_min"), 0),
            Column("binding", t(lang, "col_binding")),
        ],
        rows,
    )


# ---------------------------------------------------------------- cost


def _tiers(plan: CapacityPlan) -> list[str]:
    """The plan's tiers, reserved first."""
    return sorted({p.tier for p in plan.pools}, key=lambda x: TIER_ORDER.get(x, 9))


def _cost_section(plan: CapacityPlan, grid: pd.DatetimeIndex, currency: str, lang: str) -> Section:
    """Spend per hour by tier over the timeline, and cost by tier per day and per month."""
    tiers = _tiers(plan)
    cost_cols = [
        Column("period", t(lang, "col_period")),
        Column("days", t(lang, "col_days"), 1),
        *[Column(x, money_label(t(lang, "tier_" + x), currency), 2) for x in tiers],
        Column("total", money_label(t(lang, "col_total"), currency), 2),
    ]
    monthly = _period_cost_rows(plan, grid, "%Y-%m")
    for r in monthly:
        r["period"] = month_label(r["period"], lang)
    _mark_partial(monthly, lang)
    weekly = grid[-1] - grid[0] > WEEKLY_TABLES_AFTER
    by_tier = {
        x: sum(
            (
                np.array(p.target_nodes, dtype=float) * p.gpus_per_node * p.price_per_gpu_hour
                for p in plan.pools
                if p.tier == x
            ),
            np.zeros(len(grid)),
        )
        for x in tiers
    }
    intro = t(lang, "sec_cost_intro_weekly" if weekly else "sec_cost_intro")
    sec = Section("cost", t(lang, "sec_cost"), [intro])
    if _daily(grid):
        days = _day_index(grid)
        daily_spend = {x: _daily_mean(grid, v) for x, v in by_tier.items()}
        sec.charts.append(tier_cost_chart(days, daily_spend, lang, currency))
    else:
        sec.charts.append(tier_cost_chart(grid, by_tier, lang, currency))
    if weekly:
        # Past two weeks, a row a day is a wall of numbers: a row a week (from its Monday).
        weeks = _period_cost_rows(plan, grid, "%Y-%m-%d", by_week=True)
        _mark_partial(weeks, lang)
        sec.tables.append(Table("cost_weekly", t(lang, "tbl_cost_weekly"), cost_cols, weeks))
    else:
        by_date = _period_cost_rows(plan, grid, "%Y-%m-%d")
        _mark_partial(by_date, lang)
        # A day's row is a day (a partial one says so beside its date): no days column.
        day_cols = [c for c in cost_cols if c.key != "days"]
        sec.tables.append(Table("cost_daily", t(lang, "tbl_cost_daily"), day_cols, by_date))
    sec.tables.append(Table("cost_monthly", t(lang, "tbl_cost_monthly"), cost_cols, monthly))
    return sec


def _period_cost_rows(
    plan: CapacityPlan, grid: pd.DatetimeIndex, fmt: str, by_week: bool = False
) -> list[dict[str, Any]]:
    """Cost of each tier and in total per period (``fmt`` names the period: day, month;
    ``by_week``: the week, named by its Monday)."""
    step_h = plan.step_s / 3600.0
    starts = grid.normalize() - pd.to_timedelta(grid.day_of_week, unit="D") if by_week else grid
    periods = np.asarray(starts.strftime(fmt))
    rows = []
    tiers = _tiers(plan)
    for period in dict.fromkeys(periods):
        mask = periods == period
        first = grid[mask][0]
        whole = 7.0 if by_week else float(first.days_in_month) if fmt == "%Y-%m" else 1.0
        row: dict[str, Any] = {
            "period": str(period),
            "days": float(mask.sum()) * step_h / 24.0,
            "whole_days": whole,
        }
        total = 0.0
        for tier in tiers:
            cost = sum(
                float(np.asarray(p.target_nodes, dtype=float)[mask].sum())
                * p.gpus_per_node
                * p.price_per_gpu_hour
                * step_h
                for p in plan.pools
                if p.tier == tier
            )
            row[tier] = cost
            total += cost
        row["total"] = total
        rows.append(row)
    return rows


def _mark_partial(rows: list[dict[str, Any]], lang: str) -> None:
    """A period the horizon covers only in part says so beside its name (its cost is of
    those days only, not a whole week's or month's)."""
    for r in rows:
        if r["days"] < r["whole_days"] - 1e-6:
            r["period"] = t(
                lang,
                "period_partial",
                period=r["period"],
                days=fmt_number(r["days"], lang, 1),
                whole=fmt_number(r["whole_days"], lang, 0),
            )


# ---------------------------------------------------------------- utilization


def _utilization_rows(models: Sequence[_ModelCapacity], step_h: float) -> list[dict[str, Any]]:
    """Per GPU model: GPU-hours paid, demanded, idle and short, and the share used."""
    rows = []
    for m in models:
        d_m, d_q, capacity, paid = m.demand_median, m.demand_q, m.capacity, m.paid
        rows.append(
            {
                "gpu_model": m.model,
                "capacity_gpu_hours": float(paid.sum() * step_h),
                "demand_median_gpu_hours": float(d_m.sum() * step_h),
                "demand_q_gpu_hours": float(d_q.sum() * step_h),
                "idle_gpu_hours": float(np.maximum(0.0, capacity - d_m).sum() * step_h),
                "short_gpu_hours": float(np.maximum(0.0, d_m - capacity).sum() * step_h),
                "short_q_gpu_hours": float(np.maximum(0.0, d_q - capacity).sum() * step_h),
                "utilization": float(np.minimum(d_m, capacity).sum() / paid.sum())
                if paid.sum()
                else 0.0,
            }
        )
    return rows


def _utilization_section(rows: list[dict[str, Any]], q: float, lang: str) -> Section:
    """Utilization and waste per GPU model against median and policy-quantile demand."""
    qc = quantile_column(q)
    sec = Section(
        "utilization", t(lang, "sec_utilization"), [t(lang, "sec_utilization_intro", q=qc)]
    )
    sec.tables.append(
        Table(
            "utilization",
            t(lang, "tbl_utilization"),
            [
                Column("gpu_model", t(lang, "col_gpu_model")),
                Column("capacity_gpu_hours", t(lang, "col_capacity_gpu_h"), 1),
                Column("demand_median_gpu_hours", t(lang, "col_demand_median_gpu_h"), 1),
                Column("demand_q_gpu_hours", t(lang, "col_demand_q_gpu_h", q=qc), 1),
                Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 1),
                Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 1),
                Column("short_q_gpu_hours", t(lang, "col_short_q_gpu_h", q=qc), 1),
                Column("utilization", t(lang, "col_utilization"), 1, percent=True),
            ],
            rows,
        )
    )
    return sec


# ---------------------------------------------------------------- commitments, notes, figures


def _projection(
    fleet: PricedFleet,
    signals: Sequence[SignalConfig],
    settings: ForecastConfig,
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
    bar: Progress,
) -> FinanceProjection | None:
    """The finance projection over the plan's horizon, from the same forecasts and pools: its
    commitment advice, idle reserved capacity and totals; none when the horizon is under an
    hour or no pool is reserved."""
    if plan.horizon_s < 3600 or not any(p.tier == "reserved" for p in fleet.pools):
        return None
    now = pd.Timestamp(plan.created_at).tz_localize(None)
    horizon = pd.Timedelta(seconds=plan.horizon_s)
    return project_fleet(fleet, signals, settings, forecasts, now, horizon, progress=bar)


def _notes(notes: Sequence[Reason | str], lang: str) -> list[Section]:
    """The planner's notes in ``lang`` (typed ones rendered from their code, sentences as
    they are); none without notes."""
    if not notes:
        return []
    return [
        Section(
            "notes",
            t(lang, "sec_notes"),
            [t(lang, "notes_planner"), *[render(n, lang) for n in notes]],
        )
    ]


def _subtitle(plan: CapacityPlan, source: str, lang: str) -> str:
    return t(
        lang,
        "subtitle_report",
        source=translate_source(source, lang),
        created=plan.created_at,
        hours=fmt_number(plan.horizon_s / 3600, lang, 0),
        q=quantile_column(plan.quantile),
        version=__version__,
    )


def _key_figures(
    fleet: Fleet,
    policy: PolicyConfig,
    currency: str,
    plan: CapacityPlan,
    util_rows: Sequence[Mapping[str, Any]],
    lang: str,
) -> list[KeyFigure]:
    """Spend now and planned, cost over the horizon, changes, unserved GPU-hours expected and
    left short by the plan (and a fallback planner), idle GPU-hours, utilization."""
    paid_total = sum(r["capacity_gpu_hours"] for r in util_rows)
    utilization = (
        round(
            100.0 * sum(r["utilization"] * r["capacity_gpu_hours"] for r in util_rows) / paid_total,
            2,
        )
        if paid_total
        else 0.0
    )
    per_hour, gpu_hours = currency + t(lang, "unit_per_hour"), t(lang, "unit_gpu_hours")
    horizon_h = fmt_number(plan.horizon_s / 3600, lang, 0)
    return [
        KeyFigure(
            "cost_per_hour_current",
            t(lang, "fig_cost_now"),
            float(plan.cost["per_hour_current"]),
            per_hour,
        ),
        KeyFigure(
            "cost_per_hour_planned",
            t(lang, "fig_cost_planned"),
            float(plan.cost["per_hour_now"]),
            per_hour,
        ),
        KeyFigure(
            "cost_horizon_total",
            t(lang, "fig_cost_horizon", hours=horizon_h),
            float(plan.cost["horizon_total"]),
            currency,
        ),
        KeyFigure("changes", t(lang, "fig_changes"), float(len(plan.changes())), "", 0),
        KeyFigure(
            "expected_unserved_gpu_hours",
            t(lang, "fig_unserved"),
            float(plan.risk["expected_unserved_gpu_hours"]),
            gpu_hours,
        ),
        *plan_figures(fleet, policy, plan, lang),
        KeyFigure(
            "idle_gpu_hours",
            t(lang, "fig_idle"),
            round(sum(r["idle_gpu_hours"] for r in util_rows), 2),
            gpu_hours,
        ),
        KeyFigure("utilization_percent", t(lang, "fig_utilization"), utilization, "%", 1),
    ]
