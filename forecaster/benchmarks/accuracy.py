"""The forecasting benchmark: accuracy by group on public traces, and speed on many series.

Accuracy protocol (fixed, so numbers stay comparable between versions): every
series of at least 14 days in the public traces folder is resampled to 15-minute
means; the test period is the last 7 days (the last 4 for series of 14 days or
less); origins every 24 h at 00:00 inside it; at each origin every method trains
on everything before it (or, with ``max_history``, on the last that much of it:
the short-history benchmark, a metrics store's retention) and forecasts the next
24 h (96 steps); MASE and pinball loss are scaled by the MAE of the one-day
seasonal naive forecast on that origin's training data; NaN actuals are ignored.

Every method sees the same history at every origin: the rivals with a history
window of their own (AutoETS, MSTL and Theta keep the last 28 days by default)
are given one that covers all of the training data they are handed
(:func:`rival_window`), and Prophet and the seasonal naive models take it whole.

Methods: tiercast's automatic selection (``auto``, or any registered estimator
under test) against six rivals: seasonal naive 1 day and 7 days (the weekly one
only where every origin has 14 days of training), Prophet with default settings,
and the statsmodels AutoETS, MSTL and Theta models of :mod:`forecaster.statistical`.

Scoring by group: the traces README names each file's group (one trace and
period, an independent source); :func:`trace_group` maps paths to those groups.
A group's ratio is tiercast's MASE, averaged over the group's series, over that
of the rival best on the group (averaged the same way); the headline is the mean
over groups, so the 16 Helios tenants weigh as much as one web server. The
uncertainty (:func:`bootstrap_mean_ratio`) resamples test days, the same days
for every method. ``--groups`` restricts the run, so that variants can be chosen
on some groups and confirmed on the others.

Rival forecasts do not change when tiercast does: :class:`ForecastCache` keeps
them on disk, keyed by series values, method, origins, :data:`RIVALS_VERSION`
and the libraries' versions, so re-running the benchmark only recomputes the
method under test.

Every method, the one under test included, sees only its own series, as a live cycle
forecasts each signal alone: ``auto`` is scored with the candidates a cycle gives it
(:func:`forecaster.selection.auto_candidates`; no global model).

Horizon coverage (:func:`horizon_coverage`): the method under test backtested at
a 7-day horizon from 7 daily origins ending a week before the end of each
series; the share of actuals at or below q0.9 per horizon day, by group.

Speed: ``count`` synthetic series of 14 days at a 15-minute step, each fitted and
forecast 24 h ahead with ``auto`` from scratch (no model store), against the
same loop with the one-day seasonal naive model measured in the same run.
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.backtesting import Backtest, backtest, naive_scale, protocol_origins
from forecaster.errors import BadInputError, DataError
from forecaster.estimators import BaseEstimator, make
from forecaster.series import read_history_csv, regularize
from forecaster.synthetic import seasonal_series

STEP = pd.Timedelta(minutes=15)
DAY = pd.Timedelta(days=1)
HORIZON_STEPS = 96
QUANTILES = (0.1, 0.5, 0.9)
CHOOSE = ("helios_earth", "aws_cloudwatch", "nasa_http", "servegen", "nab_twitter2015")
"""The groups rules are chosen on (docs/benchmarks.md, the protocol of this round); the
other groups only confirm."""
BASELINES = (
    "seasonal_naive_1d",
    "seasonal_naive_7d",
    "prophet_default",
    "ets_auto",
    "mstl",
    "theta",
)
"""The rivals: what a user would try first, and the library models they reach for."""

STATSFORECAST_RIVALS: dict[str, str] = {
    "statsforecast_mstl": "mstl",
    "statsforecast_autoets": "autoets",
    "statsforecast_autotheta": "autotheta",
}
"""Opt-in rivals run by statsforecast itself in another Python (:class:`StatsforecastServer`):
MSTL with the daily season (and the weekly one from two weeks of history) and an AutoETS
trend, AutoETS and AutoTheta with the daily season, as a user would call them."""

MIN_SPAN_DAYS = 14
"""Series shorter than this (rounded to whole days) are left out of the benchmark."""

GROUP_BY_FOLDER: dict[str, str] = {
    "servegen": "servegen",
    "azure_vm2019": "azure_vm2019",
    "helios_earth": "helios_earth",
    "bitbrains_rnd": "bitbrains",
    "nasa_http": "nasa_http",
    "pwa_nasa_ipsc": "nasa_ipsc",
    "bsc_marenostrum3": "marenostrum3",
}
"""Folder -> group, as the traces README names them (``nab`` is split by file)."""

ORIGINAL_GROUPS: tuple[str, ...] = ("servegen", "azure_vm2019", "nyc_taxi", "aws_cloudwatch")
"""The groups of the five series the earlier benchmark used (and earlier rounds tuned on)."""

TARGET_MEAN_RATIO = 0.90
TARGET_GROUP_RATIO = 1.0
TIERCAST = "tiercast "
"""Prefix of the rows of the method under test ("tiercast auto"); the others are rivals."""
COVERAGE_RANGE = (0.85, 0.95)
HORIZON_COVERAGE_RANGE = (0.80, 0.97)
TARGET_SPEED_S = 60.0


def trace_group(relative: str) -> str:
    """The group of a trace path relative to the traces folder (see the traces README).

    ``nab`` holds two groups: ``nyc_taxi`` and the AWS CloudWatch negative controls.
    A folder the README does not name yet is its own group.
    """
    folder, _, name = relative.replace("\\", "/").partition("/")
    if folder == "nab":
        if name.startswith("nyc_taxi"):
            return "nyc_taxi"
        if name.startswith("aws_"):
            return "aws_cloudwatch"
    return GROUP_BY_FOLDER.get(folder, folder)


def load_bench_series(path: Path) -> pd.Series:
    """One trace as 15-minute means (the protocol's resolution)."""
    history = read_history_csv(path)
    if len(history) != 1:
        raise DataError(f"benchmark series {str(path)!r} must hold one series, has {len(history)}")
    y = next(iter(history.values()))
    return regularize(y, STEP).rename(path.stem)


def span_days(y: pd.Series) -> int:
    return round((y.index[-1] - y.index[0]) / DAY) if len(y) > 1 else 0


@dataclass
class BenchSeries:
    relative: str
    group: str
    y: pd.Series


def discover(traces: Path, groups: Sequence[str] | None = None) -> list[BenchSeries]:
    """Every CSV under ``traces`` of at least :data:`MIN_SPAN_DAYS`, in path order.

    ``groups`` keeps only those groups (None: all).
    """
    out = []
    for path in sorted(traces.rglob("*.csv")):
        relative = path.relative_to(traces).as_posix()
        group = trace_group(relative)
        if groups is not None and group not in groups:
            continue
        y = load_bench_series(path)
        if span_days(y) >= MIN_SPAN_DAYS:
            out.append(BenchSeries(relative, group, y))
    return out


@dataclass
class BenchRow:
    series: str
    method: str
    mase: float
    pinball_q09: float
    coverage_q09: float
    fit_seconds: float
    day_errors: list[float] = field(default_factory=list)
    """Per origin (test day): the sum of scaled absolute errors over its observed steps."""
    day_counts: list[int] = field(default_factory=list)
    """Per origin: the number of observed steps (MASE is sum(day_errors) / sum(day_counts))."""
    group: str = ""
    """The series' group; empty means a group of its own."""
    day_dates: list[str] = field(default_factory=list)
    """Per origin: its calendar date (``2000-01-24``), so that series of a group that share
    test days are resampled together (:func:`bootstrap_mean_ratio`)."""
    day_below: list[int] = field(default_factory=list)
    """Per origin: how many observed actuals were at or below the q0.9 forecast..."""
    day_observed: list[int] = field(default_factory=list)
    """...out of this many (q0.9 coverage is sum(day_below) / sum(day_observed)), so that
    the bootstrap gives coverage an interval over the same draws of days."""
    cpu_seconds: float = math.nan
    """Process CPU seconds of all its fits and forecasts (NaN when not measured, as for a
    rival read from a cache written before CPU time was kept)."""
    chosen: list[str] = field(default_factory=list)
    """Per origin: the fitted model's label (for ``auto``, the candidate or combination chosen)."""

    @classmethod
    def of(cls, series: str, method: str, bt: Backtest, group: str = "") -> BenchRow:
        scaled = np.abs(bt.actuals - bt.point()) / bt.scales[:, None]
        finite = np.isfinite(scaled)
        observed = ~np.isnan(bt.actuals)
        below = observed & (bt.actuals <= bt.column(0.9)) if 0.9 in bt.quantiles else None
        return cls(
            series,
            method,
            bt.mase(),
            bt.scaled_pinball(0.9),
            bt.coverage(0.9),
            bt.fit_seconds,
            day_errors=np.where(finite, scaled, 0.0).sum(axis=1).tolist(),
            day_counts=finite.sum(axis=1).tolist(),
            group=group,
            day_dates=[f"{pd.Timestamp(o):%Y-%m-%d}" for o in bt.origins],
            day_below=below.sum(axis=1).tolist() if below is not None else [],
            day_observed=observed.sum(axis=1).tolist() if below is not None else [],
            cpu_seconds=bt.cpu_seconds,
            chosen=list(bt.labels),
        )


def rival_window(y: pd.Series, max_history: pd.Timedelta | None = None) -> str:
    """The history window given to rivals that keep one of their own: all they are handed.

    ``max_history`` when set (every origin's training is cut to it), else the whole
    span of ``y`` plus a day, so no origin's training is cut by the model itself.
    """
    span = max_history if max_history is not None else (y.index[-1] - y.index[0]) + DAY
    return f"{math.ceil(span / pd.Timedelta(seconds=1))}s"


def _factory(method: str, window: str | None = None) -> Callable[[], BaseEstimator]:
    """``make(method)``, with ``window`` as its history window where it has one."""

    def build() -> BaseEstimator:
        est = make(method)
        if window is not None and "window" in est.get_params():
            est.set_params(window=window)
        return est

    return build


def weekly_naive_applies(
    y: pd.Series, origins: Sequence[pd.Timestamp], max_history: pd.Timedelta | None = None
) -> bool:
    """The protocol runs the weekly naive rival only with 14 days of training at every origin."""
    first = origins[0] - y.index[0]
    if max_history is not None:
        first = min(first, max_history)
    return first >= pd.Timedelta(days=14)


def history_text(max_history: pd.Timedelta | None) -> str:
    """How much history each origin trains on, in words (for the benchmark's header)."""
    if max_history is None:
        return "all the history before each origin"
    days = max_history / DAY
    span = f"{days:g} days" if days >= 1 else str(max_history)
    return f"the last {span} before each origin (--max-history)"


RIVALS_VERSION = "2"
"""Version of the rivals' forecasts: bump it with any change to what a rival forecasts
(its model code, the protocol or the backtest), so the cache recomputes them. 2: the
statistical rivals see all the training history (their own 28-day window lifted)."""


def code_version() -> str:
    """The cache's version of the rivals: :data:`RIVALS_VERSION` and the libraries' versions."""
    digest = hashlib.sha256(f"rivals={RIVALS_VERSION}".encode())
    for package in ("statsmodels", "prophet", "numpy", "pandas", "scipy"):
        try:
            digest.update(f"{package}={metadata.version(package)}".encode())
        except metadata.PackageNotFoundError:
            digest.update(f"{package}=absent".encode())
    return digest.hexdigest()[:16]


class ForecastCache:
    """Backtests of the rivals on disk, one ``.npz`` per (series values, method, origins, code)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.version = code_version()

    def key(
        self,
        y: pd.Series,
        method: str,
        origins: Sequence[pd.Timestamp],
        horizon: int,
        max_history: pd.Timedelta | None = None,
    ) -> str:
        digest = hashlib.sha256()
        digest.update(pd.DatetimeIndex(y.index).as_unit("ns").asi8.tobytes())
        digest.update(y.to_numpy(dtype=float).tobytes())
        meta = [str(y.name), method, [o.isoformat() for o in origins], horizon, QUANTILES]
        if max_history is not None:  # absent for full history
            meta.append(f"max_history={max_history.total_seconds():g}s")
        digest.update(json.dumps([meta, self.version]).encode())
        return f"{method}-{digest.hexdigest()[:24]}"

    def get(
        self,
        y: pd.Series,
        method: str,
        origins: Sequence[pd.Timestamp],
        horizon: int,
        max_history: pd.Timedelta | None = None,
    ) -> Backtest | None:
        path = self.root / f"{self.key(y, method, origins, horizon, max_history)}.npz"
        if not path.is_file():
            return None
        with np.load(path) as data:
            return Backtest(
                label=method,
                origins=list(origins),
                quantiles=list(QUANTILES),
                forecasts=data["forecasts"],
                actuals=data["actuals"],
                scales=data["scales"],
                fit_seconds=float(data["fit_seconds"]),
                cpu_seconds=float(data["cpu_seconds"]) if "cpu_seconds" in data else math.nan,
            )

    def put(
        self,
        y: pd.Series,
        bt: Backtest,
        method: str,
        horizon: int,
        max_history: pd.Timedelta | None = None,
    ) -> None:
        self.root.mkdir(parents=True, exist_ok=True)
        path = self.root / f"{self.key(y, method, bt.origins, horizon, max_history)}.npz"
        tmp = path.with_suffix(".tmp.npz")
        np.savez(
            tmp,
            forecasts=bt.forecasts,
            actuals=bt.actuals,
            scales=bt.scales,
            fit_seconds=np.array(bt.fit_seconds),
            cpu_seconds=np.array(bt.cpu_seconds),
        )
        tmp.replace(path)


WORKER = Path(__file__).with_name("statsforecast_worker.py")


class StatsforecastServer:
    """statsforecast's models in another Python (``python``), one process for a whole run.

    statsforecast 2.1.1 cannot be imported beside pandas 3 (see :mod:`forecaster.statistical`),
    so the benchmark sends each training window to :mod:`forecaster.benchmarks.statsforecast_worker`
    and reads back the forecast and the CPU seconds it took there.
    """

    def __init__(self, python: str) -> None:
        try:
            self.proc = subprocess.Popen(
                [python, str(WORKER)],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                text=True,
            )
        except OSError as exc:
            raise BadInputError(
                f"--statsforecast-python {python!r}: cannot start ({exc})"
            ) from None
        hello = self._read()
        if "version" not in hello:
            self.close()
            raise BadInputError(
                f"--statsforecast-python {python!r}: statsforecast does not import there"
            )
        self.version = str(hello["version"])

    def _read(self) -> dict:
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        return json.loads(line) if line.strip() else {}

    def forecast(self, model: str, season: list[int], h: int, y: np.ndarray) -> dict:
        """The worker's answer for one window (``mean``, ``lo``, ``hi``, ``cpu``, or ``error``)."""
        assert self.proc.stdin is not None
        request = {"model": model, "season": season, "h": h, "y": y.tolist()}
        self.proc.stdin.write(json.dumps(request) + "\n")
        self.proc.stdin.flush()
        return self._read() or {"error": "the statsforecast worker stopped"}

    def close(self) -> None:
        if self.proc.poll() is None:
            if self.proc.stdin is not None:
                self.proc.stdin.close()
            self.proc.wait(timeout=30)


def statsforecast_python(given: str | None) -> str | None:
    """The interpreter for the statsforecast rivals: ``given``, else this one if it has statsforecast."""
    if given:
        return given
    try:
        metadata.version("statsforecast")
    except metadata.PackageNotFoundError:
        return None
    return sys.executable


def statsforecast_backtest(
    server: StatsforecastServer,
    method: str,
    y: pd.Series,
    origins: Sequence[pd.Timestamp],
    max_history: pd.Timedelta | None = None,
) -> Backtest:
    """The protocol's backtest of one statsforecast rival: each origin's training window
    (gaps filled linearly, as the statsmodels rivals do) sent to ``server``; q0.1 and q0.9
    are the bounds of its 80% interval, the median its mean, clipped at zero for a
    non-negative series as every estimator's forecast is."""
    values = y.to_numpy(dtype=float)
    m = round(DAY / STEP)
    forecasts = np.full((len(origins), HORIZON_STEPS, len(QUANTILES)), np.nan)
    actuals = np.full((len(origins), HORIZON_STEPS), np.nan)
    scales = np.ones(len(origins))
    cpu, notes = 0.0, []
    for i, origin in enumerate(origins):
        cut = int(y.index.searchsorted(origin))
        first = 0 if max_history is None else int(y.index.searchsorted(origin - max_history))
        train = values[first:cut]
        seen = np.flatnonzero(np.isfinite(train))
        if seen.size < 2:
            raise DataError(f"series {y.name!r}: under 2 observations before origin {origin}")
        scales[i] = naive_scale(train, m)
        train = train[seen[0] :]
        ok = np.isfinite(train)
        filled = np.interp(np.arange(len(train)), np.flatnonzero(ok), train[ok])
        season = [m, 7 * m] if len(filled) >= 14 * m else [m]
        reply = server.forecast(STATSFORECAST_RIVALS[method], season, HORIZON_STEPS, filled)
        if "error" in reply:  # as an estimator whose fit fails: the daily seasonal naive
            notes.append(f"{origin}: {reply['error']}; daily seasonal naive used")
            block = np.repeat(np.resize(filled[-m:], HORIZON_STEPS)[:, None], 3, axis=1)
        else:
            cpu += float(reply["cpu"])
            block = np.column_stack([reply["lo"], reply["mean"], reply["hi"]])
        block = np.maximum.accumulate(block, axis=1)
        if np.nanmin(train) >= 0:
            block = np.clip(block, 0.0, None)
        forecasts[i] = block
        index = pd.date_range(origin, periods=HORIZON_STEPS, freq=STEP)
        actuals[i] = y.reindex(index).to_numpy(dtype=float)
    return Backtest(
        label=method,
        origins=list(origins),
        quantiles=list(QUANTILES),
        forecasts=forecasts,
        actuals=actuals,
        scales=scales,
        fit_seconds=cpu,
        notes=notes,
        cpu_seconds=cpu,
    )


def accuracy_rows(
    y: pd.Series,
    methods: Sequence[str] = ("auto", *BASELINES),
    group: str = "",
    cache: ForecastCache | None = None,
    max_history: pd.Timedelta | None = None,
    statsforecast: StatsforecastServer | None = None,
) -> list[BenchRow]:
    """Run the protocol on one series for each method that applies to it.

    Rows of the rivals carry their names (and come from ``cache`` when it holds
    them); any other method is the one under test, labelled ``tiercast <name>``.
    ``max_history`` cuts every method's training at every origin to that span
    (None: all the history before the origin); the rivals see exactly what the
    method under test sees (:func:`rival_window`). The statsforecast rivals
    (:data:`STATSFORECAST_RIVALS`) run in ``statsforecast``, never from the cache, so
    that their CPU time is of the same run as the method under test's.
    """
    origins = protocol_origins(y)
    window = rival_window(y, max_history)
    rows = []
    for method in methods:
        if method == "seasonal_naive_7d" and not weekly_naive_applies(y, origins, max_history):
            continue  # the protocol only runs the weekly baseline with 14 days of training
        if method in STATSFORECAST_RIVALS:
            if statsforecast is None:
                raise BadInputError(f"{method}: no statsforecast server (--statsforecast-python)")
            sf = statsforecast_backtest(statsforecast, method, y, origins, max_history)
            rows.append(BenchRow.of(str(y.name), method, sf, group))
            continue
        rival = method in BASELINES
        bt = cache.get(y, method, origins, HORIZON_STEPS, max_history) if cache and rival else None
        if bt is None:
            factory = _factory(method, window if rival else None)
            bt = backtest(
                factory,
                y,
                origins,
                HORIZON_STEPS,
                QUANTILES,
                label=method,
                max_history=max_history,
            )
            if cache and rival:
                cache.put(y, bt, method, HORIZON_STEPS, max_history)
        label = method if rival else TIERCAST + method
        rows.append(BenchRow.of(str(y.name), label, bt, group))
    return rows


@dataclass
class GroupScore:
    group: str
    series: int
    ratio: float
    """tiercast's mean MASE over the group's series, over that of the group's best rival."""
    best_rival: str
    """The rival with the lowest mean MASE over the group's series."""
    coverage: float
    """Mean q0.9 coverage of tiercast over the group's series."""
    mase: dict[str, float]
    """Mean MASE over the group's series, per method (tiercast's under its row label)."""


@dataclass
class Summary:
    ratios: dict[str, float]
    """tiercast MASE over the best rival's MASE, per series (shown, not scored: a rival
    with a MASE near zero on one series makes its ratio arbitrarily large)."""
    coverage: dict[str, float]
    groups: dict[str, GroupScore] = field(default_factory=dict)

    @property
    def mean_ratio(self) -> float:
        """Mean over groups of the groups' ratios."""
        if self.groups:
            return float(np.mean([g.ratio for g in self.groups.values()]))
        return float(np.mean(list(self.ratios.values())))

    def verdicts(self) -> list[str]:
        lo, hi = COVERAGE_RANGE
        worst = max(self.groups.values(), key=lambda g: g.ratio)
        bad_cov = [g.group for g in self.groups.values() if not lo <= g.coverage <= hi]
        mean_ok = self.mean_ratio <= TARGET_MEAN_RATIO
        above = [g.group for g in self.groups.values() if g.ratio > TARGET_GROUP_RATIO]
        return [
            f"mean over {len(self.groups)} groups of tiercast's MASE over the group's best "
            f"rival's {self.mean_ratio:.3f} (target <= {TARGET_MEAN_RATIO}): "
            f"{'met' if mean_ok else 'NOT met'}",
            f"worst group {worst.group} ratio {worst.ratio:.3f} (target: none above "
            f"{TARGET_GROUP_RATIO}): "
            + ("met" if not above else f"NOT met ({len(above)}: {', '.join(above)})"),
            f"q0.9 coverage in [{lo}, {hi}] in every group: "
            + ("met" if not bad_cov else "NOT met (" + ", ".join(bad_cov) + ")"),
        ]


def _by_series(rows: Sequence[BenchRow]) -> list[tuple[str, str, list[BenchRow], list[BenchRow]]]:
    """Per series, in order: its group, the rows of the method under test and the rivals'."""
    out = []
    for series in dict.fromkeys(r.series for r in rows):
        mine = [r for r in rows if r.series == series and r.method.startswith(TIERCAST)]
        base = [r for r in rows if r.series == series and r.method in BASELINES]
        group = next((r.group for r in rows if r.series == series and r.group), series)
        out.append((series, group, mine, base))
    return out


def _group_ratio(mase: dict[str, float]) -> tuple[float, str]:
    """tiercast's mean MASE over the best rival's, and that rival, from a group's mean MASEs."""
    mine = next(v for k, v in mase.items() if k.startswith(TIERCAST))
    rivals = {k: v for k, v in mase.items() if k in BASELINES}
    best = min(rivals, key=lambda k: rivals[k])
    return mine / rivals[best], best


def summarize(rows: Sequence[BenchRow]) -> Summary:
    """Per-series ratios and coverage, and the group scores.

    A group's ratio is tiercast's mean MASE over its series divided by the mean MASE
    of the rival that is best over the group (rivals that did not run on every
    series of the group are left out of it, as the weekly naive model is on short
    series). A ratio of means: a series on which some rival is almost perfect (an
    idle tenant) weighs by its error, not by the inverse of a tiny denominator.
    """
    ratios, coverage, group_of = {}, {}, {}
    for series, group, mine, base in _by_series(rows):
        if mine and base:
            ratios[series] = mine[0].mase / max(min(r.mase for r in base), 1e-12)
            coverage[series] = mine[0].coverage_q09
            group_of[series] = group
    groups: dict[str, GroupScore] = {}
    for group in dict.fromkeys(group_of.values()):
        members = [s for s, g in group_of.items() if g == group]
        per_method: dict[str, list[float]] = {}
        for r in rows:
            if r.series in members:
                per_method.setdefault(r.method, []).append(r.mase)
        mase = {m: float(np.mean(v)) for m, v in per_method.items() if len(v) == len(members)}
        ratio, best = _group_ratio(mase)
        groups[group] = GroupScore(
            group,
            len(members),
            ratio,
            best,
            float(np.mean([coverage[s] for s in members])),
            mase,
        )
    return Summary(ratios, coverage, groups)


@dataclass
class Uncertainty:
    """How far the mean ratio could move with other test days of the same series."""

    standard_error: float
    """Half the central 68% range of the draws (robust to a few extreme draws)."""
    low: float
    """5th percentile of the resampled mean ratios."""
    high: float
    """95th percentile."""
    share_within_target: float
    """Share of the resampled mean ratios at or below the target."""
    draws: int
    groups: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per group, the 5th and 95th percentiles of its ratio over the same draws."""
    coverage: dict[str, tuple[float, float]] = field(default_factory=dict)
    """Per group, the 5th and 95th percentiles of tiercast's q0.9 coverage over the same
    draws (the mean over the group's series, as :func:`summarize` takes it)."""

    def line(self) -> str:
        return (
            f"uncertainty of the mean ratio (bootstrap over each group's calendar test days, "
            f"{self.draws} draws): standard error {self.standard_error:.3f}, "
            f"90% interval {self.low:.3f} to {self.high:.3f}; "
            f"{self.share_within_target:.0%} of the draws at or below {TARGET_MEAN_RATIO}"
        )

    def coverage_line(self, summary: Summary) -> str:
        """The groups whose q0.9 coverage is outside :data:`COVERAGE_RANGE`, each with its 90%
        interval, and how many of them are outside with the whole interval: with one series
        and seven test days, one day of an event moves a group's coverage by a seventh."""
        lo_ok, hi_ok = COVERAGE_RANGE
        outside = [g for g in summary.groups.values() if not lo_ok <= g.coverage <= hi_ok]
        if not outside:
            return f"q0.9 coverage in [{lo_ok}, {hi_ok}] in every group"
        parts = []
        clear = 0
        for g in sorted(outside, key=lambda g: g.coverage):
            lo, hi = self.coverage.get(g.group, (math.nan, math.nan))
            clear += hi < lo_ok or lo > hi_ok
            parts.append(f"{g.group} {g.coverage:.3f} (90% {lo:.3f} to {hi:.3f})")
        return (
            f"q0.9 coverage outside [{lo_ok}, {hi_ok}]: " + ", ".join(parts) + f"; {clear} of "
            f"{len(outside)} with the whole 90% interval outside"
        )

    def groups_line(self, summary: Summary) -> str:
        """The groups above the per-group target, each with its 90% interval, and how many
        of them are above it in most draws rather than by the luck of their test days."""
        above = [g for g in summary.groups.values() if g.ratio > TARGET_GROUP_RATIO]
        if not above:
            return f"no group above {TARGET_GROUP_RATIO}"
        parts = []
        clear = 0
        for g in sorted(above, key=lambda g: -g.ratio):
            lo, hi = self.groups.get(g.group, (math.nan, math.nan))
            clear += lo > TARGET_GROUP_RATIO
            parts.append(f"{g.group} {g.ratio:.3f} (90% {lo:.3f} to {hi:.3f})")
        return (
            f"groups above {TARGET_GROUP_RATIO}: " + ", ".join(parts) + f"; {clear} of "
            f"{len(above)} with the whole 90% interval above {TARGET_GROUP_RATIO}"
        )


def bootstrap_mean_ratio(
    rows: Sequence[BenchRow], draws: int = 2000, seed: int = 0
) -> Uncertainty | None:
    """Resample each series' test days with replacement and recompute the mean ratio over groups.

    Each draw picks, per group, as many calendar test days as the group's series have
    between them, with replacement, the same days for every method (so a day that is hard
    for all stays paired) and for every series of the group that has that day: the
    Helios tenants share one test week, and drawing their days apart would make the
    group's interval narrower than its data. Each series' MASE in a draw is from its
    picked days (a series none of whose days was picked sits the draw out), then each
    group's ratio as :func:`summarize` does (tiercast's mean MASE over the group's best
    rival's in that draw) and their mean over groups. Rows without dates are drawn day by
    day on their own. The spread of the draws is what other weeks of the same series could
    have given: a change smaller than the standard error is not measurable here. The same
    draws give each group's q0.9 coverage an interval (rows that carry per-day counts of
    actuals at or below q0.9). None when the rows carry no per-day errors.
    """
    rng = np.random.default_rng(seed)
    ratios = []
    intervals: dict[str, tuple[float, float]] = {}
    covered: dict[str, list[np.ndarray]] = {}
    for group, series in drawable_groups(rows).items():
        ratio, shares = group_draws(series, day_weights(series, rng, draws))
        if shares is not None:
            covered[group] = shares
        ratios.append(ratio)
        finite = ratio[np.isfinite(ratio)]
        if finite.size:
            intervals[group] = (
                float(np.percentile(finite, 5)),
                float(np.percentile(finite, 95)),
            )
    if not ratios:
        return None
    coverage: dict[str, tuple[float, float]] = {}
    for group, shares in covered.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            mean = np.nanmean(shares, axis=0)
        mean = mean[np.isfinite(mean)]
        if mean.size:
            coverage[group] = (float(np.percentile(mean, 5)), float(np.percentile(mean, 95)))
    means = np.mean(ratios, axis=0)
    means = means[np.isfinite(means)]
    # Half the central 68% range: the standard error of a normal spread, but not blown up
    # by the rare draw made only of days on which some rival was almost perfect.
    p16, p84 = np.percentile(means, [15.87, 84.13])
    return Uncertainty(
        standard_error=float((p84 - p16) / 2),
        low=float(np.percentile(means, 5)),
        high=float(np.percentile(means, 95)),
        share_within_target=float(np.mean(means <= TARGET_MEAN_RATIO)),
        draws=len(means),
        groups=intervals,
        coverage=coverage,
    )


def drawable_groups(rows: Sequence[BenchRow]) -> dict[str, list[list[BenchRow]]]:
    """Per group, each series' rows (the method under test first, then the rivals) that
    carry per-day errors of one length: what :func:`bootstrap_mean_ratio` resamples."""
    out: dict[str, list[list[BenchRow]]] = {}
    for _, group, mine, base in _by_series(rows):
        if not mine or not base or not mine[0].day_errors:
            continue
        members = [mine[0], *base]
        if len({len(r.day_errors) for r in members}) != 1:
            continue
        out.setdefault(group, []).append(members)
    return out


def group_draws(
    series: Sequence[Sequence[BenchRow]], weights: Sequence[np.ndarray]
) -> tuple[np.ndarray, list[np.ndarray] | None]:
    """One group's ratio in each draw (tiercast's mean MASE over its series' picked days,
    over the best rival's, as :func:`summarize` takes it) and, where every series carries
    per-day counts below q0.9, each series' q0.9 coverage in each draw (else None).
    ``weights``: per series, how often each of its days is picked (draws x days)."""
    methods: dict[str, list[np.ndarray]] = {}
    shares: list[np.ndarray] | None = []
    for members, w in zip(series, weights, strict=True):
        errors = np.array([r.day_errors for r in members])  # (methods, days)
        counts = np.array([r.day_counts for r in members], dtype=float)
        err = errors @ w.T  # (methods, draws)
        cnt = counts @ w.T
        with np.errstate(invalid="ignore", divide="ignore"):
            mase = np.where(cnt > 0, err / cnt, np.nan)
        for r, values in zip(members, mase, strict=True):
            methods.setdefault(r.method, []).append(values)
        tested = members[0]
        if shares is not None and (
            len(tested.day_below) == len(tested.day_observed) == len(tested.day_errors)
        ):
            seen = np.asarray(tested.day_observed, dtype=float) @ w.T
            with np.errstate(invalid="ignore", divide="ignore"):
                share = np.asarray(tested.day_below, dtype=float) @ w.T / seen
            shares.append(np.where(seen > 0, share, np.nan))
        else:
            shares = None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # a draw no series took part in
        full = {m: np.nanmean(v, axis=0) for m, v in methods.items() if len(v) == len(series)}
    mine = next(v for m, v in full.items() if m.startswith(TIERCAST))
    best = np.nanmin(np.array([v for m, v in full.items() if m in BASELINES]), axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return mine / best, shares


def day_weights(
    series: Sequence[Sequence[BenchRow]], rng: np.random.Generator, draws: int
) -> list[np.ndarray]:
    """Per series of one group, how often each of its test days is picked in each draw
    (draws x days): the group's calendar days drawn jointly, with replacement."""
    dated = all(len(m[0].day_dates) == len(m[0].day_errors) for m in series)
    if not dated:
        out = []
        for m in series:
            days = len(m[0].day_errors)
            pick = rng.integers(0, days, size=(draws, days))
            out.append(np.stack([np.bincount(p, minlength=days) for p in pick]).astype(float))
        return out
    calendar = sorted({d for m in series for d in m[0].day_dates})
    times = calendar_draws(rng, len(calendar), draws)
    where = {d: i for i, d in enumerate(calendar)}
    return [times[:, [where[d] for d in m[0].day_dates]] for m in series]


def calendar_draws(rng: np.random.Generator, days: int, draws: int) -> np.ndarray:
    """How often each of ``days`` calendar days is picked in each of ``draws`` bootstrap
    draws of as many days, with replacement (draws x days)."""
    pick = rng.integers(0, days, size=(draws, days))
    return np.stack([np.bincount(p, minlength=days) for p in pick]).astype(float)


def format_table(rows: Sequence[BenchRow]) -> str:
    """A Markdown table of every row: paste-able into docs/benchmarks.md as printed."""
    lines = [
        "| group | series | method | MASE | pinball q0.9 | q0.9 coverage | fit seconds |",
        "| --- | --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.group} | {r.series} | {r.method} | {r.mase:.3f} | {r.pinball_q09:.3f} | "
            f"{r.coverage_q09:.3f} | {r.fit_seconds:.2f} |"
        )
    return "\n".join(lines)


def format_group_table(summary: Summary, methods: Sequence[str]) -> str:
    """Per group: the mean MASE of every method, the best rival, tiercast's ratio and coverage."""
    head = "| group | series | " + " | ".join(methods) + " | best rival | ratio | q0.9 coverage |"
    align = " | ".join("---:" for _ in methods)
    lines = [head, f"| --- | ---: | {align} | --- | ---: | ---: |"]
    for g in summary.groups.values():
        cells = [f"{g.mase[m]:.3f}" if m in g.mase else "-" for m in methods]
        lines.append(
            f"| {g.group} | {g.series} | "
            + " | ".join(cells)
            + f" | {g.best_rival} | {g.ratio:.3f} | {g.coverage:.3f} |"
        )
    return "\n".join(lines)


def format_fit_times(rows: Sequence[BenchRow]) -> str:
    """Per method: its mean MASE over the series, and the fit (and forecast) time per fit
    (one series at one origin) in wall seconds and in process CPU seconds, and in total.

    CPU seconds are what compares on a shared machine (wall time counts the waits for
    other processes); a method read from a cache written before CPU time was kept shows
    ``-``. The statsforecast rivals' CPU is measured in their own process, first-call
    costs included, and their wall time is that CPU time.
    """
    totals: dict[str, list[float]] = {}
    for r in rows:
        t = totals.setdefault(r.method, [0.0, 0.0, 0.0, 0.0, 0.0])
        t[0] += r.fit_seconds
        t[1] += r.cpu_seconds
        t[2] += len(r.day_errors)
        t[3] += r.mase if math.isfinite(r.mase) else 0.0
        t[4] += 1
    lines = [
        "| method | mean MASE | fits | seconds per fit | CPU s per fit | total seconds | total CPU s |",
        "| --- | ---: | ---: | ---: | ---: | ---: | ---: |",
    ]
    for method, (seconds, cpu, fits, mase, series) in totals.items():
        per = f"{cpu / max(fits, 1):.3f}" if math.isfinite(cpu) else "-"
        total = f"{cpu:.1f}" if math.isfinite(cpu) else "-"
        lines.append(
            f"| {method} | {mase / max(series, 1):.3f} | {fits:.0f} | {seconds / max(fits, 1):.3f} "
            f"| {per} | {seconds:.1f} | {total} |"
        )
    return "\n".join(lines)


def chosen_counts(rows: Sequence[BenchRow]) -> dict[str, tuple[int, int]]:
    """Per candidate, over the method under test's fits: (chosen alone, chosen as a member of
    a combination). A combination's label names its members (``median(a+b+c)``)."""
    out: dict[str, list[int]] = {}
    for r in rows:
        if not r.method.startswith(TIERCAST):
            continue
        for label in r.chosen:
            if "(" in label and label.endswith(")"):
                members = label[label.index("(") + 1 : -1].split("+")
                for member in members:
                    out.setdefault(member, [0, 0])[1] += 1
            else:
                out.setdefault(label, [0, 0])[0] += 1
    return {k: (v[0], v[1]) for k, v in sorted(out.items(), key=lambda i: -sum(i[1]))}


def format_chosen(rows: Sequence[BenchRow]) -> str:
    """:func:`chosen_counts` as a table."""
    lines = [
        "| candidate | chosen alone | member of the chosen combination |",
        "| --- | ---: | ---: |",
    ]
    for name, (alone, member) in chosen_counts(rows).items():
        lines.append(f"| {name} | {alone} | {member} |")
    return "\n".join(lines)


HORIZON_DAYS = 7


def horizon_origins(y: pd.Series, days: int = HORIZON_DAYS) -> list[pd.Timestamp]:
    """Daily 00:00 origins whose ``days`` ahead lie inside ``y``: the last ``days`` such, with
    at least ``days`` of history before the first."""
    step = y.index[1] - y.index[0]
    end = y.index[-1] + step
    last = (end - days * DAY).floor("D")
    origins = [last - k * DAY for k in range(days)]
    return sorted(o for o in origins if o - y.index[0] >= days * DAY)


@dataclass
class HorizonCoverage:
    """q0.9 coverage per horizon day (1-based) of one series' 7-day backtest."""

    series: str
    group: str
    coverage: list[float]
    counts: list[int]


def horizon_coverage(
    y: pd.Series,
    method: str,
    group: str = "",
    days: int = HORIZON_DAYS,
    max_history: pd.Timedelta | None = None,
) -> HorizonCoverage | None:
    """Backtest ``method`` at a ``days`` horizon and measure q0.9 coverage per horizon day.

    ``max_history`` cuts the training at every origin as in :func:`accuracy_rows`."""
    origins = horizon_origins(y, days)
    if not origins:
        return None
    steps = days * HORIZON_STEPS
    bt = backtest(
        _factory(method), y, origins, steps, QUANTILES, label=method, max_history=max_history
    )
    upper = bt.column(0.9)
    coverage, counts = [], []
    for d in range(days):
        a = bt.actuals[:, d * HORIZON_STEPS : (d + 1) * HORIZON_STEPS]
        u = upper[:, d * HORIZON_STEPS : (d + 1) * HORIZON_STEPS]
        seen = np.isfinite(a)
        counts.append(int(seen.sum()))
        coverage.append(float((a[seen] <= u[seen]).mean()) if seen.any() else float("nan"))
    return HorizonCoverage(str(y.name), group or str(y.name), coverage, counts)


def coverage_by_group(results: Sequence[HorizonCoverage]) -> dict[str, list[float]]:
    """Per group, the mean over its series of the coverage per horizon day."""
    groups: dict[str, list[list[float]]] = {}
    for r in results:
        groups.setdefault(r.group, []).append(r.coverage)
    return {g: np.nanmean(np.array(v), axis=0).tolist() for g, v in groups.items()}


def format_horizon_table(by_group: dict[str, list[float]]) -> str:
    days = len(next(iter(by_group.values()))) if by_group else 0
    lines = [
        "| group | " + " | ".join(f"day {d + 1}" for d in range(days)) + " |",
        "| --- | " + " | ".join("---:" for _ in range(days)) + " |",
    ]
    for g, cov in by_group.items():
        lines.append(f"| {g} | " + " | ".join(f"{c:.3f}" for c in cov) + " |")
    mean = np.nanmean(np.array(list(by_group.values())), axis=0) if by_group else []
    lines.append("| mean over groups | " + " | ".join(f"{c:.3f}" for c in mean) + " |")
    return "\n".join(lines)


def horizon_verdict(by_group: dict[str, list[float]]) -> str:
    """The target is on the mean over groups per horizon day; group-days outside are listed."""
    lo, hi = HORIZON_COVERAGE_RANGE
    mean = np.nanmean(np.array(list(by_group.values())), axis=0)
    bad_days = [f"day {d + 1} {c:.2f}" for d, c in enumerate(mean) if not lo <= c <= hi]
    outside = [
        f"{g} day {d + 1} {c:.2f}"
        for g, cov in by_group.items()
        for d, c in enumerate(cov)
        if not lo <= c <= hi
    ]
    verdict = "met" if not bad_days else "NOT met (" + ", ".join(bad_days) + ")"
    line = f"q0.9 coverage (mean over groups) in [{lo}, {hi}] on every horizon day: {verdict}"
    total = sum(len(c) for c in by_group.values())
    line += f"; group-days outside: {len(outside)} of {total}"
    if outside:
        line += " (" + ", ".join(outside[:10]) + (", ..." if len(outside) > 10 else "") + ")"
    return line


@dataclass
class SpeedResult:
    count: int
    auto_seconds: float
    naive_seconds: float
    chosen: dict[str, int]

    def lines(self) -> list[str]:
        ratio = self.auto_seconds / max(self.naive_seconds, 1e-9)
        verdict = "met" if self.auto_seconds < TARGET_SPEED_S else "NOT met"
        # Group by the leading member: ensembles differ only in their tails.
        families: dict[str, int] = {}
        for label, n in self.chosen.items():
            kind = label.split("(")[0] if label.startswith(("ensemble(", "median(")) else ""
            lead = label.removeprefix(f"{kind}(").split("+")[0].rstrip(")")
            key = f"{lead}{f' (+{kind})' if kind else ''}"
            families[key] = families.get(key, 0) + n
        picks = ", ".join(f"{k} x{v}" for k, v in sorted(families.items(), key=lambda i: -i[1]))
        return [
            f"{self.count} series x 14 d at 15 min, fit + 24 h forecast: auto {self.auto_seconds:.1f} s, "
            f"seasonal naive 1 d {self.naive_seconds:.2f} s (ratio {ratio:.0f}x); "
            f"target < {TARGET_SPEED_S:g} s: {verdict}",
            f"chosen: {picks}",
        ]


def speed_series(count: int) -> list[pd.Series]:
    """Varied synthetic demand: different levels, amplitudes, weekends, noise and peaks."""
    rng = np.random.default_rng(2026)
    out = []
    for i in range(count):
        out.append(
            seasonal_series(
                f"s{i:03d}",
                days=14,
                step="15min",
                base=float(rng.uniform(5, 500)),
                daily_amplitude=float(rng.uniform(0.0, 0.8)),
                weekend_factor=float(rng.uniform(0.4, 1.1)),
                trend_per_week=float(rng.uniform(-0.05, 0.1)),
                noise=float(rng.uniform(0.02, 0.25)),
                peak_hour=float(rng.uniform(0, 24)),
                seed=i,
            )
        )
    return out


def speed(count: int = 100, tick: Callable[[], None] | None = None) -> SpeedResult:
    """Time fit + predict for ``count`` series with ``auto`` and with the naive baseline.

    ``tick``, when given, is called after each of the ``2 * count`` fits (a progress hook)."""
    series = speed_series(count)
    chosen: dict[str, int] = {}
    start = time.perf_counter()
    for y in series:
        est = make("auto").fit(y)
        est.predict(HORIZON_STEPS, QUANTILES)
        chosen[est.label()] = chosen.get(est.label(), 0) + 1
        if tick is not None:
            tick()
    auto_s = time.perf_counter() - start
    start = time.perf_counter()
    for y in series:
        make("seasonal_naive_1d").fit(y).predict(HORIZON_STEPS, QUANTILES)
        if tick is not None:
            tick()
    naive_s = time.perf_counter() - start
    return SpeedResult(count, auto_s, naive_s, chosen)
