"""A model-selection rule with few, fixed degrees of freedom: penalized backtest error,
shrunk toward a robust default when the evidence is thin.

``auto`` (:class:`forecaster.selection.AutoSelector`) backtests its candidates at rolling
origins one day apart. Its default rule keeps the candidate (or combination) with the
lowest mean error. This module holds the alternative it runs with ``choice='stable_copy'``
or ``choice='stable_median'``, in three steps on each candidate's errors per origin
(scaled absolute error of its median forecast, one number per backtest day):

1. **Penalized score.** ``score = mean + KAPPA * standard error``: the mean error over
   the candidate's own origins, made comparable between candidates backtested on
   different numbers of origins by the paired difference to the reference (the
   candidate with the most origins: its mean over all its origins plus the candidate's
   mean difference to it on the origins they share), plus :data:`KAPPA` standard
   errors of that mean (the standard deviation of its errors across origins over the
   square root of their number). A candidate that wins on a few lucky days or fails
   badly on some pays for its spread; one backtested on few origins pays for the thin
   evidence.
2. **Winner.** The lowest score. Ties go to the candidate listed first (the caller
   lists the single models cheapest and simplest first, then the combinations), so the
   choice never depends on dictionary order or floating-point noise beyond a tie.
3. **Shrinkage toward the default.** The winner replaces the default only when the
   evidence is clear: it has at least :data:`MIN_ORIGINS` origins shared with the
   default, and its paired advantage over the default on those origins (the mean of the
   default's error less the winner's, day by day) exceeds :data:`KAPPA` standard errors
   of that paired difference. Otherwise the default is kept.

The default is fixed by the rule's name, not by the series:

* ``stable_copy``: a seasonal copy, the better-scoring (step 1) of the daily and weekly
  seasonal naive models among the candidates;
* ``stable_median``: the median of the three best single candidates by score (each
  quantile's median over the three; one member far off does not move it).

Parameters (fixed for every series, not tuned per series): :data:`KAPPA` = 1 (the
one-standard-error rule of cross-validation) and :data:`MIN_ORIGINS` = 3 (with fewer
shared backtest days a standard error means nothing). Everything here is pure NumPy on
arrays the selector already holds: no model is fitted.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from forecaster.ensemble import combination_label

KAPPA = 1.0
"""Standard errors added to a candidate's mean error, and the margin (in standard errors of
the paired difference) by which a winner must beat the default to replace it."""

MIN_ORIGINS = 3
"""Fewest backtest origins, shared with the default, on which a winner may replace it."""

MEDIAN_SIZE = 3
"""Members of the ``stable_median`` default: the best this many single candidates."""

SEASONAL_COPIES: tuple[str, ...] = ("seasonal_naive_1d", "seasonal_naive_7d")
"""The ``stable_copy`` default's candidates, in order of preference on a tie."""

RULES: tuple[str, ...] = ("stable_copy", "stable_median")
"""The rules of this module by name (``AutoSelector(choice=...)``)."""


@dataclass(frozen=True)
class Choice:
    """What the rule chose among the candidates, and why."""

    name: str
    """The chosen candidate: the winner, or the default it did not clearly beat."""
    winner: str
    """The lowest penalized score."""
    default: str | None
    """The default of the rule (None when none was among the candidates)."""
    shrunk: bool
    """Whether the default was kept over a different winner."""
    scores: dict[str, float] = field(default_factory=dict)
    """Penalized score per candidate (step 1)."""
    note: str = ""
    """The decision in words, for the selection's reason."""


def origin_errors(actual: np.ndarray, point: np.ndarray, scale: float) -> np.ndarray:
    """Mean absolute error per backtest origin over ``scale`` (rows: origins, newest first).

    ``actual`` may hold more origins than ``point``: the first ``len(point)`` are used.
    An origin with no observed actual is NaN.
    """
    k = len(point)
    err = np.abs(np.asarray(actual, dtype=float)[:k] - np.asarray(point, dtype=float))
    seen = np.isfinite(err)
    total = np.where(seen, err, 0.0).sum(axis=1)
    count = seen.sum(axis=1)
    with np.errstate(all="ignore"):
        return np.where(count > 0, total / np.maximum(count, 1) / max(scale, 1e-12), np.nan)


def _finite(values: np.ndarray) -> np.ndarray:
    return values[np.isfinite(values)]


def standard_error(values: np.ndarray) -> float:
    """Standard error of the mean of the finite ``values`` (inf with fewer than two)."""
    v = _finite(np.asarray(values, dtype=float))
    if v.size < 2:
        return math.inf
    return float(np.std(v, ddof=1) / math.sqrt(v.size))


def penalized_scores(errors: Mapping[str, np.ndarray], kappa: float = KAPPA) -> dict[str, float]:
    """Step 1: ``mean + kappa * standard error`` per candidate (inf for one without errors).

    ``errors`` maps each candidate to its errors per origin, newest first; a candidate
    with fewer origins has the newest ones. Means are made comparable through the
    reference, the candidate with the most finite origins (the first listed on a tie).
    """
    usable = {k: np.asarray(v, dtype=float) for k, v in errors.items()}
    counts = {k: int(np.isfinite(v).sum()) for k, v in usable.items()}
    out = {k: math.inf for k in usable}
    if not usable or max(counts.values()) == 0:
        return out
    reference = max(usable, key=lambda k: counts[k])  # max keeps the first on a tie
    ref = usable[reference]
    ref_mean = float(np.mean(_finite(ref)))
    for name, err in usable.items():
        if counts[name] == 0:
            continue
        k = min(len(err), len(ref))
        both = np.isfinite(err[:k]) & np.isfinite(ref[:k])
        if both.any():
            mean = ref_mean + float(np.mean(err[:k][both] - ref[:k][both]))
        else:
            mean = float(np.mean(_finite(err)))
        out[name] = max(0.0, mean) + kappa * standard_error(err)
    return out


def clear_advantage(
    winner: np.ndarray,
    default: np.ndarray,
    kappa: float = KAPPA,
    min_origins: int = MIN_ORIGINS,
) -> bool:
    """Step 3: whether ``winner`` beats ``default`` by more than ``kappa`` standard errors of
    their paired difference, on at least ``min_origins`` origins both were backtested on."""
    k = min(len(winner), len(default))
    diff = np.asarray(default, dtype=float)[:k] - np.asarray(winner, dtype=float)[:k]
    diff = _finite(diff)
    if diff.size < max(2, min_origins):
        return False
    spread = float(np.std(diff, ddof=1) / math.sqrt(diff.size))
    return float(np.mean(diff)) > kappa * spread


def choose(
    errors: Mapping[str, np.ndarray],
    default: str | None,
    kappa: float = KAPPA,
    min_origins: int = MIN_ORIGINS,
) -> Choice:
    """Steps 1 to 3 on ``errors`` (candidate -> errors per origin, newest first, listed in
    order of preference on a tie), shrinking toward ``default`` (a key of ``errors``, or None
    for no shrinkage)."""
    if not errors:
        raise ValueError("choose: no candidates")
    scores = penalized_scores(errors, kappa)
    order = {name: i for i, name in enumerate(errors)}
    winner = min(scores, key=lambda k: (scores[k], order[k]))
    if default is None or default not in errors or default == winner:
        note = f"lowest penalized score {winner} {scores[winner]:.3f}"
        return Choice(winner, winner, default, False, scores, note)
    clear = clear_advantage(errors[winner], errors[default], kappa, min_origins)
    gap = f"{winner} {scores[winner]:.3f} against the default {default} {scores[default]:.3f}"
    if clear:
        note = f"lowest penalized score {gap}, ahead by more than {kappa:g} standard error"
        return Choice(winner, winner, default, False, scores, note)
    note = f"default kept: {gap}, not ahead by {kappa:g} standard error on {min_origins}+ origins"
    return Choice(default, winner, default, True, scores, note)


@dataclass
class Pool:
    """Candidates as the selector holds them: backtest medians (origins, horizon, newest
    origin first) and members' weights of each, the single models first (cheapest and
    simplest first), then combinations; with the backtest actuals and the error scale."""

    actual: np.ndarray
    """Backtest actuals (origins, horizon), newest first; a candidate's rows are the first ones."""
    scale: float = 1.0
    """Errors are divided by this (the series' naive MAE), so the scores read as MASE."""
    points: dict[str, np.ndarray] = field(default_factory=dict)
    weights: dict[str, dict[str, float]] = field(default_factory=dict)
    singles: list[str] = field(default_factory=list)
    """The single-model candidates (the median default's members are drawn from them)."""

    @classmethod
    def of(
        cls,
        points: Mapping[str, np.ndarray],
        scores: Mapping[str, float],
        actual: np.ndarray,
        scale: float,
    ) -> Pool:
        """The single candidates of ``points`` that have a score, in their order."""
        pool = cls(actual, scale)
        for name, p in points.items():
            if name in scores:
                pool.add(name, p, {name: 1.0}, single=True)
        return pool

    def add(
        self, name: str, points: np.ndarray, weights: Mapping[str, float], single: bool = False
    ) -> None:
        """Add a candidate (the first of a name is kept)."""
        if name not in self.points:
            self.points[name] = points
            self.weights[name] = dict(weights)
            if single:
                self.singles.append(name)

    def errors(self) -> dict[str, np.ndarray]:
        """Every candidate's errors per origin (:func:`origin_errors`), in the pool's order."""
        return {n: origin_errors(self.actual, p, self.scale) for n, p in self.points.items()}


def default_of(rule: str, pool: Pool, scores: Mapping[str, float]) -> str | None:
    """The rule's default among ``pool`` (added to it when it is a new combination)."""
    if rule == "stable_copy":
        copies = [c for c in SEASONAL_COPIES if c in pool.points and math.isfinite(scores[c])]
        return min(copies, key=lambda c: (scores[c], copies.index(c))) if copies else None
    if rule == "stable_median":
        singles = pool.singles
        ranked = sorted(
            (s for s in singles if math.isfinite(scores.get(s, math.inf))),
            key=lambda s: (scores[s], singles.index(s)),
        )
        if len(ranked) < MEDIAN_SIZE:
            return ranked[0] if ranked else None
        top = ranked[:MEDIAN_SIZE]
        k = min(len(pool.points[name]) for name in top)
        blend = np.median(np.stack([pool.points[name][:k] for name in top]), axis=0)
        label = combination_label(top, "median")
        pool.add(label, blend, {name: 1.0 / MEDIAN_SIZE for name in top})
        return label
    raise ValueError(f"choice: unknown rule {rule!r}; expected one of {', '.join(RULES)}")


def pick(rule: str, pool: Pool) -> tuple[str, np.ndarray, dict[str, float], str]:
    """The rule ``rule`` over ``pool``: (label, backtest medians, members' weights, note)."""
    default = default_of(rule, pool, penalized_scores(pool.errors()))
    result = choose(pool.errors(), default)
    note = f"choice {rule}: {result.note}"
    return result.name, pool.points[result.name], pool.weights[result.name], note
