"""Classical statistical forecasters from statsmodels: AutoETS, MSTL and Theta.

These are the library models users reach for first, registered as estimators so
that they pass the same contract as tiercast's own models, serve as rivals in the
benchmark and can be candidates of ``auto``:

* ``ets_auto``: exponential smoothing (statsmodels ``ETSModel``, additive error),
  the best by AICc of {level, damped trend} x {no season, additive daily season};
* ``mstl``: statsmodels ``MSTL`` with daily and weekly seasons (the weekly one
  only with two weeks of history); each seasonal component is repeated from its
  last cycle and the seasonally adjusted series is forecast with a non-seasonal
  ETS chosen by AICc, as statsforecast's MSTL does with its default trend model;
* ``theta``: statsmodels ``ThetaModel`` (the standard theta method, with the
  daily season removed when its test finds one).

statsforecast's AutoETS, MSTL and AutoTheta are the usual implementations, but
statsforecast 2.1.1 requires pandas < 3 and this project pins pandas 3.1.1;
statsmodels 0.15.0 supports pandas 3 and is well kept. One difference: this ETS
keeps the daily season at 15-minute steps (96 periods, initial states set
heuristically), where statsforecast's AutoETS drops seasons longer than 24.

Each model sees the last ``window`` of history (gaps filled linearly) and its
quantiles are normal around the mean, from the model's own prediction intervals.
Histories under two daily seasons, or a failed fit, fall back to the daily
seasonal naive model and say so in ``fallback_``.
"""

from __future__ import annotations

import functools
import math
import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy.stats import norm

from forecaster.estimators import BaseEstimator, clone, register
from forecaster.series import parse_duration, steps_per

DAY = pd.Timedelta(days=1)
WEEK = pd.Timedelta(days=7)

_FIT_ERRORS = (
    ValueError,
    IndexError,
    np.linalg.LinAlgError,
    FloatingPointError,
    ZeroDivisionError,
)


def _filled(values: np.ndarray) -> np.ndarray:
    """Gaps filled by linear interpolation (edges by the nearest value)."""
    series = pd.Series(values)
    if not series.isna().any():
        return values
    return np.asarray(series.interpolate(limit_direction="both").to_numpy(dtype=float))


def _ets_config(season: int | None, damped: bool) -> dict[str, Any]:
    """The ``ETSModel`` arguments of one configuration (additive error)."""
    return {
        "error": "add",
        "trend": "add" if damped else None,
        "damped_trend": damped,
        "seasonal": "add" if season else None,
        "seasonal_periods": season,
        "initialization_method": "heuristic" if season else "estimated",
    }


def _ets(
    values: np.ndarray, seasonal_periods: int | None
) -> tuple[Any, str, dict[str, Any]]:  # the fitted results, its short name and its arguments
    """The AICc-best additive-error ETS among level/damped trend x none/additive season."""
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel

    best: tuple[float, Any, str, dict[str, Any]] | None = None
    seasons = [None] if seasonal_periods is None else [None, seasonal_periods]
    y = pd.Series(values)
    for season in seasons:
        for damped in (False, True):
            config = _ets_config(season, damped)
            try:
                result = ETSModel(y, **config).fit(disp=False)
            except _FIT_ERRORS:
                continue
            score = float(result.aicc)
            if not math.isfinite(score):
                continue
            name = f"ETS(A,{'Ad' if damped else 'N'},{'A' if season else 'N'})"
            if best is None or score < best[0]:
                best = (score, result, name, config)
    if best is None:
        raise ValueError("no ETS configuration could be fitted")
    return best[1], best[2], best[3]


def _ets_smoothed(values: np.ndarray, config: dict[str, Any], params: Any) -> Any:
    """The ETS results of ``config`` run over ``values`` with ``params`` held (no fitting).

    ``ETSModel.smooth`` as statsmodels runs it, but for the covariance of the parameter
    estimates (:func:`_held_results`), which nothing here reads.
    """
    from statsmodels.tsa.exponential_smoothing.ets import ETSModel, ETSResultsWrapper

    model = ETSModel(pd.Series(values), **config)
    held = np.asarray(params, dtype=float)
    return model._wrap_results(
        held,
        model._smooth(held),
        False,
        results_class=_held_results(),
        wrapper_class=ETSResultsWrapper,
    )


@functools.cache
def _held_results() -> type:
    """statsmodels' ``ETSResults`` without the covariance of its parameters.

    Its constructor computes that covariance by a complex-step Hessian of the likelihood:
    a fifth of a warm cycle (``tiercast bench-scale``), for the standard errors of
    estimates that were not made here (the parameters are held). Forecasts and their
    intervals read the states, the parameters and the residuals' scale, not this, so they
    are the same to the bit (``tests/test_forecast_speed.py``). Built on first use, as
    statsmodels is imported on first use; importable by name for pickle (module
    ``__getattr__``).
    """
    from statsmodels.tsa.exponential_smoothing.ets import ETSResults

    class _HeldETSResults(ETSResults):  # type: ignore[misc]
        @property
        def cov_params_approx(self) -> np.ndarray:
            k = len(self.params)
            return np.full((k, k), np.nan)

    _HeldETSResults.__module__ = __name__
    _HeldETSResults.__qualname__ = "_HeldETSResults"
    return _HeldETSResults


def __getattr__(name: str) -> Any:
    if name == "_HeldETSResults":
        return _held_results()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _ets_mean(result: Any, horizon: int) -> np.ndarray:
    """``result.forecast(horizon)`` of an additive ETS, the same numbers without its loop.

    statsmodels forecasts by simulating with zero errors, one Python step at a time over
    the states (most of an AutoETS backtest's forecast time). With additive error, trend
    and season, a zero error leaves each step's level ``previous level + damped trend``,
    the trend ``previous trend x phi`` and the season the one a cycle before: the same
    products and sums in the same order as numpy's accumulations, so the forecast is the
    same to the bit (``tests/test_forecast_speed.py``). Anything multiplicative goes to
    statsmodels.
    """
    if result.error != "add" or result.trend == "mul" or result.seasonal == "mul":
        return np.asarray(result.forecast(horizon), dtype=float)
    from statsmodels.tsa.exponential_smoothing import _ets_smooth

    start = result._get_prediction_start_index("end")
    params = result._get_prediction_params(start)
    x = np.zeros((horizon, result.model._k_states_internal))
    fixed = np.zeros(len(params), dtype=np.int64)
    _, _, _, phi, m, _ = _ets_smooth._initialize_ets_smooth(params, x, fixed, np.zeros_like(params))
    state = x[-1]  # level, trend, then the seasons newest first, as simulate reads them
    trend = np.multiply.accumulate(np.concatenate([[state[1]], np.full(horizon, phi)]))[1:]
    level = np.add.accumulate(np.concatenate([[state[0]], trend]))[1:]
    season = state[2 : 2 + m][::-1]
    return level + season[np.arange(horizon) % m]


def _ets_forecast(result: Any, horizon: int) -> tuple[np.ndarray, np.ndarray]:
    """Mean and standard deviation of an ETS forecast ``horizon`` steps ahead."""
    n = int(result.nobs)
    frame = result.get_prediction(n, n + horizon - 1).summary_frame(alpha=0.2)
    mean = frame["mean"].to_numpy(dtype=float)
    sd = (frame["pi_upper"].to_numpy(dtype=float) - mean) / norm.ppf(0.9)
    return mean, np.maximum(sd, 0.0)


class StatisticalEstimator(BaseEstimator):
    """Shared fit/predict plumbing of the statsmodels forecasters; see the module docstring."""

    name = "statistical"
    fill_: float
    """What a NaN in the library's forecast is replaced by (the last value)."""
    window_: np.ndarray
    """The (gap-filled) history the model was fitted on, kept to rebuild it on loading."""
    config_: dict[str, Any]
    params_: np.ndarray

    def __init__(self, window: str = "28d") -> None:
        self.window = window

    def fit(self, history: pd.Series) -> StatisticalEstimator:
        y = self._prepare(history)
        self.delegate_ = None
        values = y.to_numpy(dtype=float)
        m = steps_per(DAY, self.step_)
        keep = max(steps_per(parse_duration(self.window), self.step_), 2 * m)
        first = int(np.argmax(~np.isnan(values)))
        self.window_start_ = max(first, len(values) - keep)
        values = values[self.window_start_ :]
        if len(values) < 2 * m:
            self._fall_back_to_naive(y, f"{len(values)} steps is under two daily seasons")
            return self
        self.season_steps_ = m
        with warnings.catch_warnings():
            # statsmodels warns about convergence and frequencies on most fits.
            warnings.simplefilter("ignore")
            try:
                self.window_ = _filled(values)
                self._fit_filled(self.window_)
            except _FIT_ERRORS as exc:
                self._fall_back_to_naive(y, f"{self.name} fit failed ({str(exc)[:80]})")
        return self

    def _fit_filled(self, values: np.ndarray) -> None:
        raise NotImplementedError

    def _newer_window(self, history: pd.Series) -> tuple[int, np.ndarray] | None:
        """``(start, gap-filled window)`` of ``history`` as :meth:`fit` would take it, for
        ``update``; None where the model fell back or the window is under two seasons."""
        if getattr(self, "delegate_", None) is not None or not hasattr(self, "window_"):
            return None
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        m = steps_per(DAY, self.step_)
        keep = max(steps_per(parse_duration(self.window), self.step_), 2 * m)
        first = int(np.argmax(~np.isnan(values)))
        start = max(first, len(values) - keep)
        if len(values) - start < 2 * m:
            return None
        return start, _filled(values[start:])

    def artifact_state(self) -> dict[str, Any]:
        """Everything but the statsmodels results, which only pickle: the model is stored as
        its window of history and parameters, and rebuilt from them on loading."""
        state = super().artifact_state()
        result = state.pop("result_", None)
        if result is not None and hasattr(self, "config_"):
            state["params_"] = np.asarray(result.params, dtype=float)
        return state

    def restore_artifact(self) -> None:
        """Nothing now: the results are rebuilt when first needed (:meth:`_ensure_result`).
        A stored model moved onto newer data by ``update`` never needs the old ones."""

    def _ensure_result(self) -> None:
        if getattr(self, "delegate_", None) is None and "result_" not in vars(self):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                self._rebuild()

    def _rebuild(self) -> None:
        """The results from the stored window (and parameters), as the fit left them."""
        raise NotImplementedError

    def _mean_sd(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        raise NotImplementedError

    def _mean(self, horizon: int) -> np.ndarray:
        """The point forecast alone (what backtests need), cheaper than :meth:`_mean_sd`."""
        return self._mean_sd(horizon)[0]

    def median(self, horizon: int) -> np.ndarray:
        """The fitted model's median forecast ``horizon`` steps ahead, as ``predict`` gives it."""
        self._check_fitted()
        if self.delegate_ is not None:
            return np.asarray(self.delegate_.predict(horizon, [0.5]).to_numpy()[:, 0], dtype=float)
        self._ensure_result()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mean = self._mean(horizon)
        mean = np.nan_to_num(np.asarray(mean, dtype=float), nan=self.fill_)
        return self._finish(mean[:, None], [0.5], horizon)[:, 0]

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts refitted on ``y[:o]`` at each origin, without prediction intervals.

        The intervals (Theta's needs a second model fit) are what ``predict`` pays
        most for and selection never uses.
        """
        out = np.empty((len(origins), horizon))
        for i, o in enumerate(origins):
            out[i] = self._refit(y.iloc[:o]).median(horizon)
        return out

    def _refit(self, history: pd.Series) -> StatisticalEstimator:
        fitted = clone(self).fit(history)
        assert isinstance(fitted, StatisticalEstimator)
        return fitted

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if self.delegate_ is not None:
            frame = self.delegate_.predict(horizon, qs)
            return self._frame(frame.to_numpy(), qs, horizon)
        self._ensure_result()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            if all(q == 0.5 for q in qs):
                # The median alone (what ``auto`` asks of its chosen model, whose bands
                # come from its backtests): no prediction interval, which for Theta
                # costs a model fit of its own on every call.
                mean = np.asarray(self._mean(horizon), dtype=float)
                sd = np.zeros(horizon)
            else:
                mean, sd = self._mean_sd(horizon)
        mean = np.nan_to_num(mean, nan=self.fill_)
        sd = np.nan_to_num(sd, nan=0.0)
        z = norm.ppf(np.asarray(qs))
        return self._frame(mean[:, None] + sd[:, None] * z[None, :], qs, horizon)

    def label(self) -> str:
        return getattr(self, "model_name_", self.name)


class AutoETS(StatisticalEstimator):
    """AICc-selected additive-error exponential smoothing with an optional daily season."""

    name = "ets_auto"

    def _fit_filled(self, values: np.ndarray) -> None:
        self.fill_ = float(values[-1])
        self.result_, self.model_name_, self.config_ = _ets(values, self.season_steps_)

    def _mean_sd(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        return _ets_forecast(self.result_, horizon)

    def _mean(self, horizon: int) -> np.ndarray:
        return _ets_mean(self.result_, horizon)

    def _rebuild(self) -> None:
        self.result_ = _ets_smoothed(self.window_, self.config_, self.params_)

    def update(self, history: pd.Series) -> StatisticalEstimator:
        """Run the fitted model over the newer ``history`` with its parameters held.

        A stored model is refitted on its schedule; between refits each cycle only
        moves it onto the new data (its level, trend and season states), which costs
        a smoothing pass instead of the four configurations' fits. Where the model
        fell back, or the smoothing fails, it is refitted.
        """
        if not hasattr(self, "config_"):
            return self.fit(history)
        params = (
            np.asarray(self.result_.params, dtype=float)
            if "result_" in vars(self)
            else np.asarray(self.params_, dtype=float)
        )
        newer = self._newer_window(history)
        if newer is None:
            return self.fit(history)
        start, window = newer
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = _ets_smoothed(window, self.config_, params)
        except _FIT_ERRORS:
            return self.fit(history)
        self.window_start_, self.window_, self.result_ = start, window, result
        self.params_ = params
        self.fill_ = float(window[-1])
        return self

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts at each origin from the model chosen and fitted at the oldest one.

        The configuration and parameters are chosen once, on the history before the
        oldest origin (so no backtest sees its own test day), then held: at each
        later origin the same model is run (smoothed, not refitted) over the window
        from the same start to that origin. A refit per origin would cost the four
        configurations' fits each time; a day more of data moves the parameters
        little. Where the oldest fit falls back, every origin is refitted.
        """
        out = np.empty((len(origins), horizon))
        if not len(origins):
            return out
        oldest = int(min(origins))
        base = self._refit(y.iloc[:oldest])
        if base.delegate_ is not None or not isinstance(base, AutoETS):
            return super().backtest_medians(y, origins, horizon)
        values = y.to_numpy(dtype=float)
        for i, o in enumerate(origins):
            if o == oldest:
                out[i] = base.median(horizon)
                continue
            window = _filled(values[base.window_start_ : o])
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    smoothed = _ets_smoothed(window, base.config_, base.result_.params)
                    mean = _ets_mean(smoothed, horizon)
            except _FIT_ERRORS:
                out[i] = self._refit(y.iloc[:o]).median(horizon)
                continue
            mean = np.nan_to_num(mean, nan=float(window[-1]))
            if np.nanmin(values[:o]) >= 0:
                mean = np.clip(mean, 0.0, None)
            out[i] = mean
        return out


class MSTLForecaster(StatisticalEstimator):
    """MSTL decomposition (daily and weekly seasons), seasons repeated, the rest forecast by ETS."""

    name = "mstl"

    def _fit_filled(self, values: np.ndarray) -> None:
        from statsmodels.tsa.seasonal import MSTL

        m = self.season_steps_
        if len(values) <= 2 * m:  # statsmodels' MSTL fails without a season to fit
            raise ValueError(f"{len(values)} steps is not over two daily seasons")
        # statsmodels drops seasons of half the series or more.
        periods = [m] + ([7 * m] if len(values) > 14 * m else [])
        decomposed = MSTL(values, periods=periods).fit()
        seasonal = np.asarray(decomposed.seasonal).reshape(len(values), -1)
        # One row per season: the last full cycle of each, repeated ahead.
        self.cycles_ = [seasonal[-p:, j].copy() for j, p in enumerate(periods)]
        adjusted = values - seasonal.sum(axis=1)
        self.fill_ = float(values[-1])
        self.adjusted_ = adjusted
        self.result_, trend_name, self.config_ = _ets(adjusted, None)
        days = "+".join("1d" if p == m else "7d" for p in periods)
        self.model_name_ = f"mstl({days}; {trend_name})"

    def _mean_sd(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        mean, sd = _ets_forecast(self.result_, horizon)
        return self._seasonal(mean), sd

    def _mean(self, horizon: int) -> np.ndarray:
        return self._seasonal(_ets_mean(self.result_, horizon))

    def _rebuild(self) -> None:
        self.result_ = _ets_smoothed(self.adjusted_, self.config_, self.params_)

    def _seasonal(self, mean: np.ndarray) -> np.ndarray:
        for cycle in self.cycles_:
            mean = mean + np.resize(cycle, len(mean))
        return mean


class ThetaForecaster(StatisticalEstimator):
    """The standard theta method (statsmodels ``ThetaModel``), deseasonalized when tested seasonal."""

    name = "theta"

    def _fit_filled(self, values: np.ndarray) -> None:
        from statsmodels.tsa.forecasting.theta import ThetaModel

        self.fill_ = float(values[-1])
        method = "additive" if values.min() <= 0 else "auto"
        self.result_ = ThetaModel(values, period=self.season_steps_, method=method).fit()
        self.alpha_ = float(self.result_.params.iloc[1])

    def _rebuild(self) -> None:
        alpha = getattr(self, "alpha_", None)
        if alpha is None:
            self._fit_filled(self.window_)  # deterministic: the same fit again
        else:
            self.result_ = self._held(self.window_, alpha)

    def _held(self, values: np.ndarray, alpha: float) -> Any:
        """Theta's results on ``values`` with the smoothing weight ``alpha`` held.

        The steps of statsmodels' ``ThetaModel.fit`` (0.15, two-step estimation): the
        seasonality test, the decomposition and the least-squares drift, redone on
        ``values``; the simple exponential smoothing run with ``alpha`` instead of
        estimated (the estimate is what a refit pays for). On the data it was fitted
        on this gives the fit's forecast (test).
        """
        from scipy.signal import lfilter
        from statsmodels.tsa.forecasting.theta import ThetaModel, ThetaModelResults
        from statsmodels.tsa.tsatools import add_trend

        method = "additive" if values.min() <= 0 else "auto"
        model = ThetaModel(values, period=self.season_steps_, method=method)
        if model.deseasonalize and model.use_test:
            model._test_seasonality()
        y, seasonal = model._deseasonalize_data()
        ct = add_trend(y, "ct", prepend=True)[:, :2]
        ct[:, 1] -= 1
        _, b0 = np.linalg.lstsq(ct, y, rcond=None)[0]
        # SES with the level known at y[0]: a(t+1) = alpha y(t) + (1 - alpha) a(t).
        level = lfilter([alpha], [1.0, -(1.0 - alpha)], y, zi=[(1.0 - alpha) * y[0]])[0]
        return ThetaModelResults(b0, alpha, None, np.array([level[-1]]), seasonal, False, model)

    def update(self, history: pd.Series) -> StatisticalEstimator:
        """Move the fitted model onto the newer ``history`` with its smoothing weight held
        (:meth:`_held`); where the model fell back, or anything fails, it is refitted."""
        alpha = getattr(self, "alpha_", None)
        newer = self._newer_window(history) if alpha is not None else None
        if newer is None or alpha is None:
            return self.fit(history)
        start, window = newer
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                result = self._held(window, alpha)
        except (*_FIT_ERRORS, AttributeError, TypeError):
            return self.fit(history)
        self.window_start_, self.window_, self.result_ = start, window, result
        self.fill_ = float(window[-1])
        return self

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts at each origin with the smoothing weight fitted at the oldest one.

        As AutoETS's backtest: the model is fitted once, on the history before the
        oldest origin (so no backtest sees its own test day); at each later origin
        the window a fit would take there is run with that weight held
        (:meth:`_held`: the seasonality test, decomposition and drift redone, the
        weight not estimated), which is what :meth:`update` gives a stored model.
        The weight's estimate was most of a fit's cost; a day more of data moves it
        little. Where the oldest fit falls back, or a later origin fails, that origin
        is refitted.
        """
        out = np.empty((len(origins), horizon))
        if not len(origins):
            return out
        oldest = int(min(origins))
        base = self._refit(y.iloc[:oldest])
        alpha = getattr(base, "alpha_", None)
        if base.delegate_ is not None or alpha is None or not isinstance(base, ThetaForecaster):
            return super().backtest_medians(y, origins, horizon)
        values = y.to_numpy(dtype=float)
        m = base.season_steps_
        keep = max(steps_per(parse_duration(self.window), base.step_), 2 * m)
        for i, o in enumerate(origins):
            if o == oldest:
                out[i] = base.median(horizon)
                continue
            prefix = values[:o]
            first = int(np.argmax(~np.isnan(prefix)))
            window = _filled(prefix[max(first, o - keep) :])
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    mean = np.asarray(base._held(window, alpha).forecast(horizon), dtype=float)
            except (*_FIT_ERRORS, AttributeError, TypeError):
                out[i] = self._refit(y.iloc[:o]).median(horizon)
                continue
            mean = np.nan_to_num(mean, nan=float(window[-1]))
            out[i] = np.clip(mean, 0.0, None) if np.nanmin(prefix) >= 0 else mean
        return out

    def _mean(self, horizon: int) -> np.ndarray:
        return np.asarray(self.result_.forecast(horizon), dtype=float)

    def _mean_sd(self, horizon: int) -> tuple[np.ndarray, np.ndarray]:
        mean = self._mean(horizon)
        bounds = np.asarray(self.result_.prediction_intervals(horizon, alpha=0.2), dtype=float)
        sd = (bounds[:, 1] - mean) / norm.ppf(0.9)
        return mean, np.maximum(sd, 0.0)


register("ets_auto", AutoETS)
register("mstl", MSTLForecaster)
register("theta", ThetaForecaster)
