"""The forecasting benchmark: accuracy on public traces and speed on many series.

Accuracy protocol (fixed, so numbers stay comparable between versions): each
series is resampled to 15-minute means; the test period is the last 7 days (the
last 4 for series of 14 days or less); origins every 24 h at 00:00 inside it; at
each origin every method trains on everything before it and forecasts the next
24 h (96 steps); MASE and pinball loss are scaled by the MAE of the one-day
seasonal naive forecast on that origin's training data; NaN actuals are ignored.
Methods: tiercast's automatic selection (``auto``, or any registered estimator under
test), seasonal naive 1 day, seasonal naive 7 days (only where every origin has 14
days of training), and Prophet with default settings.

Held-out windows (``windows``): the same protocol on earlier weeks of the same
traces, each series cut short by a fixed schedule of days (wider for longer
traces), plus one more trace of the folder. The benchmark's own test periods are
4 to 7 days of five series, where one unusual day moves a ratio by hundredths;
the windows show whether a change helps beyond them. They are not used to fit
anything: a change is kept when it helps both.

Uncertainty (``bootstrap_mean_ratio``): the benchmark's mean ratio recomputed over
resampled test days, the same days for every method; its standard error says how large
a change must be before these five series can tell it from luck.

Speed: ``count`` synthetic series of 14 days at a 15-minute step, each fitted and
forecast 24 h ahead with ``auto`` from scratch (no model store), against the
same loop with the one-day seasonal naive model measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from forecaster.backtesting import Backtest, backtest, protocol_origins
from forecaster.errors import DataError
from forecaster.estimators import BaseEstimator, make
from forecaster.series import read_history_csv, regularize
from forecaster.synthetic import seasonal_series

STEP = pd.Timedelta(minutes=15)
HORIZON_STEPS = 96
QUANTILES = (0.1, 0.5, 0.9)
BASELINES = ("seasonal_naive_1d", "seasonal_naive_7d", "prophet_default")

BENCH_SERIES: tuple[str, ...] = (
    "servegen/m_small_rps_10min.csv",
    "azure_vm2019/vm_cpu_cores_used_5min.csv",
    "nab/nyc_taxi_passengers_30min.csv",
    "nab/aws_elb_request_count_5min.csv",
    "nab/aws_asg_cpu_util_5min.csv",
)
"""Paths relative to the public traces folder (``../shared/data/traces``)."""

WINDOW_EXTRA: tuple[str, ...] = ("nab/aws_ec2_cpu_util_5f5533_5min.csv",)
"""Traces used only in the held-out windows (the benchmark leaves them out)."""

TARGET_MEAN_RATIO = 0.85
TIERCAST = "tiercast "
"""Prefix of the rows of the method under test ("tiercast auto"); the others are baselines."""
COVERAGE_RANGE = (0.85, 0.95)
TARGET_SPEED_S = 60.0


def load_bench_series(path: Path) -> pd.Series:
    """One trace as 15-minute means (the protocol's resolution)."""
    history = read_history_csv(path)
    if len(history) != 1:
        raise DataError(f"benchmark series {str(path)!r} must hold one series, has {len(history)}")
    y = next(iter(history.values()))
    return regularize(y, STEP).rename(path.stem)


def window_cuts(y: pd.Series) -> tuple[int, ...]:
    """Days cut from the end of ``y`` for its held-out windows, by the length of the trace."""
    span = (y.index[-1] - y.index[0]) / pd.Timedelta(days=1)
    if span <= 16:
        return (2, 4)
    if span < 40:
        return (7, 10, 14)
    if span < 100:
        return (7, 14, 21, 30, 40)
    return tuple(range(7, 180, 14))


def holdout_windows(y: pd.Series, extra: bool = False) -> list[pd.Series]:
    """The series cut short by each of :func:`window_cuts` days, named ``<name>-<days>d``.

    A trace outside the benchmark (``extra``) contributes its whole length too, and
    is cut by the shortest schedule so every trace adds a similar number of windows.
    """
    cuts = (4,) if extra else window_cuts(y)
    out = [y] if extra else []
    for days in cuts:
        cut = y[: y.index[-1] - pd.Timedelta(days=days)]
        out.append(cut.rename(f"{y.name}-{days}d"))
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

    @classmethod
    def of(cls, series: str, method: str, bt: Backtest) -> BenchRow:
        scaled = np.abs(bt.actuals - bt.point()) / bt.scales[:, None]
        finite = np.isfinite(scaled)
        return cls(
            series,
            method,
            bt.mase(),
            bt.scaled_pinball(0.9),
            bt.coverage(0.9),
            bt.fit_seconds,
            day_errors=np.where(finite, scaled, 0.0).sum(axis=1).tolist(),
            day_counts=finite.sum(axis=1).tolist(),
        )


def _factory(method: str) -> Callable[[], BaseEstimator]:
    return lambda: make(method)


def accuracy_rows(y: pd.Series, methods: Sequence[str] = ("auto", *BASELINES)) -> list[BenchRow]:
    """Run the protocol on one series for each method that applies to it.

    Rows of the baselines carry their names; any other method is the one under test,
    labelled ``tiercast <name>``.
    """
    origins = protocol_origins(y)
    rows = []
    for method in methods:
        if method == "seasonal_naive_7d" and origins[0] - y.index[0] < pd.Timedelta(days=14):
            continue  # the protocol only runs the weekly baseline with 14 days of training
        bt = backtest(_factory(method), y, origins, HORIZON_STEPS, QUANTILES, label=method)
        label = method if method in BASELINES else TIERCAST + method
        rows.append(BenchRow.of(str(y.name), label, bt))
    return rows


@dataclass
class Summary:
    ratios: dict[str, float]
    """tiercast MASE over the best baseline's MASE, per series."""
    coverage: dict[str, float]

    @property
    def mean_ratio(self) -> float:
        return float(np.mean(list(self.ratios.values())))

    def verdicts(self) -> list[str]:
        lo, hi = COVERAGE_RANGE
        worst = max(self.ratios, key=lambda k: self.ratios[k])
        bad_cov = [k for k, c in self.coverage.items() if not lo <= c <= hi]
        return [
            f"mean MASE ratio to the best baseline {self.mean_ratio:.3f} "
            f"(target <= {TARGET_MEAN_RATIO}): {'met' if self.mean_ratio <= TARGET_MEAN_RATIO else 'NOT met'}",
            f"worst series {worst} ratio {self.ratios[worst]:.3f} (target <= 1): "
            f"{'met' if self.ratios[worst] <= 1.0 else 'NOT met'}",
            f"q0.9 coverage in [{lo}, {hi}] on every series: "
            + ("met" if not bad_cov else "NOT met (" + ", ".join(bad_cov) + ")"),
        ]


def _by_series(rows: Sequence[BenchRow]) -> list[tuple[str, list[BenchRow], list[BenchRow]]]:
    """Per series, in order: the rows of the method under test and those of the baselines."""
    out = []
    for series in dict.fromkeys(r.series for r in rows):
        mine = [r for r in rows if r.series == series and r.method.startswith(TIERCAST)]
        base = [r for r in rows if r.series == series and r.method in BASELINES]
        out.append((series, mine, base))
    return out


def summarize(rows: Sequence[BenchRow]) -> Summary:
    ratios, coverage = {}, {}
    for series, mine, base in _by_series(rows):
        if mine and base:
            ratios[series] = mine[0].mase / min(r.mase for r in base)
            coverage[series] = mine[0].coverage_q09
    return Summary(ratios, coverage)


@dataclass
class Uncertainty:
    """How far the mean ratio could move with other test days of the same series."""

    standard_error: float
    low: float
    """5th percentile of the resampled mean ratios."""
    high: float
    """95th percentile."""
    share_within_target: float
    """Share of the resampled mean ratios at or below the target."""
    draws: int

    def line(self) -> str:
        return (
            f"uncertainty of the mean ratio (bootstrap over each series' test days, "
            f"{self.draws} draws): standard error {self.standard_error:.3f}, "
            f"90% interval {self.low:.3f} to {self.high:.3f}; "
            f"{self.share_within_target:.0%} of the draws at or below {TARGET_MEAN_RATIO}"
        )


def bootstrap_mean_ratio(
    rows: Sequence[BenchRow], draws: int = 2000, seed: int = 0
) -> Uncertainty | None:
    """Resample each series' test days with replacement and recompute the mean ratio.

    Each draw picks, per series, as many test days as it has (the same days for
    every method, so a day that is hard for all stays paired), recomputes every
    method's MASE from the picked days, takes tiercast's ratio to the best
    baseline of that draw and averages over the series. The spread of the draws
    is what a different week of the same series could have given: a change to
    the forecaster smaller than the standard error is not measurable here.
    None when the rows carry no per-day errors.
    """
    rng = np.random.default_rng(seed)
    per_series: list[tuple[np.ndarray, np.ndarray]] = []
    for _, mine, base in _by_series(rows):
        if not mine or not base or not mine[0].day_errors:
            continue
        group = [mine[0], *base]
        if len({len(r.day_errors) for r in group}) != 1:
            continue
        errors = np.array([r.day_errors for r in group])  # (methods, days)
        counts = np.array([r.day_counts for r in group], dtype=float)
        per_series.append((errors, counts))
    if not per_series:
        return None
    means = np.zeros(draws)
    for errors, counts in per_series:
        days = errors.shape[1]
        pick = rng.integers(0, days, size=(draws, days))
        err = errors[:, pick].sum(axis=2)  # (methods, draws)
        cnt = counts[:, pick].sum(axis=2)
        with np.errstate(invalid="ignore", divide="ignore"):
            mase = err / cnt
        means += mase[0] / np.nanmin(mase[1:], axis=0)
    means /= len(per_series)
    means = means[np.isfinite(means)]
    return Uncertainty(
        standard_error=float(np.std(means, ddof=1)),
        low=float(np.percentile(means, 5)),
        high=float(np.percentile(means, 95)),
        share_within_target=float(np.mean(means <= TARGET_MEAN_RATIO)),
        draws=len(means),
    )


def family_ratios(summary: Summary) -> dict[str, float]:
    """Mean ratio over each trace's windows (names ``<trace>-<days>d`` and ``<trace>``)."""
    families: dict[str, list[float]] = {}
    for name, ratio in summary.ratios.items():
        stem, _, tail = name.rpartition("-")
        trace = stem if stem and tail.endswith("d") and tail[:-1].isdigit() else name
        families.setdefault(trace, []).append(ratio)
    return {k: float(np.mean(v)) for k, v in families.items()}


def format_table(rows: Sequence[BenchRow]) -> str:
    """A Markdown table: paste-able into the README as printed."""
    lines = [
        "| series | method | MASE | pinball q0.9 | q0.9 coverage | fit seconds |",
        "| --- | --- | ---: | ---: | ---: | ---: |",
    ]
    for r in rows:
        lines.append(
            f"| {r.series} | {r.method} | {r.mase:.3f} | {r.pinball_q09:.3f} | "
            f"{r.coverage_q09:.3f} | {r.fit_seconds:.2f} |"
        )
    return "\n".join(lines)


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
            lead = label.removeprefix("ensemble(").split("+")[0].rstrip(")")
            key = f"{lead}{' (+ensemble)' if label.startswith('ensemble(') else ''}"
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


def speed(count: int = 100) -> SpeedResult:
    """Time fit + predict for ``count`` series with ``auto`` and with the naive baseline."""
    series = speed_series(count)
    chosen: dict[str, int] = {}
    start = time.perf_counter()
    for y in series:
        est = make("auto").fit(y)
        est.predict(HORIZON_STEPS, QUANTILES)
        chosen[est.label()] = chosen.get(est.label(), 0) + 1
    auto_s = time.perf_counter() - start
    start = time.perf_counter()
    for y in series:
        make("seasonal_naive_1d").fit(y).predict(HORIZON_STEPS, QUANTILES)
    naive_s = time.perf_counter() - start
    return SpeedResult(count, auto_s, naive_s, chosen)
