"""Profile regression on a learned mix of seasonal bases (``profile_mix``).

The other cheap models each bet on one idea of "what a normal day looks like":
the median of the last week of days, the median of the last four same weekdays,
yesterday, last week, or a flat recent level. Which idea is right differs from
series to series (a weekly cycle or none, a stable shape or a drifting one), and
choosing one of them by a couple of weeks of daily backtests is noisy. This model
learns the choice from every point instead: each basis is computed honestly (from
data at least a day older than the point it describes, as a day-ahead forecast
would see it), and the convex weights that minimise the absolute error of their
mix over the last ``fit_days`` are found by least absolute deviations (robust to
bursts; iteratively reweighted non-negative least squares with the weights summing
to one). The departure of the series from that mix is then followed exactly as in
:class:`~forecaster.estimators.ProfileRegression`: for every step ahead, a learned
pull towards the current (smoothed) departure, so level shifts are followed and
bursts are not. Quantiles come from the regression's residuals per horizon bucket.

Bases (only those the history supports; weekly ones from 14 days on):

* ``daily``: median of the last ``seasons`` days, phase by phase;
* ``weekly``: median of the last ``weeks`` same weekdays;
* ``yesterday`` and ``last_week``: the value one day and one week back;
* ``level``: the median of the ``level_days`` before, flat.

Every basis at a point depends only on the points a bounded window before it, so a
backtest computes them once for the whole series and slices them per origin (the
same numbers as refitting on each prefix; checked in the tests).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd
from scipy.optimize import nnls

from forecaster.estimators import (
    ArrayEstimator,
    ProfileRegression,
    median_rows,
    parse_duration,
    register,
    rolling_profile,
    season_matrix,
)
from forecaster.series import steps_per


def lad_simplex(X: np.ndarray, y: np.ndarray, iterations: int = 30) -> np.ndarray:
    """Weights ``w >= 0`` with ``sum(w) == 1`` minimising ``sum |y - X w|`` (approximately).

    Iteratively reweighted least squares: each step solves a non-negative least
    squares problem whose rows are weighted by the inverse of the last absolute
    residuals (floored, so a point fitted exactly cannot take over), plus a heavy
    penalty holding the weights' sum at one (they are renormalised after). Each
    step works on the p x p normal equations (through their Cholesky factor), so
    its cost hardly depends on the number of rows. Rows with a NaN are ignored;
    with too few rows, or a degenerate problem, the weights are equal.
    """
    p = X.shape[1]
    equal = np.full(p, 1.0 / p)
    ok = np.isfinite(y) & np.isfinite(X).all(axis=1)
    X, y = X[ok], y[ok]
    if len(y) < max(10, 2 * p) or p == 1:
        return equal
    scale = float(np.mean(np.abs(y))) or 1.0
    X, y = X / scale, y / scale
    row_weights = np.ones(len(y))
    w = equal
    for _ in range(iterations):
        weighted = X * row_weights[:, None]
        gram = weighted.T @ X
        heavy = 1e4 * float(np.trace(gram)) / p + 1e-12
        gram = gram + heavy * np.ones((p, p)) + 1e-10 * heavy * np.eye(p)
        rhs = weighted.T @ y + heavy
        try:
            upper = np.linalg.cholesky(gram).T  # upper.T @ upper == gram
            target = np.linalg.solve(upper.T, rhs)
            new, _ = nnls(upper, target)
        except (np.linalg.LinAlgError, RuntimeError):
            break  # a pathological design: keep what we have
        total = new.sum()
        if not np.isfinite(total) or total <= 0:
            break
        new = new / total
        r = np.abs(y - X @ new)
        floor = 1e-3 * float(np.median(r)) + 1e-9
        row_weights = 1.0 / np.maximum(r, floor)
        done = float(np.abs(new - w).max()) < 1e-3
        w = new
        if done:
            break
    return w


def trailing_mean(values: np.ndarray, window: int) -> np.ndarray:
    """Mean of the observed values among the last ``window`` at each position (NaN if none)."""
    ok = ~np.isnan(values)
    sums = np.concatenate(([0.0], np.cumsum(np.where(ok, values, 0.0))))
    counts = np.concatenate(([0], np.cumsum(ok)))
    ends = np.arange(1, len(values) + 1)
    starts = np.maximum(0, ends - window)
    n = counts[ends] - counts[starts]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(n > 0, (sums[ends] - sums[starts]) / np.maximum(n, 1), np.nan)


def _shifted(values: np.ndarray, lag: int) -> np.ndarray:
    out = np.full(len(values), np.nan)
    if lag < len(values):
        out[lag:] = values[: len(values) - lag]
    return out


class ProfileMix(ProfileRegression):
    """Profile regression whose profile is a learned convex mix of seasonal bases; see the module."""

    name = "profile_mix"

    def __init__(
        self,
        season: str = "1d",
        seasons: int = 7,
        weeks: int = 4,
        level_days: int = 7,
        fit_days: int = 14,
        lad_iterations: int = 3,
        smooth: str = "1h",
        window: str = "28d",
        max_horizon: str = "1d",
    ) -> None:
        super().__init__(
            season=season, seasons=seasons, smooth=smooth, window=window, max_horizon=max_horizon
        )
        self.weeks = weeks
        self.level_days = level_days
        self.fit_days = fit_days
        self.lad_iterations = lad_iterations

    def label(self) -> str:
        return "profile_mix"

    # -- the bases -------------------------------------------------------------------

    def _reach(self, m: int) -> int:
        """Steps of history any basis at a point looks back over (beyond the point)."""
        return max(self.weeks * 7 * m, self.seasons * m, (self.level_days + 1) * m)

    def _keep(self, m: int) -> int:
        """Steps a fit uses: the regression span plus the bases' look-back before it."""
        return self._span(m) + self._reach(m)

    def _bases(self, values: np.ndarray, m: int) -> dict[str, np.ndarray]:
        """Honest bases at every position of ``values`` (NaN where one has no data yet).

        A weekly basis is only offered with two weeks of history: with less, one
        week of data is both what it would learn from and what it would predict.
        """
        daily = rolling_profile(values, m, self.seasons)
        out = {"daily": daily}
        week = 7 * m
        if len(values) >= 2 * week:
            out["weekly"] = rolling_profile(values, week, self.weeks)
        out["yesterday"] = _shifted(values, m)
        if len(values) >= 2 * week:
            out["last_week"] = _shifted(values, week)
        level = (
            pd.Series(values)
            .rolling(self.level_days * m, min_periods=max(1, m // 2))
            .median()
            .to_numpy()
        )
        out["level"] = _shifted(level, m)
        # A basis without data at a point stands in with the daily profile there.
        for name in out:
            if name != "daily":
                out[name] = np.where(np.isnan(out[name]), daily, out[name])
        return out

    def _mix(self, bases: dict[str, np.ndarray], values: np.ndarray, m: int) -> np.ndarray:
        """Fit the weights on the last ``fit_days`` of ``values``; the mixed profile over all of it."""
        names = list(bases)
        # At most 96 points a day (every k-th step, counted back from the newest): the
        # weights are five numbers, and finer steps only repeat the same days.
        every = max(1, -(-m // 96))
        tail = slice(len(values) - 1, max(0, len(values) - self.fit_days * m) - 1, -every)
        if tail.stop < 0:
            tail = slice(len(values) - 1, None, -every)
        X = np.column_stack([bases[k][tail] for k in names])
        w = lad_simplex(X, values[tail], self.lad_iterations)
        self.mix_weights_ = {k: float(v) for k, v in zip(names, w, strict=True) if v > 1e-6}
        total = sum(self.mix_weights_.values())
        self.mix_weights_ = {k: v / total for k, v in self.mix_weights_.items()}
        return np.asarray(sum(v * bases[k] for k, v in self.mix_weights_.items()))

    # -- fitting ---------------------------------------------------------------------

    def _fit_values(
        self,
        values: np.ndarray,
        dev: np.ndarray | None = None,
        smoothed: np.ndarray | None = None,
        bases: dict[str, np.ndarray] | None = None,
    ) -> None:
        """Fit on ``values``; ``bases``, when given, are :meth:`_bases` of exactly these values."""
        m = steps_per(parse_duration(self.season), self.step_)
        if len(values) < 3 * m:
            # Under three days the mix would be fitted on the days it is judged by.
            self.mix_weights_ = {"daily": 1.0}
            self.history_ = values[-self._reach(m) :].copy()
            super()._fit_values(values)
            return
        keep = self._keep(m)
        if bases is None:
            values = values[-keep:]
            bases = self._bases(values, m)
        mix = self._mix(bases, values, m)
        span = self._span(m)
        dev = values - mix
        tail_dev = dev[-span:]
        w = min(steps_per(parse_duration(self.smooth), self.step_), m)
        super()._fit_values(values[-span:], tail_dev, trailing_mean(tail_dev, w))
        self.history_ = values[-self._reach(m) :].copy()
        recent = tail_dev[-self.smooth_steps_ :]
        recent = recent[~np.isnan(recent)]
        self.current_ = float(recent.mean()) if recent.size else 0.0

    # -- forecasting -------------------------------------------------------------------

    def _profile_ahead(self, horizon: int) -> np.ndarray:
        """The mixed profile over the next ``horizon`` steps."""
        m = self.season_steps_
        history = self.history_
        daily = median_rows(season_matrix(history, m, self.seasons))
        if np.isnan(daily).any():
            daily = np.where(np.isnan(daily), np.nanmedian(history), daily)
        base = np.resize(daily, horizon)
        out = np.zeros(horizon)
        for name, w in self.mix_weights_.items():
            if name == "daily":
                ahead = base
            elif name == "weekly":
                week = 7 * m
                ahead = np.resize(median_rows(season_matrix(history, week, self.weeks)), horizon)
            elif name == "yesterday":
                ahead = np.resize(history[-m:], horizon)
            elif name == "last_week":
                ahead = np.resize(history[-7 * m :], horizon)
            else:  # level
                recent = history[-self.level_days * m :]
                recent = recent[~np.isnan(recent)]
                ahead = np.full(horizon, float(np.median(recent)) if recent.size else np.nan)
            out += w * np.where(np.isnan(ahead), base, ahead)
        return out

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """As refitting at each origin, with the bases computed once for the whole series.

        A basis at position t depends only on the ``_reach`` steps before t, so over
        the last ``_keep`` steps of a prefix it equals the whole series' basis there
        whenever the prefix is at least that long or starts the series; which bases
        exist depends only on the prefix's length, as in a fit.
        """
        if len(y) < 3 or min(origins, default=3) < 3:
            return ArrayEstimator.backtest_medians(self, y, origins, horizon)
        values = y.to_numpy(dtype=float)
        self.step_ = step = y.index[1] - y.index[0]
        m = steps_per(parse_duration(self.season), step)
        keep = self._keep(m)
        end = max(origins)
        everything = self._bases(values[:end], m)
        out = np.empty((len(origins), horizon))
        for i, o in enumerate(origins):
            train = values[:o]
            self._prepare_values(train, step)
            if o < 3 * m:
                self._fit_values(train)
            else:
                start = max(0, o - keep)
                bases = {
                    k: v[start:o]
                    for k, v in everything.items()
                    if k not in ("weekly", "last_week") or o >= 14 * m
                }
                self._fit_values(values[start:o], bases=bases)
            out[i] = self._finish(self._predict_values(horizon, [0.5]), [0.5], horizon)[:, 0]
        return out


register("profile_mix", ProfileMix)
