"""The tier planner's inputs built from a whole config, as the cycle's edge builds them.

:func:`scaler.planning.tiers.plan_capacity` takes a :class:`CapacityInputs` (the fleet, the
policy, what the cycle saw, the deferrable work's settings), never the whole ``Config``.
Tests that plan from a config they wrote build those inputs here, with the config's
``forecast.method``, ``kubernetes.kueue`` and ``finance.currency``, as
:func:`scaler.service.cycle.plan_tiers` does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pandas as pd

from forecaster.forecasting import SeriesForecast
from scaler.config import Config
from scaler.planning.solver import Solver
from scaler.planning.tiers import CapacityInputs, plan_capacity
from scaler.plans import CapacityPlan


def capacity_inputs(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    stale: Iterable[str] | None = None,
    **observed: Any,
) -> CapacityInputs:
    """``config``'s fleet, policy and settings with what a cycle saw (``observed``: the
    other fields of :class:`CapacityInputs`, ``history``, ``past``, ``margins``...)."""
    return CapacityInputs(
        config.fleet,
        config.policy,
        forecasts,
        inventory,
        pd.Timestamp(now),
        stale=frozenset(stale or ()),
        method=config.forecast.method,
        kueue=config.kubernetes.kueue,
        currency=config.finance.currency,
        **observed,
    )


def plan_for(
    config: Config,
    forecasts: Mapping[str, SeriesForecast],
    inventory: Mapping[str, int],
    now: pd.Timestamp,
    stale: Iterable[str] | None = None,
    *,
    solver: Solver = "auto",
    with_signals: bool = True,
    **observed: Any,
) -> CapacityPlan:
    """The tier plan of ``config`` for what a cycle saw (:func:`capacity_inputs`)."""
    inputs = capacity_inputs(config, forecasts, inventory, now, stale, **observed)
    return plan_capacity(inputs, solver=solver, with_signals=with_signals)
