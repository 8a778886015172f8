"""Quantile gradient boosting on lag and calendar features.

One quantile gradient boosting model per quantile (LightGBM's, ``engine="lightgbm"``, the
default; or scikit-learn's ``HistGradientBoostingRegressor(loss="quantile")``,
``engine="sklearn"``, the default until 2026-12-05, then at learning rate 0.1), trained on
features known a day ahead: the value 1 day, 2 days and 1 week before the target, the time
of day and the day of week. Because every lag is at least a day, one model forecasts every
step of the next day directly (no recursion and no error feedback); beyond a day the
model's own median fills the one-day lag. Histories too short for the 1-day and 2-day lags
fall back to the daily seasonal naive model, recorded in ``fallback_``; the weekly lag is
left out until enough of the training targets have a value a week before them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError
from forecaster.estimators import (
    BaseEstimator,
    check_quantiles,
    clone,
    interpolate_levels,
    register,
)
from forecaster.fast_boosting import QuantileGradientBoosting, one_thread
from forecaster.series import steps_per

DAY = pd.Timedelta(days=1)
WEEK = pd.Timedelta(days=7)


class QuantileBoosting(BaseEstimator):
    """Direct multi-horizon quantile GBM with 1-day, 2-day and 1-week lags.

    ``quantiles`` is the set of quantile models trained at fit time; a quantile
    asked for at predict time that was not trained is interpolated between the
    trained ones (and clamped at the ends), so the output stays monotone.

    ``engine`` grows the trees: LightGBM in C++ (about 5x less CPU than scikit-learn's
    per-node Python on these small fits), chosen with a learning rate of 0.05 on half of
    the benchmark's groups and confirmed on the other half (docs/benchmarks.md, "LightGBM
    grows the boosting trees"); ``sklearn`` is the model as it was, at any rate given.
    """

    name = "gbm"

    def __init__(
        self,
        quantiles: tuple[float, ...] = (0.1, 0.5, 0.9),
        max_iter: int = 100,
        learning_rate: float = 0.05,
        max_leaf_nodes: int = 15,
        min_samples_leaf: int = 20,
        min_days: float = 3.0,
        engine: str = "lightgbm",
    ) -> None:
        self.quantiles = quantiles
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.min_days = min_days
        self.engine = engine

    def _features(
        self, values: np.ndarray, index: pd.DatetimeIndex, target: np.ndarray
    ) -> np.ndarray:
        """Feature rows for target positions ``target`` (positions in ``values``)."""
        cols = []
        for lag in self.lags_:
            pos = target - lag
            col = np.full(len(target), np.nan)
            ok = (pos >= 0) & (pos < len(values))
            col[ok] = values[pos[ok]]
            cols.append(col)
        seconds = index.hour * 3600 + index.minute * 60 + index.second
        cols.append(np.asarray(seconds, dtype=float) / 86400.0)
        cols.append(np.asarray(index.day_of_week, dtype=float))
        return np.column_stack(cols)

    def fit(self, history: pd.Series) -> QuantileBoosting:
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        m_day = steps_per(DAY, self.step_)
        week = steps_per(WEEK, self.step_)
        self.trained_quantiles_ = check_quantiles(self.quantiles, "QuantileBoosting")
        rows = np.arange(2 * m_day, len(values))
        rows = rows[~np.isnan(values[rows])] if rows.size else rows
        # The weekly lag only where enough targets have one: a feature that is never
        # observed cannot be binned (and says nothing).
        with_week = rows[rows >= week]
        observed_week = int((~np.isnan(values[with_week - week])).sum()) if with_week.size else 0
        has_week = observed_week >= self.min_samples_leaf
        self.lags_ = (m_day, 2 * m_day, week) if has_week else (m_day, 2 * m_day)
        if len(values) < self.min_days * m_day or rows.size < 2 * self.min_samples_leaf:
            self._fall_back_to_naive(
                y, f"{len(values)} steps is under {self.min_days:g} days for the lag features"
            )
            self.models_: list[Any] = []
            return self
        self.delegate_ = None
        X = self._features(values, pd.DatetimeIndex(y.index[rows]), rows)
        target = values[rows]
        self.models_ = []
        # One thread: these fits are small, and OpenMP threads spinning against other
        # processes on a shared machine cost far more than they save.
        with one_thread():
            self._train(X, target)
        self.recent_ = values[-max(self.lags_) :].copy()
        return self

    def _train(self, X: np.ndarray, target: np.ndarray) -> None:
        if self.engine == "lightgbm":
            self.models_ = [self._lightgbm(X, target, q) for q in self.trained_quantiles_]
            return
        if self.engine != "sklearn":
            raise BadInputError(f"gbm: engine must be sklearn or lightgbm, not {self.engine!r}")
        for q in self.trained_quantiles_:
            model = QuantileGradientBoosting(  # scikit-learn's, with faster leaf values
                loss="quantile",
                quantile=q,
                max_iter=self.max_iter,
                learning_rate=self.learning_rate,
                max_leaf_nodes=self.max_leaf_nodes,
                min_samples_leaf=self.min_samples_leaf,
                early_stopping=False,
                random_state=0,
            )
            self.models_.append(model.fit(X, target))

    def _lightgbm(self, X: np.ndarray, target: np.ndarray, q: float) -> Any:
        """LightGBM's quantile boosting with the same trees, rate and leaves: grown in C++
        (scikit-learn grows each node in Python), its leaves renewed to the quantile of
        their residuals as scikit-learn's are; deterministic on one thread."""
        import lightgbm  # only this engine needs it

        params = {
            "objective": "quantile",
            "alpha": q,
            "learning_rate": self.learning_rate,
            "num_leaves": self.max_leaf_nodes,
            "min_data_in_leaf": self.min_samples_leaf,
            "num_threads": 1,
            "deterministic": True,
            "force_col_wise": True,
            "seed": 0,
            "verbose": -1,
        }
        data = lightgbm.Dataset(X, target, params={"verbose": -1})
        booster = lightgbm.train(params, data, num_boost_round=self.max_iter)
        return _Booster(booster)

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts at each origin from the median model alone.

        The quantile models are trained independently, so the median model of a
        full fit is this one; training the others only to drop them tripled the
        cost of the backtests that selection runs. (Where a full fit's quantile
        models cross, its output is sorted across them, so its median column can
        differ from the median model's own forecast there.)
        """
        median_only = clone(self).set_params(quantiles=(0.5,))
        return BaseEstimator.backtest_medians(median_only, y, origins, horizon)

    def update(self, history: pd.Series) -> QuantileBoosting:
        """New lag values without retraining: the fitted trees stay, the inputs move."""
        if not hasattr(self, "models_") or self.delegate_ is not None:
            return self.fit(history)
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        if len(values) < max(self.lags_):
            return self.fit(history)
        self.recent_ = values[-max(self.lags_) :].copy()
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if self.delegate_ is not None:
            return self.delegate_.predict(horizon, qs)
        index = self._future_index(horizon)
        m_day = self.lags_[0]
        values = np.concatenate([self.recent_, np.full(horizon, np.nan)])
        base = len(self.recent_)
        trained = np.empty((horizon, len(self.trained_quantiles_)))
        # One day at a time: each block's one-day lag is the block before (observed or forecast).
        median_col = int(np.argmin([abs(q - 0.5) for q in self.trained_quantiles_]))
        for start in range(0, horizon, m_day):
            stop = min(horizon, start + m_day)
            target = np.arange(base + start, base + stop)
            X = self._features(values, index[start:stop], target)
            with one_thread():
                for j, model in enumerate(self.models_):
                    trained[start:stop, j] = model.predict(X)
            values[base + start : base + stop] = trained[start:stop, median_col]
        trained = np.sort(trained, axis=1)
        out = np.column_stack([interpolate_levels(self.trained_quantiles_, trained, q) for q in qs])
        return self._frame(out, qs, horizon)


class _Booster:
    """A LightGBM booster that predicts on one thread, as the scikit-learn models do."""

    def __init__(self, booster: Any) -> None:
        self.booster = booster

    def predict(self, X: np.ndarray) -> np.ndarray:
        return np.asarray(self.booster.predict(X, num_threads=1), dtype=float)


register("gbm", QuantileBoosting)
