"""Orchestration: forecast every series of a history with quantiles.

One call, :func:`forecast_history`, takes a history and returns a
:class:`SeriesForecast` per series: the quantile frame plus the facts the planner
needs to trust it (which estimator, why, how fresh the data is). Estimator choice
per series is delegated to :func:`choose_estimator`: ``method='auto'`` is
:class:`forecaster.selection.AutoSelector` (backtest-selected, calibrated
quantiles), any other name is that registered estimator. Fitted models go through
a :class:`forecaster.store.ModelStore`, so a series forecast again (the next
cycle, the next step of a replay) reuses its selection instead of re-running the
backtests; without an explicit store an in-memory one is shared by the process.
A failing fit falls back to the one-day seasonal naive model for that series
only, and says so.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from forecaster.errors import DataError, TiercastError
from forecaster.estimators import BaseEstimator, SeasonalNaive, check_quantiles, make
from forecaster.long_horizon import LONG_HORIZON, long_horizon_frame
from forecaster.progress import active
from forecaster.series import History, check_forecast_size, infer_step, regularize
from forecaster.store import ModelStore

log = logging.getLogger(__name__)

DEFAULT_QUANTILES: tuple[float, ...] = (0.1, 0.5, 0.9)

_PROCESS_STORE = ModelStore(path=None)
"""Used when no store is passed: selections survive between calls in one process."""


@dataclass
class SeriesForecast:
    """A forecast of one series and what it rests on."""

    name: str
    frame: pd.DataFrame
    """Index: future timestamps at the history's step; one column per quantile (``q0.9``)."""
    estimator: str
    reason: str
    step: pd.Timedelta
    last_timestamp: pd.Timestamp
    """Newest timestamp with an observed (non-NaN) value."""
    last_value: float
    """Newest observed value: the planner never plans below what is observed now."""
    recent_max: float
    """Largest observed value over the last hour of history."""
    n_observed: int
    notes: list[str] = field(default_factory=list)

    def quantile(self, q: float) -> pd.Series:
        """The forecast at quantile ``q``, interpolating between stored columns."""
        cols = {float(c[1:]): c for c in self.frame.columns}
        if q in cols:
            return self.frame[cols[q]]
        keys = sorted(cols)
        lo = max([k for k in keys if k <= q], default=keys[0])
        hi = min([k for k in keys if k >= q], default=keys[-1])
        if lo == hi:
            return self.frame[cols[lo]]
        w = (q - lo) / (hi - lo)
        return (1 - w) * self.frame[cols[lo]] + w * self.frame[cols[hi]]


def choose_estimator(y: pd.Series, method: str) -> tuple[BaseEstimator, str]:
    """An unfitted estimator for ``method`` and why: ``auto`` selects per series by backtest."""
    if method == "auto":
        return make("auto"), "auto: selected by rolling-origin backtest"
    return make(method), f"estimator {method!r} requested"


def forecast_series(
    y: pd.Series,
    horizon: pd.Timedelta,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    method: str = "auto",
    store: ModelStore | None = None,
) -> SeriesForecast:
    """Forecast one series ``horizon`` ahead at its own step.

    ``store`` keeps fitted models between calls (default: one in-memory store per
    process); pass a :class:`ModelStore` with a path to keep them between runs.
    """
    name = str(y.name)
    qs = check_quantiles(quantiles, "forecast")
    check_forecast_size(y, horizon)
    y = regularize(y)
    observed = y.dropna()
    if len(observed) < 2:
        raise DataError(f"series {name!r} has fewer than 2 observed values; cannot forecast")
    step = infer_step(y)
    steps = max(1, math.ceil(horizon / step))
    notes: list[str] = []
    store = store if store is not None else _PROCESS_STORE
    estimator, reason = choose_estimator(y, method)
    try:
        outcome = store.get_or_fit(y, method, lambda: estimator)
        model = outcome.model
        frame = model.predict(steps, qs)
        used = model.label()
        reason = getattr(model, "reason_", reason)
        # Reuse is logged, not put in the reason: a plan must not change because its
        # model came from the store; a refit forced by a problem is worth a note.
        log.info("series %s: %s", name, outcome.note)
        if outcome.note.startswith("refitted"):
            notes.append(outcome.note)
        if getattr(model, "fallback_", None):
            notes.append(f"{used}: {model.fallback_}")
        horizon_notes = getattr(model, "horizon_notes", None)
        if callable(horizon_notes):
            notes.extend(horizon_notes(steps))
    except (TiercastError, ValueError, FloatingPointError) as exc:
        fallback = SeasonalNaive(season="1d")
        frame = fallback.fit(y).predict(steps, qs)
        used = "seasonal_naive_1d"
        notes.append(f"{reason} failed ({exc}); fell back to daily seasonal naive")
        reason = "fallback after a failed fit"
    if horizon > LONG_HORIZON:
        frame, long_notes = long_horizon_frame(y, frame, step, qs)
        notes.extend(long_notes)
    last_ts = observed.index[-1]
    recent = observed[observed.index > last_ts - pd.Timedelta(hours=1)]
    return SeriesForecast(
        name=name,
        frame=frame,
        estimator=used,
        reason=reason,
        step=step,
        last_timestamp=last_ts,
        last_value=float(observed.iloc[-1]),
        recent_max=float(np.nanmax(recent.to_numpy())),
        n_observed=len(observed),
        notes=notes,
    )


def forecast_history(
    history: History,
    horizon: pd.Timedelta,
    quantiles: Sequence[float] = DEFAULT_QUANTILES,
    method: str = "auto",
    store: ModelStore | None = None,
) -> dict[str, SeriesForecast]:
    """Forecast every series in ``history`` (sharing ``store``), each on its own, as a
    live cycle does; each moves the command's progress bar by one
    (:func:`forecaster.progress.active`), where one is counting.

    No series is another's fleet here: ``auto`` never considers the global model
    (:func:`forecaster.selection.auto_candidates`), and the global model named on its
    own finds its fleet only where a caller sets one
    (:func:`forecaster.global_model.fleet_context`, as ``tiercast forecast`` does for
    the series of its file)."""
    out = {}
    bar = active()
    for name, y in history.items():
        if bar is not None:
            bar.describe(f"forecast {name}")
        out[name] = forecast_series(y.rename(name), horizon, quantiles, method, store)
        if bar is not None:
            bar.update(1)
    return out
