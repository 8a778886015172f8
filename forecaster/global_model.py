"""A global model: quantile gradient boosting fitted once over every series of a fleet.

A per-series model learns a weekly shape only from the weeks its own history holds:
a two-week-old series (a new cluster, Prometheus' default 15-day retention) has one
or two. The sibling series of the same fleet (other models, pools, tenants of one
cluster, on one calendar) have seen the same weekends and working hours. The global
model learns from all of them at once:

* **the fleet** (:class:`Fleet`) is the set of sibling series, handed to the model
  through a context (:func:`fleet_context`): ``tiercast forecast`` sets it to the
  series of its file, and ``tiercast backtest`` to those series cut at each origin
  (:func:`fleet_context_at`). A live cycle forecasts each signal alone and sets none.
  The fleet's data never enters a fitted estimator's state: only the fitted trees and
  the series' own last days do.
* **rows**: every observed value of every series up to a cutoff, as a one-day-ahead
  target from the day-aligned origin before it, with features known at that origin:
  the values 1, 2 and 7 days before the target and the median of the same phase over
  the 7 days before (the daily profile), time of day, day of week, the lead
  (how far into the day ahead), the level of the last 6 hours and its change from the
  same hours a day before, and the series' scale (log10 of its mean absolute value over
  the 7 days before the origin). Values, target and levels are divided by that scale, so
  series of any unit train one model. Missing lags are NaN, which the trees route.
  Rows are subsampled to ``max_rows`` with a fixed seed.
* **no leakage**: a fit for a series whose history ends at ``L`` trains on fleet values
  at or before a cutoff ``C <= L`` only; ``C`` is the fleet's newest timestamp less
  whole days, the latest such at or before ``L``, so every series of a fleet that ends
  together (and every backtest origin of theirs, one day apart) shares the same cutoffs.
* **one fit per cutoff**: fitted trees are cached by (fleet, step, cutoff, quantile,
  settings): the selection's backtest origins of all the fleet's series share about
  ``max_origins + 1`` fits per refit, not one per series.
* **code-free state**: the trees are kept as plain arrays (:func:`compact_trees`) and
  evaluated by :func:`predict_trees`, giving the same numbers as scikit-learn's own
  ``predict``; a fitted model is stored without pickle, so the model store keeps it
  without a signing key.

Without a fleet, or with fewer than ``min_siblings`` other series holding a day of data
before the cutoff, the estimator falls back to the daily seasonal naive model and says
why in ``fallback_``. It is a method to name (``method: global_gbm``), never a candidate
of ``auto``: a live cycle has no fleet, and ``auto`` is scored by the benchmarks as a
cycle gets it (docs/forecasting.md, "A global model across the fleet").
"""

from __future__ import annotations

import contextlib
import contextvars
import copy
import hashlib
import math
import warnings
from collections import OrderedDict
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from forecaster.errors import BadInputError, TiercastError
from forecaster.estimators import (
    BaseEstimator,
    check_quantiles,
    clone,
    interpolate_levels,
    register,
)
from forecaster.series import infer_step, regularize, steps_per

DAY = pd.Timedelta(days=1)
_DAY_NS = 86_400 * 10**9
RECENT = pd.Timedelta(hours=6)
"""The window of the recent-level features (the recent level model's window)."""
SCALE_DAYS = 7
"""Days before an origin over which a series' scale (mean absolute value) is taken."""
CLIP = 50.0
"""Scaled values beyond +-this are clipped: a week of zeros followed by a burst would
otherwise give targets of millions that no quantile is about."""
FEATURES: tuple[str, ...] = (
    "lag_1d",
    "lag_2d",
    "lag_7d",
    "profile_1d",
    "time_of_day",
    "day_of_week",
    "lead",
    "recent_level",
    "level_change",
    "log_scale",
)
"""The feature columns, in order (see the module docstring)."""
MAX_CACHED_FITS = 512
"""Fitted tree sets kept per process (a few hundred kB each)."""
MAX_COMPILED = 128
"""Tree sets kept in scikit-learn's record form per process (the backtest cutoffs of one
refit, and the models being predicted)."""
MAX_CACHED_FLEETS = 8
"""Fleets kept per process by content, so that the same fleet built again reuses its grids."""


# -- the fleet ------------------------------------------------------------------------


@dataclass(frozen=True)
class _Track:
    """One fleet series on a regular grid: values from ``start_ns`` at the grid's step."""

    name: str
    start_ns: int
    values: np.ndarray


class Fleet:
    """The sibling series of one fleet, by name (sorted), with a content digest as ``token``.

    Build it with :meth:`of`; series are put on the grid of the step asked for (means
    within each step) when a model first needs them, and series sampled more coarsely
    than that step are left out of it.
    """

    def __init__(self, series: Mapping[str, pd.Series], token: str) -> None:
        self.series = dict(series)
        self.token = token
        self._grids: dict[int, list[_Track]] = {}
        self._newest: dict[int, pd.Timestamp | None] = {}
        self._ready: dict[tuple[int, int], frozenset[str]] = {}

    def __len__(self) -> int:
        return len(self.series)

    def __repr__(self) -> str:
        return f"Fleet({len(self.series)} series, token={self.token!r})"

    @classmethod
    def of(
        cls,
        series: Mapping[str, pd.Series] | Iterable[pd.Series],
        skip_bad: bool = False,
    ) -> Fleet:
        """A fleet of ``series`` (a mapping name -> series, or named series).

        A series that is not a pandas Series on a DatetimeIndex, or a name given twice,
        is refused in one line; ``skip_bad`` leaves such series out instead (the caller
        forecasting a history reports them itself).
        """
        items = (
            list(series.items())
            if isinstance(series, Mapping)
            else [(getattr(s, "name", None), s) for s in series]
        )
        named: dict[str, pd.Series] = {}
        for name, y in items:
            problem = _series_problem(name, y)
            if problem is None and str(name) in named:
                problem = f"series name {str(name)!r} appears twice; names must be unique"
            if problem is not None:
                if skip_bad:
                    continue
                raise BadInputError(f"fleet: {problem}")
            named[str(name)] = y
        ordered = dict(sorted(named.items()))
        digest = hashlib.sha256(b"tiercast-fleet\0")
        for name, y in ordered.items():
            digest.update(name.encode() + b"\0")
            digest.update(pd.DatetimeIndex(y.index).as_unit("ns").asi8.tobytes())
            digest.update(y.to_numpy(dtype=float).tobytes())
        token = digest.hexdigest()[:24]
        cached = _FLEETS.get(token)
        if cached is not None:
            _FLEETS.move_to_end(token)
            return cached
        fleet = cls(ordered, token)
        _FLEETS[token] = fleet
        while len(_FLEETS) > MAX_CACHED_FLEETS:
            _FLEETS.popitem(last=False)
        return fleet

    def tracks(self, step: pd.Timedelta) -> list[_Track]:
        """The fleet's series on the grid of ``step`` (those at that step or finer)."""
        key = int(step.value)
        if key not in self._grids:
            out = []
            for name, y in self.series.items():
                try:
                    if infer_step(y) > step:
                        continue  # coarser than the grid: nothing to average, only gaps
                    grid = regularize(y, step)
                except (TiercastError, ValueError):
                    continue  # a broken sibling is not this model's problem
                values = grid.to_numpy(dtype=float)
                if np.isfinite(values).sum() < 2:
                    continue
                out.append(_Track(name, int(grid.index[0].value), values))
            self._grids[key] = out
        return self._grids[key]

    def newest(self, step: pd.Timedelta) -> pd.Timestamp | None:
        """The newest timestamp with an observed value on the grid of ``step``."""
        key = int(step.value)
        if key not in self._newest:
            last = None
            for track in self.tracks(step):
                seen = np.flatnonzero(np.isfinite(track.values))
                stamp = track.start_ns + int(seen[-1]) * int(step.value)
                last = stamp if last is None else max(last, stamp)
            self._newest[key] = None if last is None else pd.Timestamp(last)
        return self._newest[key]

    def cutoff(self, step: pd.Timedelta, last: pd.Timestamp) -> pd.Timestamp | None:
        """The training cutoff for a history ending at ``last``: the fleet's newest
        timestamp less whole days, the latest at or before ``last`` (None: empty fleet)."""
        newest = self.newest(step)
        if newest is None:
            return None
        if last >= newest:
            return newest
        return newest - math.ceil((newest - last) / DAY) * DAY

    def siblings(self, step: pd.Timedelta, cutoff: pd.Timestamp, exclude: str) -> int:
        """Series other than ``exclude`` with at least a day of observed values by ``cutoff``."""
        key = (int(step.value), int(cutoff.value))
        if key not in self._ready:
            m = steps_per(DAY, step)
            ready = set()
            for track in self.tracks(step):
                last = _position(track, step, cutoff)
                if last >= 0 and int(np.isfinite(track.values[: last + 1]).sum()) >= m:
                    ready.add(track.name)
            self._ready[key] = frozenset(ready)
        ready_now = self._ready[key]
        return len(ready_now) - int(exclude in ready_now)


_FLEETS: OrderedDict[str, Fleet] = OrderedDict()


def _series_problem(name: Any, y: Any) -> str | None:
    if name is None:
        return "every series needs a name"
    if not isinstance(y, pd.Series) or not isinstance(y.index, pd.DatetimeIndex):
        return (
            f"series {str(name)!r} must be a pandas Series on a DatetimeIndex; "
            f"got {type(y).__name__}"
        )
    try:
        y.to_numpy(dtype=float)
    except (TypeError, ValueError):
        return f"series {str(name)!r} has values that are not numbers (dtype {y.dtype})"
    return None


def _position(track: _Track, step: pd.Timedelta, at: pd.Timestamp) -> int:
    """Index of the last grid point of ``track`` at or before ``at`` (-1: none)."""
    pos = (int(at.value) - track.start_ns) // int(step.value)
    return int(min(pos, len(track.values) - 1))


_FLEET: contextvars.ContextVar[Fleet | None] = contextvars.ContextVar(
    "tiercast_fleet", default=None
)


@contextlib.contextmanager
def fleet_context(fleet: Fleet | None) -> Iterator[Fleet | None]:
    """Within the ``with`` block, ``fleet`` is the fleet every global model trains on."""
    if fleet is not None and not isinstance(fleet, Fleet):
        raise BadInputError(
            f"fleet_context expects a Fleet (Fleet.of(series)) or None; got {type(fleet).__name__}"
        )
    token = _FLEET.set(fleet)
    try:
        yield fleet
    finally:
        _FLEET.reset(token)


def fleet_at_origin(
    series: Sequence[pd.Series], origin: pd.Timestamp, max_history: pd.Timedelta | None = None
) -> Fleet:
    """The fleet of ``series`` as it stood at ``origin``: each cut before the origin, and to
    ``max_history`` before it when set (what a backtest at that origin may train on)."""
    cut = []
    for s in series:
        keep = s.index < origin
        if max_history is not None:
            keep &= s.index >= origin - max_history
        if keep.any():
            cut.append(s[keep])
    return Fleet.of(cut)


@contextlib.contextmanager
def fleet_context_at(
    series: Sequence[pd.Series], max_history: pd.Timedelta | None, origin: pd.Timestamp
) -> Iterator[Fleet]:
    """:func:`fleet_context` with the fleet of :func:`fleet_at_origin`: a backtest's
    ``context`` (``functools.partial(fleet_context_at, series, max_history)``), so that no
    origin's fit sees a sibling's values from after it."""
    with fleet_context(fleet_at_origin(series, origin, max_history)) as fleet:
        assert fleet is not None
        yield fleet


def current_fleet() -> Fleet | None:
    """The fleet set by the innermost :func:`fleet_context`, or None."""
    return _FLEET.get()


# -- features -------------------------------------------------------------------------


class _Sums:
    """Cumulative sums of one series, for window means in constant time."""

    def __init__(self, values: np.ndarray) -> None:
        seen = np.isfinite(values)
        self.total = np.concatenate([[0.0], np.cumsum(np.where(seen, values, 0.0))])
        self.absolute = np.concatenate([[0.0], np.cumsum(np.where(seen, np.abs(values), 0.0))])
        self.count = np.concatenate([[0], np.cumsum(seen)])

    def mean(self, first: np.ndarray, last: np.ndarray, absolute: bool = False) -> np.ndarray:
        """Mean of the observed values in positions ``first..last`` (inclusive); NaN if none."""
        lo = np.clip(first, 0, None)
        hi = np.clip(last + 1, 0, None)
        sums = self.absolute if absolute else self.total
        n = self.count[hi] - self.count[lo]
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.where(n > 0, (sums[hi] - sums[lo]) / np.maximum(n, 1), np.nan)


def _scales(sums: _Sums, origins: np.ndarray, m: int) -> np.ndarray:
    """Each origin's scale: mean absolute value over the 7 days up to it, else over all of it
    before, else 1 (a series of zeros stays in its own units)."""
    week = sums.mean(origins - SCALE_DAYS * m + 1, origins, absolute=True)
    ever = sums.mean(np.zeros_like(origins), origins, absolute=True)
    scale = np.where(np.isfinite(week) & (week > 1e-9), week, ever)
    return np.where(np.isfinite(scale) & (scale > 1e-9), scale, 1.0)


def feature_rows(
    values: np.ndarray,
    start_ns: int,
    step: pd.Timedelta,
    targets: np.ndarray,
    origins: np.ndarray,
    m: int,
) -> tuple[np.ndarray, np.ndarray]:
    """Features (rows x :data:`FEATURES`) of positions ``targets`` forecast from ``origins``
    (the last observed position before each), and each row's scale.

    ``values`` starts at ``start_ns`` at ``step``; only positions at or before a row's
    origin are read, except the lags, which are at least a day before a target that is
    at most a day after its origin.
    """
    sums = _Sums(values)
    scale = _scales(sums, origins, m)
    w = steps_per(RECENT, step)
    n = len(values)

    def lag(days: int) -> np.ndarray:
        pos = targets - days * m
        out = np.full(len(targets), np.nan)
        ok = (pos >= 0) & (pos < n)
        out[ok] = values[pos[ok]]
        return out / scale

    recent = sums.mean(origins - w + 1, origins)
    before = sums.mean(origins - m - w + 1, origins - m)
    stamps = start_ns + targets.astype(np.int64) * int(step.value)
    lags = [lag(d) for d in range(1, SCALE_DAYS + 1)]
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a phase never observed stays NaN
        profile = np.nanmedian(np.column_stack(lags), axis=1)
    columns = [
        lags[0],
        lags[1],
        lags[6],
        profile,
        (stamps % _DAY_NS) / _DAY_NS,
        ((stamps // _DAY_NS + 3) % 7).astype(float),  # 1970-01-01 was a Thursday (3)
        (targets - origins) / m,
        recent / scale,
        (recent - before) / scale,
        np.log10(scale),
    ]
    X = np.column_stack(columns)
    X[:, :4] = np.clip(X[:, :4], -CLIP, CLIP)
    X[:, 7:9] = np.clip(X[:, 7:9], -CLIP, CLIP)
    return X, scale


def training_rows(
    fleet: Fleet, step: pd.Timedelta, cutoff: pd.Timestamp, max_rows: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """The global model's training set at ``cutoff``: features and scaled targets.

    Every observed value of every fleet series at or before ``cutoff`` with a day of
    grid before its origin is a row; origins are the cutoff less whole days, so rows
    look a day ahead as the forecast made at the cutoff does. More than ``max_rows``
    rows are subsampled with ``seed``.
    """
    m = steps_per(DAY, step)
    tracks = fleet.tracks(step)
    picked: list[tuple[int, np.ndarray, np.ndarray]] = []
    for k, track in enumerate(tracks):
        last = _position(track, step, cutoff)
        if last < m:
            continue
        targets = np.arange(m, last + 1)
        origins = targets - 1 - (targets - last - 1) % m
        ok = (origins >= m - 1) & np.isfinite(track.values[targets])
        if ok.any():
            picked.append((k, targets[ok], origins[ok]))
    total = sum(len(t) for _, t, _ in picked)
    keep: np.ndarray | None = None
    if total > max_rows:
        keep = np.sort(np.random.default_rng(seed).choice(total, size=max_rows, replace=False))
    blocks_X, blocks_y = [], []
    offset = 0
    for k, targets, origins in picked:
        if keep is not None:
            lo, hi = np.searchsorted(keep, [offset, offset + len(targets)])
            chosen = keep[lo:hi] - offset
            offset += len(targets)
            if not chosen.size:
                continue
            targets, origins = targets[chosen], origins[chosen]
        track = tracks[k]
        X, scale = feature_rows(track.values, track.start_ns, step, targets, origins, m)
        blocks_X.append(X)
        blocks_y.append(np.clip(track.values[targets] / scale, -CLIP, CLIP))
    if not blocks_X:
        return np.empty((0, len(FEATURES))), np.empty(0)
    return np.concatenate(blocks_X), np.concatenate(blocks_y)


# -- trees as plain arrays ------------------------------------------------------------


def compact_trees(model: Any) -> dict[str, np.ndarray]:
    """The trees of a fitted single-output ``HistGradientBoostingRegressor`` as plain arrays.

    Node arrays of every tree are concatenated (children indices made global);
    :func:`predict_trees` evaluates them. Categorical splits are not supported (the
    global model has none).
    """
    nodes = [predictors[0].nodes for predictors in model._predictors]
    if any(bool(n["is_categorical"].any()) for n in nodes):
        raise BadInputError("compact_trees: categorical splits are not supported")
    sizes = np.array([len(n) for n in nodes], dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64)
    every: Any = np.concatenate(nodes)  # a structured array: one record per node
    shift = np.repeat(offsets, sizes)
    leaf = every["is_leaf"].astype(bool)
    return {
        "feature": np.where(leaf, -1, every["feature_idx"]).astype(np.int32),
        "threshold": every["num_threshold"].astype(np.float64),
        "missing_left": every["missing_go_to_left"].astype(bool),
        "left": np.where(leaf, 0, every["left"].astype(np.int64) + shift).astype(np.int32),
        "right": np.where(leaf, 0, every["right"].astype(np.int64) + shift).astype(np.int32),
        "value": every["value"].astype(np.float64),
        "roots": offsets.astype(np.int32),
        "baseline": np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)[:1],
        "depth": np.array([int(every["depth"].max())], dtype=np.int64),
    }


def predict_trees(trees: Mapping[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """Predictions of :func:`compact_trees` output for the rows of ``X``.

    The same decisions as scikit-learn's predictor (a value at or below the threshold
    goes left, NaN goes where training sent missing values) and the same order of
    summation (the baseline, then tree by tree), so the same numbers. The trees are
    walked by scikit-learn's compiled walker where its (private) interface is the one
    this was written against, else by :func:`walk_trees` (numpy, a few times slower).
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    compiled = _compiled_trees(trees)
    if compiled is None:
        return walk_trees(trees, X)
    walker, nodes = compiled
    out = np.full(len(X), float(trees["baseline"][0]))
    leaf = np.empty(len(X), dtype=np.float64)
    no_bitsets = np.zeros((0, 8), dtype=np.uint32)
    f_idx_map = np.zeros(X.shape[1], dtype=np.uint32)
    for tree in nodes:
        walker(tree, X, no_bitsets, no_bitsets, f_idx_map, 1, leaf)
        out += leaf
    return out


def walk_trees(trees: Mapping[str, np.ndarray], X: np.ndarray) -> np.ndarray:
    """:func:`predict_trees` in numpy: every row down every tree, one level at a time."""
    X = np.asarray(X, dtype=np.float64)
    n = len(X)
    roots = trees["roots"]
    nodes = np.broadcast_to(roots, (n, len(roots))).copy()
    rows = np.arange(n)[:, None]
    feature = trees["feature"]
    for _ in range(int(trees["depth"][0]) + 1):
        f = feature[nodes]
        inner = f >= 0
        if not inner.any():
            break
        x = X[rows, np.maximum(f, 0)]
        with np.errstate(invalid="ignore"):
            go_left = np.where(
                np.isnan(x), trees["missing_left"][nodes], x <= trees["threshold"][nodes]
            )
        step = np.where(go_left, trees["left"][nodes], trees["right"][nodes])
        nodes = np.where(inner, step, nodes)
    leaves = trees["value"][nodes]
    out = np.full(n, float(trees["baseline"][0]))
    for j in range(leaves.shape[1]):
        out += leaves[:, j]
    return out


_COMPILED: dict[int, tuple[Mapping[str, np.ndarray], list[np.ndarray]]] = {}
"""Per tree set (by id, the set itself held so the id stays its own): scikit-learn's node
records, rebuilt once from the plain arrays."""


def _compiled_trees(trees: Mapping[str, np.ndarray]) -> tuple[Any, list[np.ndarray]] | None:
    try:
        from sklearn.ensemble._hist_gradient_boosting._predictor import (
            _predict_from_raw_data,
        )
        from sklearn.ensemble._hist_gradient_boosting.common import PREDICTOR_RECORD_DTYPE
    except ImportError:
        return None
    kept = _COMPILED.get(id(trees))
    if kept is not None and kept[0] is trees:
        return _predict_from_raw_data, kept[1]
    names = set(PREDICTOR_RECORD_DTYPE.names or ())
    if (
        not {"value", "feature_idx", "num_threshold", "missing_go_to_left", "left", "right"}
        <= names
    ):
        return None
    roots = trees["roots"].astype(np.int64)
    ends = np.append(roots[1:], len(trees["value"]))
    records = []
    for root, end in zip(roots, ends, strict=True):
        part = slice(int(root), int(end))
        leaf = trees["feature"][part] < 0
        rec = np.zeros(int(end - root), dtype=PREDICTOR_RECORD_DTYPE)
        rec["value"] = trees["value"][part]
        rec["feature_idx"] = np.maximum(trees["feature"][part], 0)
        rec["num_threshold"] = trees["threshold"][part]
        rec["missing_go_to_left"] = trees["missing_left"][part]
        rec["left"] = np.where(leaf, 0, trees["left"][part] - root)
        rec["right"] = np.where(leaf, 0, trees["right"][part] - root)
        rec["is_leaf"] = leaf
        records.append(rec)
    if len(_COMPILED) >= MAX_COMPILED:
        _COMPILED.clear()
    _COMPILED[id(trees)] = (trees, records)
    return _predict_from_raw_data, records


# -- fitting, once per fleet and cutoff -----------------------------------------------


_FITS: OrderedDict[tuple[Any, ...], dict[str, np.ndarray] | None] = OrderedDict()
_STATS = {"fits": 0, "hits": 0}


def cache_stats() -> dict[str, int]:
    """Global fits done and reused in this process (for tests and benchmarks)."""
    return dict(_STATS)


def clear_cache() -> None:
    """Forget every fitted tree set and fleet of this process."""
    _FITS.clear()
    _COMPILED.clear()
    _FLEETS.clear()
    _STATS.update(fits=0, hits=0)


def _fit_trees(
    fleet: Fleet, step: pd.Timedelta, cutoff: pd.Timestamp, q: float, settings: tuple[Any, ...]
) -> dict[str, np.ndarray] | None:
    """The tree set for quantile ``q`` at ``cutoff``, fitted on first use (None: too few rows)."""
    key = (fleet.token, int(step.value), int(cutoff.value), q, settings)
    if key in _FITS:
        _FITS.move_to_end(key)
        _STATS["hits"] += 1
        return _FITS[key]
    from sklearn.ensemble import HistGradientBoostingRegressor
    from threadpoolctl import threadpool_limits

    max_iter, learning_rate, leaves, min_leaf, l2, max_rows, seed = settings
    X, target = training_rows(fleet, step, cutoff, max_rows, seed)
    # A feature never observed before this cutoff (the weekly lag in a fleet's first
    # week) is made constant: scikit-learn cannot bin a column of NaN alone.
    X[:, ~np.isfinite(X).any(axis=0)] = 0.0
    trees = None
    if len(target) >= 2 * min_leaf:
        model = HistGradientBoostingRegressor(
            loss="quantile",
            quantile=q,
            max_iter=max_iter,
            learning_rate=learning_rate,
            max_leaf_nodes=leaves,
            min_samples_leaf=min_leaf,
            l2_regularization=l2,
            early_stopping=False,
            random_state=seed,
        )
        # One thread: deterministic sums, and no OpenMP threads spinning against the
        # other worker processes of a fleet refit.
        with threadpool_limits(limits=1, user_api="openmp"):
            model.fit(X, target)
        trees = compact_trees(model)
        for array in trees.values():
            array.flags.writeable = False  # shared by every series of the fleet
    _STATS["fits"] += 1
    _FITS[key] = trees
    while len(_FITS) > MAX_CACHED_FITS:
        _FITS.popitem(last=False)
    return trees


class GlobalBoosting(BaseEstimator):
    """Quantile GBM trained over the whole fleet in context; see the module docstring.

    ``quantiles`` are the quantile models trained; others asked at predict time are
    interpolated between them (clamped at the ends). Forecasts are direct for a day
    and then day by day, each day's lags filled with the median of the day before.
    """

    name = "global_gbm"

    def label(self) -> str:
        return "global_gbm_median" if tuple(self.quantiles) == (0.5,) else "global_gbm"

    def __deepcopy__(self, memo: dict[int, Any]) -> GlobalBoosting:
        """A deep copy that shares the fitted trees (read-only, the same for the whole
        fleet): the model store copies every model it keeps, and a refit of a thousand
        series would otherwise hold a thousand copies of the same trees."""
        twin = type(self).__new__(type(self))
        memo[id(self)] = twin
        for key, value in vars(self).items():
            twin.__dict__[key] = value if key == "trees_" else copy.deepcopy(value, memo)
        return twin

    def __init__(
        self,
        quantiles: tuple[float, ...] = (0.1, 0.5, 0.9),
        max_iter: int = 150,
        learning_rate: float = 0.08,
        max_leaf_nodes: int = 31,
        min_samples_leaf: int = 40,
        l2_regularization: float = 1.0,
        max_rows: int = 200_000,
        min_siblings: int = 2,
        seed: int = 0,
    ) -> None:
        self.quantiles = quantiles
        self.max_iter = max_iter
        self.learning_rate = learning_rate
        self.max_leaf_nodes = max_leaf_nodes
        self.min_samples_leaf = min_samples_leaf
        self.l2_regularization = l2_regularization
        self.max_rows = max_rows
        self.min_siblings = min_siblings
        self.seed = seed

    def check_settings(self) -> None:
        whole = {
            "max_iter": (self.max_iter, 1),
            "max_leaf_nodes": (self.max_leaf_nodes, 2),
            "min_samples_leaf": (self.min_samples_leaf, 1),
            "max_rows": (self.max_rows, 1000),
            "min_siblings": (self.min_siblings, 1),
            "seed": (self.seed, 0),
        }
        for key, (value, least) in whole.items():
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise BadInputError(
                    f"The '{key}' parameter of GlobalBoosting must be an int >= {least}. "
                    f"Got {value!r} instead."
                )
        numbers: tuple[tuple[str, Any], ...] = (
            ("learning_rate", self.learning_rate),
            ("l2_regularization", self.l2_regularization),
        )
        for key, number in numbers:
            value = number
            low_ok = isinstance(value, int | float) and (
                value > 0 if key == "learning_rate" else value >= 0
            )
            if isinstance(value, bool) or not low_ok:
                raise BadInputError(
                    f"The '{key}' parameter of GlobalBoosting must be a number "
                    f"{'> 0' if key == 'learning_rate' else '>= 0'}. Got {value!r} instead."
                )

    def _settings(self) -> tuple[Any, ...]:
        return (
            self.max_iter,
            float(self.learning_rate),
            self.max_leaf_nodes,
            self.min_samples_leaf,
            float(self.l2_regularization),
            self.max_rows,
            self.seed,
        )

    def _problem(
        self, fleet: Fleet | None, step: pd.Timedelta, last: pd.Timestamp, name: str
    ) -> str | None:
        if fleet is None:
            return "no fleet context (a lone series)"
        cutoff = fleet.cutoff(step, last)
        siblings = 0 if cutoff is None else fleet.siblings(step, cutoff, name)
        if siblings < self.min_siblings:
            return (
                f"the fleet has {siblings} other series with a day of history by the cutoff "
                f"(needs {self.min_siblings})"
            )
        return None

    def fit(self, history: pd.Series) -> GlobalBoosting:
        self.check_settings()
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        self.trained_quantiles_ = check_quantiles(self.quantiles, "GlobalBoosting")
        m = steps_per(DAY, self.step_)
        self.m_day_ = m
        self.trees_: list[dict[str, np.ndarray]] = []
        self.cutoff_: pd.Timestamp | None = None
        fleet = current_fleet()
        problem = self._problem(fleet, self.step_, self.last_timestamp_, str(y.name))
        if problem is None and len(values) <= m:
            problem = f"{len(values)} steps is under a day plus a step for the one-day lag"
        if problem is not None or fleet is None:
            self._fall_back_to_naive(y, f"global model not fitted: {problem}")
            return self
        cutoff = fleet.cutoff(self.step_, self.last_timestamp_)
        assert cutoff is not None  # a fleet with siblings has a newest timestamp
        trees = [
            _fit_trees(fleet, self.step_, cutoff, q, self._settings())
            for q in self.trained_quantiles_
        ]
        if any(t is None for t in trees):
            self._fall_back_to_naive(
                y, "global model not fitted: too few fleet rows before the cutoff"
            )
            return self
        self.delegate_ = None
        self.trees_ = [t for t in trees if t is not None]
        self.cutoff_ = cutoff
        self.recent_ = values[-(SCALE_DAYS + 1) * m :].copy()
        return self

    def backtest_medians(self, y: pd.Series, origins: Sequence[int], horizon: int) -> np.ndarray:
        """Median forecasts at each origin from the median model alone (the others are not
        needed, and at each backtest cutoff only the median model is fitted)."""
        median_only = clone(self).set_params(quantiles=(0.5,))
        return BaseEstimator.backtest_medians(median_only, y, origins, horizon)

    def update(self, history: pd.Series) -> GlobalBoosting:
        """New lag values without retraining: the fleet's trees stay, the inputs move."""
        if not getattr(self, "trees_", None) or self.delegate_ is not None:
            return self.fit(history)
        y = self._prepare(history)
        values = y.to_numpy(dtype=float)
        if len(values) <= self.m_day_:
            return self.fit(history)
        self.recent_ = values[-(SCALE_DAYS + 1) * self.m_day_ :].copy()
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        horizon, qs = self._predict_args(horizon, quantiles)
        if self.delegate_ is not None:
            return self.delegate_.predict(horizon, qs)
        m = self.m_day_
        base = len(self.recent_)
        values = np.concatenate([self.recent_, np.full(horizon, np.nan)])
        start_ns = int((self.last_timestamp_ - (base - 1) * self.step_).value)
        levels = self.trained_quantiles_
        trained = np.empty((horizon, len(levels)))
        median = int(np.argmin([abs(q - 0.5) for q in levels]))
        # A day at a time: each day's lags and recent level are the day before (observed
        # or, beyond the first day, this model's median).
        for start in range(0, horizon, m):
            stop = min(horizon, start + m)
            targets = np.arange(base + start, base + stop)
            origins = np.full(len(targets), base - 1 + start)
            X, scale = feature_rows(values, start_ns, self.step_, targets, origins, m)
            for j, trees in enumerate(self.trees_):
                trained[start:stop, j] = predict_trees(trees, X) * scale
            values[base + start : base + stop] = trained[start:stop, median]
        trained = np.sort(trained, axis=1)
        out = np.column_stack([interpolate_levels(levels, trained, q) for q in qs])
        return self._frame(out, qs, horizon)


def fleet_of_history(history: Mapping[str, pd.Series]) -> Fleet | None:
    """The fleet of a history forecast together (None for fewer than two usable series)."""
    fleet = Fleet.of(history, skip_bad=True)
    return fleet if len(fleet) > 1 else None


register("global_gbm", GlobalBoosting)
# The median model alone (a method to name, e.g. inside a combination, whose bands come from
# elsewhere); ``auto`` never considers either (forecaster.selection.auto_candidates).
register("global_gbm_median", lambda: GlobalBoosting(quantiles=(0.5,)))
