"""Cost per 1M tokens: what a workload's tokens cost on the plan, and on each tier.

Where a workload names a ``token_signal`` (tokens per second it serves, from vLLM's
``vllm:generation_tokens_total`` and ``vllm:prompt_tokens_total``), its tokens over the
plan's timeline are the median forecast of that signal, and its share of its GPU model's
planned cost is its share of the model's median GPU demand (a workload that needs a third
of the GPUs carries a third of their cost). Cost per 1M tokens is then that cost over the
tokens; per tier, what the same GPU-hours would cost at that tier's price (the cheapest
pool of the tier). Both reports show the same table (:func:`token_section`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.catalog.gpus import gpu_model
from scaler.config import TIER_ORDER, WorkloadConfig
from scaler.planning.demand import gpus_for, on_grid
from scaler.plans import CapacityPlan
from scaler.reports.document import Column, Section, Table, money_label
from scaler.reports.i18n import t

PER_TOKENS = 1_000_000


def token_costs(
    workloads: Sequence[WorkloadConfig],
    plan: CapacityPlan,
    forecasts: Mapping[str, SeriesForecast],
) -> list[dict[str, Any]]:
    """A row per workload of the served ``workloads`` with a token signal and a forecast of
    it: tokens, GPU-hours and cost over the plan, cost per 1M tokens on the plan's mix and
    per tier."""
    if not any(w.token_signal for w in workloads) or not plan.timeline:
        return []
    grid = pd.DatetimeIndex(pd.to_datetime(plan.timeline)).tz_localize(None)
    step_h = plan.step_s / 3600.0
    demand: dict[str, np.ndarray] = {}
    gpu_hours: dict[str, float] = {}
    for w in workloads:
        fc = forecasts.get(w.signal)
        if fc is None:
            continue
        need = gpus_for(w, np.maximum(0.0, on_grid(fc.quantile(0.5), grid)))
        demand[w.name] = need
        model = gpu_model(w.gpu_model).name
        gpu_hours[model] = gpu_hours.get(model, 0.0) + float(np.sum(need) * step_h)
    rows = []
    for w in workloads:
        tokens_fc = forecasts.get(w.token_signal or "")
        if tokens_fc is None or w.name not in demand:
            continue
        model = gpu_model(w.gpu_model).name
        rate = np.nan_to_num(on_grid(tokens_fc.quantile(0.5), grid), nan=0.0)
        tokens = float(np.sum(np.maximum(0.0, rate)) * plan.step_s)
        pools = [p for p in plan.pools if p.gpu_model == model]
        paid = sum(float(np.sum(p.target_nodes)) * p.gpus_per_node * step_h for p in pools)
        cost = sum(
            float(np.sum(p.target_nodes)) * p.gpus_per_node * p.price_per_gpu_hour * step_h
            for p in pools
        )
        mine = float(np.sum(demand[w.name]) * step_h)
        share = mine / gpu_hours[model] if gpu_hours.get(model) else 0.0
        if not tokens > 0 or not share > 0:
            continue
        row: dict[str, Any] = {
            "workload": w.name,
            "gpu_model": model,
            "tokens_m": tokens / PER_TOKENS,
            "gpu_hours": share * paid,
            "cost": share * cost,
            "per_m": share * cost / tokens * PER_TOKENS,
        }
        for tier in {p.tier for p in pools}:
            price = min(p.price_per_gpu_hour for p in pools if p.tier == tier)
            row[f"per_m_{tier}"] = share * paid * price / tokens * PER_TOKENS
        rows.append(row)
    return rows


def token_section(rows: list[dict[str, Any]], currency: str, lang: str) -> Section | None:
    """The cost-per-1M-tokens table; None without a row."""
    if not rows:
        return None
    tiers = sorted(
        {k.removeprefix("per_m_") for r in rows for k in r if k.startswith("per_m_")},
        key=lambda x: TIER_ORDER.get(x, 9),
    )
    columns = [
        Column("workload", t(lang, "col_workload")),
        Column("gpu_model", t(lang, "col_gpu_model")),
        Column("tokens_m", t(lang, "col_tokens_m"), 1),
        Column("gpu_hours", t(lang, "col_capacity_gpu_h"), 1),
        Column("cost", money_label(t(lang, "col_total"), currency), 2),
        Column("per_m", money_label(t(lang, "col_per_m_tokens"), currency), 3),
        *[
            Column(
                f"per_m_{x}",
                money_label(t(lang, "col_per_m_tokens_tier", tier=t(lang, "tier_" + x)), currency),
                3,
            )
            for x in tiers
        ],
    ]
    sec = Section("tokens", t(lang, "sec_tokens"), [t(lang, "sec_tokens_intro")])
    sec.tables.append(Table("tokens", t(lang, "tbl_tokens"), columns, rows))
    return sec
