"""Prophet, configured for short, high-frequency GPU-serving histories.

Two registered flavours:

* ``prophet``: tuned for this domain. Weekly seasonality is forced on when the
  history is under two weeks (Prophet's own default switches it off there, and
  serving demand has weekends); daily seasonality is on for sub-daily steps; the
  changepoint prior is tighter on short history (a few days of data cannot tell
  a new trend from noise, and an extrapolated slope is what hurts a 24 h
  forecast most); holidays and known events (launches, migrations) are passed as
  ``(name, ISO date)`` pairs, each covering that whole day.
* ``prophet_default``: ``Prophet()`` with its defaults, the benchmark baseline.

Quantiles come from Prophet's own uncertainty: its posterior predictive samples
(trend changes plus observation noise), drawn with a fixed seed so a forecast is
reproducible, and with the global NumPy random state restored afterwards.
Prophet and cmdstanpy log every fit at INFO and print a plotly notice at import;
both are silenced here. Prophet is imported on first fit, not at module import,
because it takes a noticeable fraction of a second.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import DataError
from forecaster.estimators import (
    BaseEstimator,
    register,
)

TWO_WEEKS = pd.Timedelta(days=14)
FOUR_WEEKS = pd.Timedelta(days=28)


def _silence() -> None:
    """Keep Prophet's and cmdstanpy's per-fit chatter out of the CLI's stderr."""
    logging.getLogger("prophet.plot").disabled = True  # "Importing plotly failed" at import
    for name in ("prophet", "cmdstanpy"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.ERROR)
        logger.propagate = False
        if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
            logger.addHandler(logging.NullHandler())


def _prophet_class() -> Any:
    _silence()
    from prophet import Prophet

    _silence()  # cmdstanpy resets its logger's level when first imported
    return Prophet


class ProphetEstimator(BaseEstimator):
    """Prophet with quantiles from its predictive samples; see the module docstring."""

    name = "prophet"

    def __init__(
        self,
        tuned: bool = True,
        changepoint_prior_scale: float | None = None,
        holidays: tuple[tuple[str, str], ...] = (),
        uncertainty_samples: int = 300,
        seed: int = 0,
        min_days: float = 2.0,
    ) -> None:
        self.tuned = tuned
        self.changepoint_prior_scale = changepoint_prior_scale
        self.holidays = holidays
        self.uncertainty_samples = uncertainty_samples
        self.seed = seed
        self.min_days = min_days

    def label(self) -> str:
        return "prophet" if self.tuned else "prophet_default"

    def _options(self, span: pd.Timedelta) -> dict[str, Any]:
        options: dict[str, Any] = {"uncertainty_samples": self.uncertainty_samples}
        if self.changepoint_prior_scale is not None:
            options["changepoint_prior_scale"] = self.changepoint_prior_scale
        if not self.tuned:
            return options
        if span < TWO_WEEKS:
            options["weekly_seasonality"] = True
        if self.step_ < pd.Timedelta(days=1):
            options["daily_seasonality"] = True
        if self.changepoint_prior_scale is None:
            options["changepoint_prior_scale"] = 0.01 if span < FOUR_WEEKS else 0.05
        if self.holidays:
            try:
                days = pd.to_datetime([d for _, d in self.holidays])
            except (ValueError, TypeError) as exc:
                raise DataError(
                    f"The 'holidays' parameter of ProphetEstimator must be (name, ISO date) pairs. "
                    f"Got {self.holidays!r} instead."
                ) from exc
            options["holidays"] = pd.DataFrame(
                {"holiday": [n for n, _ in self.holidays], "ds": days}
            )
        return options

    def fit(self, history: pd.Series) -> ProphetEstimator:
        y = self._prepare(history)
        observed = y.dropna()
        span = y.index[-1] - y.index[0]
        if span < pd.Timedelta(days=self.min_days) or len(observed) < 3:
            # Under two days Prophet cannot separate the daily cycle from trend.
            self._fall_back(y, f"{span} of history is under {self.min_days:g} days")
            return self
        frame = pd.DataFrame({"ds": observed.index, "y": observed.to_numpy()})
        Prophet = _prophet_class()
        model = Prophet(**self._options(y.index[-1] - y.index[0]))
        try:
            self.model_ = model.fit(frame)
        except (RuntimeError, ValueError) as exc:
            # cmdstanpy raises RuntimeError when the optimizer fails on odd data.
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            self._fall_back(y, f"Prophet fit failed: {first}")
            return self
        self.delegate_ = None
        return self

    def _fall_back(self, y: pd.Series, why: str) -> None:
        self._fall_back_to_naive(y, why)
        self.model_ = None

    def update(self, history: pd.Series) -> ProphetEstimator:
        """Forecast from the newer history's end with the fitted model (Prophet is a function of time)."""
        if getattr(self, "model_", None) is None:
            return self.fit(history)
        self._prepare(history)
        self.delegate_ = None
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if self.delegate_ is not None:
            return self.delegate_.predict(horizon, qs)
        future = pd.DataFrame({"ds": self._future_index(horizon)})
        state = np.random.get_state()
        try:
            np.random.seed(self.seed)
            samples = self.model_.predictive_samples(future)["yhat"]
        finally:
            np.random.set_state(state)
        out = np.quantile(samples, qs, axis=1).T
        return self._frame(out, qs, horizon)


register("prophet", ProphetEstimator)
register("prophet_default", lambda: ProphetEstimator(tuned=False))
