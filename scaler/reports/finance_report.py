"""The finance dry-run as a report, from a :class:`~scaler.reports.finance.FinanceProjection`.

:func:`build_finance_report` shows the projection section by section: the summary,
the baseline by month and tier, pool and GPU model in the three bands (with the
demand left idle or short), the scenarios side by side with their differences to
the baseline, with the cycle's plan the cost per 1M tokens and the idle GPU-hours per
workload, the commitment advice, and the projection's notes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pandas as pd

from forecaster import __version__
from forecaster.estimators import quantile_column
from forecaster.forecasting import SeriesForecast
from scaler.config import Config
from scaler.plans import CapacityPlan
from scaler.reports.commitments import COMMITMENT_NOTES, commitment_section
from scaler.reports.document import (
    Column,
    KeyFigure,
    Report,
    Section,
    Table,
    frame_rows,
    money_label,
)
from scaler.reports.finance import BANDS, HOURS_PER_MONTH, FinanceProjection, ScenarioProjection
from scaler.reports.finance_charts import monthly_tier_chart, scenario_chart
from scaler.reports.i18n import month_label, render_note, t, translate_source
from scaler.reports.reconcile import reconciliation_section
from scaler.reports.summary import (
    finance_recommendations,
    plan_figures,
    plan_recommendations,
    summary_section,
)
from scaler.reports.tokens import token_costs, token_section
from scaler.reports.workload_costs import served_workload_costs, workload_section


def build_finance_report(
    projection: FinanceProjection,
    config: Config,
    source: str,
    lang: str = "en",
    charts: bool = True,
    plan: CapacityPlan | None = None,
    forecasts: Mapping[str, SeriesForecast] | None = None,
) -> Report:
    """The finance dry-run: projection by tier and month, scenarios, commitment advice.

    ``plan``: the cycle's plan the projection comes with; demand it leaves short and a greedy
    fallback for the optimizer head the summary and join the key figures (the planner's notes
    themselves are printed with the plan). With ``forecasts`` too, the cost per 1M tokens of
    workloads with a token signal (:mod:`scaler.reports.tokens`) and the idle GPU-hours and
    their cost per workload (:mod:`scaler.reports.workload_costs`)."""
    currency = config.finance.currency
    fleet = config.fleet
    plan_items = (
        plan_recommendations(fleet, config.policy, plan, lang, "projection", "projection")
        if plan is not None
        else []
    )
    sections = [
        summary_section(finance_recommendations(projection, lang, currency, plan_items), lang),
        _projection_section(projection, currency, lang, charts),
        _scenarios_section(projection, currency, lang, charts),
        commitment_section(
            projection.commitments,
            config.finance.unserved_price_per_gpu_hour,
            lang,
            currency,
            projection.notes,
            projection.reserved_idle,
        ),
        *_notes(projection, lang),
    ]
    if plan is not None:
        costs = served_workload_costs(fleet, plan, forecasts) if forecasts is not None else None
        reconciliation = reconciliation_section(plan, projection, costs, currency, lang)
        if reconciliation is not None:
            sections.insert(4, reconciliation)
    if plan is not None and forecasts is not None:
        served = config.served_workloads
        tokens = token_section(token_costs(served, plan, forecasts), currency, lang)
        if tokens is not None:
            sections.insert(3, tokens)
        if costs is not None:
            idle = workload_section(costs, plan.quantile, currency, lang)
            sections.insert(4 if tokens is not None else 3, idle)
    figures = _key_figures(projection, currency, lang)
    if plan is not None:
        figures += plan_figures(fleet, config.policy, plan, lang)
    return Report(
        kind="finance",
        lang=lang,
        title=t(lang, "title_finance"),
        subtitle=_subtitle(projection, source, lang),
        created_at=projection.start.strftime("%Y-%m-%dT%H:%M:%SZ"),
        figures=figures,
        sections=sections,
        data={"finance": projection.to_dict(), "pools": [p.model_dump() for p in config.pools]},
    )


def _months(projection: FinanceProjection) -> list[str]:
    """The projection's calendar months (``YYYY-MM``) in order."""
    return list(dict.fromkeys(projection.baseline.monthly["period"]))


def _band_labels(key: str, lang: str) -> dict[str, str]:
    """Band -> the string ``key`` with its ``{band}`` in the reader's words."""
    return {b: t(lang, key, band=t(lang, "band_" + b)) for b in BANDS}


# ---------------------------------------------------------------- projection


def _projection_section(
    projection: FinanceProjection, currency: str, lang: str, charts: bool
) -> Section:
    """The baseline by month and tier, pool and GPU model in each band, and its demand."""
    base = projection.baseline
    band_q = {b: quantile_column(projection.bands.level(b)) for b in BANDS}
    sec = Section(
        "projection",
        t(lang, "sec_projection"),
        [
            t(lang, "sec_projection_intro", low=band_q["low"], high=band_q["high"]),
            t(lang, "currency_named", currency=currency) if currency else t(lang, "currency_note"),
        ],
    )
    if charts:
        sec.charts.append(monthly_tier_chart(base.monthly, lang, currency))
    sec.tables += _monthly_tables(base, currency, lang)
    sec.tables.append(_demand_table(base, lang))
    return sec


def _monthly_tables(base: ScenarioProjection, currency: str, lang: str) -> list[Table]:
    """GPU-hours and cost per month in each band, by tier, by pool and by GPU model."""
    gpu_hours = _band_labels("col_gpu_hours_band", lang)
    costs = _band_labels("col_cost_band", lang)
    band_cols = [
        *[Column(f"gpu_hours_{b}", gpu_hours[b], 0) for b in BANDS],
        *[Column(f"cost_{b}", money_label(costs[b], currency), 2) for b in BANDS],
    ]
    energy: dict[str, tuple[str, str]] = {}
    if base.priced_energy:
        # Only where a pool prices its energy (price_per_kwh): the expected band's kWh and
        # cost, beside the node cost, which does not include it.
        kwh = t(lang, "col_energy_kwh_band", band=t(lang, "band_expected"))
        money = t(lang, "col_energy_cost_band", band=t(lang, "band_expected"))
        band_cols += [
            Column("energy_kwh_expected", kwh, 0),
            Column("energy_cost_expected", money_label(money, currency), 2),
        ]
        energy = {"energy_kwh": ("energy_kwh", "sum"), "energy_cost": ("energy_cost", "sum")}
    by_model = (
        base.monthly_pools.groupby(["period", "gpu_model", "band"], sort=False, as_index=False).agg(
            hours=("hours", "first"),
            gpu_hours=("gpu_hours", "sum"),
            cost=("cost", "sum"),
            **energy,
        )
        if not base.monthly_pools.empty
        else base.monthly_pools
    )
    lines = {
        "monthly_by_tier": (["tier"], base.monthly),
        "monthly_by_pool": (["pool", "tier", "gpu_model"], base.monthly_pools),
        "monthly_by_model": (["gpu_model"], by_model),
    }
    key_cols = {
        "tier": Column("tier", t(lang, "col_tier")),
        "pool": Column("pool", t(lang, "col_pool")),
        "gpu_model": Column("gpu_model", t(lang, "col_gpu_model")),
    }
    return [
        Table(
            key,
            t(lang, "tbl_" + key),
            [
                Column("period", t(lang, "col_month")),
                *[key_cols[k] for k in by],
                Column("hours", t(lang, "col_hours"), 0),
                *band_cols,
            ],
            _monthly_rows(frame, by, lang),
        )
        for key, (by, frame) in lines.items()
    ]


def _monthly_rows(frame: pd.DataFrame, by: Sequence[str], lang: str) -> list[dict[str, Any]]:
    """One row per month and line (tier, pool or GPU model), with each band side by side."""
    rows: list[dict[str, Any]] = []
    if frame.empty:
        return rows
    for keys, g in frame.groupby(["period", *by], sort=False):
        values = dict(zip(["period", *by], keys, strict=True))
        b = g.set_index("band")
        gpu_h = b["gpu_hours"].astype(float)
        cost = b["cost"].astype(float)
        row: dict[str, Any] = {
            "period": month_label(str(values["period"]), lang),
            "hours": float(b["hours"].iloc[0]),
            **{f"gpu_hours_{x}": float(gpu_h[x]) for x in BANDS},
            **{f"cost_{x}": float(cost[x]) for x in BANDS},
        }
        if "energy_cost" in b.columns:
            row["energy_kwh_expected"] = float(b["energy_kwh"].astype(float)["expected"])
            row["energy_cost_expected"] = float(b["energy_cost"].astype(float)["expected"])
        for k in by:
            row[k] = t(lang, "tier_" + str(values[k])) if k == "tier" else str(values[k])
        rows.append(row)
    return rows


def _demand_table(base: ScenarioProjection, lang: str) -> Table:
    """Per GPU model and band: GPU-hours demanded, paid, idle and short."""
    rows = frame_rows(base.demand)
    for r in rows:
        r["band"] = t(lang, "band_" + r["band"])
    return Table(
        "demand",
        t(lang, "tbl_finance_demand"),
        [
            Column("gpu_model", t(lang, "col_gpu_model")),
            Column("band", t(lang, "col_band")),
            Column("demand_gpu_hours", t(lang, "col_demand_gpu_h"), 0),
            Column("capacity_gpu_hours", t(lang, "col_capacity_gpu_h"), 0),
            Column("idle_gpu_hours", t(lang, "col_idle_gpu_h"), 0),
            Column("short_gpu_hours", t(lang, "col_short_gpu_h"), 0),
        ],
        rows,
    )


# ---------------------------------------------------------------- scenarios


def _scenarios_section(
    projection: FinanceProjection, currency: str, lang: str, charts: bool
) -> Section:
    """Each scenario's totals and differences to the baseline; with more than the baseline,
    the scenarios month by month side by side."""
    sec = Section("scenarios", t(lang, "sec_scenarios"), [t(lang, "sec_scenarios_intro")])
    sec.tables.append(_scenario_totals_table(projection, currency, lang))
    if len(projection.scenarios) > 1:
        if charts:
            sec.charts.append(scenario_chart(projection, lang, currency))
        sec.tables.append(_scenario_months_table(projection, lang))
    return sec


def _scenario_name(sp: ScenarioProjection, lang: str) -> str:
    return sp.scenario.name if not sp.scenario.is_baseline else t(lang, "baseline")


def _scenario_totals_table(projection: FinanceProjection, currency: str, lang: str) -> Table:
    """Per scenario: cost in each band, expected GPU-hours, and the difference to the baseline
    in money and in percent."""
    base = projection.baseline
    rows = []
    for sp in projection.scenarios:
        row: dict[str, Any] = {
            "scenario": _scenario_name(sp, lang),
            "definition": sp.scenario.text if not sp.scenario.is_baseline else "–",
            **{f"cost_{b}": sp.total_cost(b) for b in BANDS},
            "gpu_hours_expected": sp.total_gpu_hours("expected"),
        }
        for b in BANDS:
            ref = base.total_cost(b)
            row[f"delta_{b}"] = sp.total_cost(b) - ref
            row[f"delta_fraction_{b}"] = (sp.total_cost(b) - ref) / ref if ref else 0.0
        rows.append(row)
    costs = _band_labels("col_cost_band", lang)
    deltas = _band_labels("col_delta_band", lang)
    fractions = _band_labels("col_delta_percent_band", lang)
    return Table(
        "scenarios",
        t(lang, "tbl_scenarios"),
        [
            Column("scenario", t(lang, "col_scenario")),
            Column("definition", t(lang, "col_definition")),
            *[Column(f"cost_{b}", money_label(costs[b], currency), 2) for b in BANDS],
            Column(
                "gpu_hours_expected",
                t(lang, "col_gpu_hours_band", band=t(lang, "band_expected")),
                0,
            ),
            *[Column(f"delta_{b}", money_label(deltas[b], currency), 2) for b in BANDS],
            *[Column(f"delta_fraction_{b}", fractions[b], 1, percent=True) for b in BANDS],
        ],
        rows,
    )


def _scenario_months_table(projection: FinanceProjection, lang: str) -> Table:
    """Expected cost per month of every scenario, side by side."""
    totals = [
        sp.monthly[sp.monthly["band"] == "expected"].groupby("period")["cost"].sum()
        for sp in projection.scenarios
    ]
    rows = [
        {
            "period": month_label(m, lang),
            **{f"s{i}": float(tot.get(m, 0.0)) for i, tot in enumerate(totals)},
        }
        for m in _months(projection)
    ]
    return Table(
        "scenarios_monthly",
        t(lang, "tbl_scenarios_monthly"),
        [
            Column("period", t(lang, "col_month")),
            *[
                Column(f"s{i}", sp.scenario.name if i else t(lang, "baseline"), 2)
                for i, sp in enumerate(projection.scenarios)
            ],
        ],
        rows,
    )


# ---------------------------------------------------------------- notes and figures


def _notes(projection: FinanceProjection, lang: str) -> list[Section]:
    """The projection's notes in the reader's language; none without notes. Why a GPU model
    has no commitment advice is said in the commitment section, not again here."""
    notes = [n for n in projection.notes if n.key not in COMMITMENT_NOTES]
    if not notes:
        return []
    return [
        Section(
            "notes",
            t(lang, "sec_notes"),
            [render_note(n.key, dict(n.params), lang) for n in notes],
        )
    ]


def _subtitle(projection: FinanceProjection, source: str, lang: str) -> str:
    return t(
        lang,
        "subtitle_finance",
        source=translate_source(source, lang),
        start=projection.start.strftime("%Y-%m-%d %H:%M"),
        end=projection.end.strftime("%Y-%m-%d %H:%M"),
        months=len(_months(projection)),
        version=__version__,
    )


def _key_figures(projection: FinanceProjection, currency: str, lang: str) -> list[KeyFigure]:
    """Horizon, cost in each band and per month, GPU-hours paid, what the advice saves."""
    base = projection.baseline
    expected = base.total_cost("expected")
    per_month = expected / (projection.hours / HOURS_PER_MONTH) if projection.hours else 0.0
    cost_labels = _band_labels("fig_cost_band", lang)
    energy = (
        [
            KeyFigure(
                "energy_cost_expected",
                t(lang, "fig_energy_cost"),
                round(base.total_energy_cost("expected"), 2),
                currency,
            )
        ]
        if base.priced_energy
        else []
    )
    figures = [
        KeyFigure(
            "horizon_days",
            t(lang, "fig_horizon_days"),
            round(projection.hours / 24, 2),
            t(lang, "unit_days"),
            0,
        ),
        KeyFigure("cost_expected", cost_labels["expected"], round(expected, 2), currency),
        KeyFigure("cost_low", cost_labels["low"], round(base.total_cost("low"), 2), currency),
        KeyFigure("cost_high", cost_labels["high"], round(base.total_cost("high"), 2), currency),
        KeyFigure(
            "cost_per_month_expected", t(lang, "fig_cost_per_month"), round(per_month, 2), currency
        ),
        KeyFigure(
            "gpu_hours_expected",
            t(lang, "fig_gpu_hours"),
            round(base.total_gpu_hours("expected"), 2),
            t(lang, "unit_gpu_hours"),
            0,
        ),
        KeyFigure(
            "commitment_saving_per_month",
            t(lang, "fig_commit_saving"),
            round(sum(c.monthly_saving for c in projection.commitments), 2),
            currency,
        ),
        KeyFigure(
            "idle_reserved_gpu_hours",
            t(lang, "fig_idle_reserved"),
            round(sum(r.idle_gpu_hours for r in projection.reserved_idle), 2),
            t(lang, "unit_gpu_hours"),
            0,
        ),
        KeyFigure(
            "idle_reserved_cost",
            t(lang, "fig_idle_reserved_cost"),
            round(sum(r.idle_cost for r in projection.reserved_idle), 2),
            currency,
        ),
    ]
    return figures + energy
