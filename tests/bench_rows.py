"""Benchmark rows made by hand, for the tests of the benchmark's scoring and comparison."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from forecaster.benchmarks.accuracy import BenchRow


def bench_rows(
    series: str,
    errors: Mapping[str, list[float]],
    group: str = "",
    dates: Sequence[str] = (),
) -> list[BenchRow]:
    """One row per method of ``errors`` (its per-day sums of scaled errors over 96 steps a
    day), in that order; ``dates`` names the test days where given."""
    return [
        BenchRow(
            series,
            method,
            sum(day) / (96 * len(day)),
            0.0,
            0.9,
            0.0,
            day_errors=day,
            day_counts=[96] * len(day),
            group=group,
            day_dates=list(dates),
        )
        for method, day in errors.items()
    ]
