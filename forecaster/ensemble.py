"""An ensemble that averages its members' quantiles, weighted by skill, or takes their median.

Members are registry names, so an ensemble is described by plain parameters and
can be stored, cloned and rebuilt. The combination averages each quantile across
members (quantile averaging, which keeps the result monotone when every member
is), with ``weights`` in the members' order; model selection sets the weights from
backtest skill (inverse squared MASE). ``combine='median'`` takes each quantile's
median over the members instead (weights unused). A member that fails to fit is dropped and
recorded in ``fallback_``; if every member fails the daily seasonal naive model
stands in.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, TiercastError
from forecaster.estimators import (
    BaseEstimator,
    SeasonalNaive,
    make,
    register,
)


def combination_label(members: Sequence[str], combine: str = "mean") -> str:
    """``ensemble(a+b)`` for a weighted average, ``median(a+b+c)`` for a median: the label
    that plans and the model store record, and from which selection rebuilds the ensemble."""
    return ("median" if combine == "median" else "ensemble") + "(" + "+".join(members) + ")"


class Ensemble(BaseEstimator):
    """Weighted quantile average of registered estimators."""

    name = "ensemble"

    def __init__(
        self,
        members: tuple[str, ...] = ("seasonal_naive_1d", "seasonal_profile_1d", "recent_level"),
        weights: tuple[float, ...] | None = None,
        combine: str = "mean",
    ) -> None:
        self.members = members
        self.weights = weights
        self.combine = combine

    def label(self) -> str:
        return combination_label(self.members, getattr(self, "combine", "mean"))

    def check_settings(self) -> None:
        if self.combine not in ("mean", "median"):
            raise BadInputError(
                f"The 'combine' parameter of Ensemble must be 'mean' or 'median'. "
                f"Got {self.combine!r} instead."
            )

    def _weights(self) -> np.ndarray:
        if self.weights is None:
            return np.full(len(self.members), 1.0 / max(len(self.members), 1))
        w = np.asarray(self.weights, dtype=float)
        if len(w) != len(self.members) or (w < 0).any() or w.sum() <= 0:
            raise BadInputError(
                f"The 'weights' parameter of Ensemble must be {len(self.members)} non-negative "
                f"numbers with a positive sum. Got {self.weights!r} instead."
            )
        return w / w.sum()

    def fit(self, history: pd.Series) -> Ensemble:
        y = self._prepare(history)
        weights = self._weights()
        self.check_settings()
        if not self.members:
            raise BadInputError("The 'members' parameter of Ensemble must be non-empty. Got ().")
        fitted: list[tuple[BaseEstimator, float]] = []
        failed: list[str] = []
        for name, w in zip(self.members, weights, strict=True):
            try:
                fitted.append((make(name).fit(y), float(w)))
            except (TiercastError, ValueError, FloatingPointError) as exc:
                failed.append(f"{name} ({exc})")
        if not fitted:
            fitted = [(SeasonalNaive(season="1d").fit(y), 1.0)]
        notes = [f"{est.label()}: {est.fallback_}" for est, _ in fitted if est.fallback_]
        if failed:
            notes.insert(0, "dropped member(s) that failed to fit: " + "; ".join(failed))
        self.fallback_ = "; ".join(notes) or None
        self.fitted_ = fitted
        return self

    def update(self, history: pd.Series) -> Ensemble:
        if not hasattr(self, "fitted_"):
            return self.fit(history)
        y = self._prepare(history)
        self.fitted_ = [(est.update(y), w) for est, w in self.fitted_]
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if getattr(self, "combine", "mean") == "median" and len(self.fitted_) > 1:
            # Each quantile the median over members (unweighted): monotone in q, as
            # every member is, and unmoved by one member far off the others.
            stack = np.stack([est.predict(horizon, qs).to_numpy() for est, _ in self.fitted_])
            return self._frame(np.median(stack, axis=0), qs, horizon)
        total = sum(w for _, w in self.fitted_)
        out = np.zeros((horizon, len(qs)))
        for est, w in self.fitted_:
            out += (w / total) * est.predict(horizon, qs).to_numpy()
        return self._frame(out, qs, horizon)


register("ensemble", Ensemble)
