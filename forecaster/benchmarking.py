"""The forecasting benchmark: accuracy on public traces and speed on many series.

Accuracy protocol (fixed, so numbers stay comparable between versions): each
series is resampled to 15-minute means; the test period is the last 7 days (the
last 4 for series of 14 days or less); origins every 24 h at 00:00 inside it; at
each origin every method trains on everything before it and forecasts the next
24 h (96 steps); MASE and pinball loss are scaled by the MAE of the one-day
seasonal naive forecast on that origin's training data; NaN actuals are ignored.
Methods: tiercast's automatic selection (``auto``), seasonal naive 1 day, seasonal
naive 7 days (only where every origin has 14 days of training), and Prophet with
default settings.

Held-out windows (``windows``): the same protocol on earlier weeks of the same
traces, each series cut short by a fixed schedule of days (wider for longer
traces), plus one more trace of the folder. The benchmark's own test periods are
4 to 7 days of five series, where one unusual day moves a ratio by hundredths;
the windows show whether a change helps beyond them. They are not used to fit
anything: a change is kept when it helps both.

Speed: ``count`` synthetic series of 14 days at a 15-minute step, each fitted and
forecast 24 h ahead with ``auto`` from scratch (no model store), against the
same loop with the one-day seasonal naive model measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
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

    @classmethod
    def of(cls, series: str, method: str, bt: Backtest) -> BenchRow:
        return cls(
            series, method, bt.mase(), bt.scaled_pinball(0.9), bt.coverage(0.9), bt.fit_seconds
        )


def _factory(method: str) -> Callable[[], BaseEstimator]:
    return lambda: make(method)


def accuracy_rows(y: pd.Series, methods: Sequence[str] = ("auto", *BASELINES)) -> list[BenchRow]:
    """Run the protocol on one series for each method that applies to it."""
    origins = protocol_origins(y)
    rows = []
    for method in methods:
        if method == "seasonal_naive_7d" and origins[0] - y.index[0] < pd.Timedelta(days=14):
            continue  # the protocol only runs the weekly baseline with 14 days of training
        bt = backtest(_factory(method), y, origins, HORIZON_STEPS, QUANTILES, label=method)
        rows.append(BenchRow.of(str(y.name), "tiercast auto" if method == "auto" else method, bt))
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


def summarize(rows: Sequence[BenchRow]) -> Summary:
    ratios, coverage = {}, {}
    for series in dict.fromkeys(r.series for r in rows):
        mine = [r for r in rows if r.series == series and r.method == "tiercast auto"]
        base = [r for r in rows if r.series == series and r.method in BASELINES]
        if mine and base:
            ratios[series] = mine[0].mase / min(r.mase for r in base)
            coverage[series] = mine[0].coverage_q09
    return Summary(ratios, coverage)


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
