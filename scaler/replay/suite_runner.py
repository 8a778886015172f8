"""Replaying a suite: one series at a time at every lead time asked (:func:`replay_suite_series`,
also the worker processes' entry point, so it stays a module-level function; the lead times
of a series share its forecasts) or the whole suite in order, serially or in worker
processes (:func:`replay_suite`)."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

from forecaster.errors import BadInputError, DataError
from forecaster.series import read_history_csv
from scaler.replay.forecast_store import kept_forecasts
from scaler.replay.protocol import ReplaySetup, prepare_trace
from scaler.replay.simulating import Replay, run_replay
from scaler.replay.suite import Suite, SuiteResult, SuiteSeries, suite_result
from scaler.replay.tables import format_table, format_tiers


def check_suite_files(folder: Path, suite: Suite) -> None:
    """Fail at once, before any replay, if a file of ``suite`` is not under ``folder``."""
    missing = [e.path for e in suite.series if not (folder / e.path).is_file()]
    if missing:
        raise BadInputError(
            f"--suite: {len(missing)} file(s) of suite {suite.name!r} are not in {str(folder)!r}, "
            f"e.g. {missing[0]}"
        )


def replay_suite(
    folder: Path,
    suite: Suite,
    setups: Sequence[ReplaySetup],
    policies: Sequence[str],
    tiers: bool,
    jobs: int = 1,
    started: Callable[[SuiteSeries], None] | None = None,
    forecast_cache: str | None = None,
) -> Iterator[list[tuple[str, SuiteResult]]]:
    """Each series' printed blocks and summary figures, one per setup (lead time), in the
    suite's order.

    With ``jobs`` > 1 the series are all handed at once to that many worker processes.
    ``started`` is told of each series as its result is awaited. ``forecast_cache``: a
    folder keeping each series' forecasts between runs (:mod:`scaler.replay.forecast_store`).
    """
    if jobs > 1:
        with ProcessPoolExecutor(jobs) as pool:
            futures = [
                pool.submit(
                    replay_suite_series,
                    str(folder),
                    e,
                    list(setups),
                    policies,
                    tiers,
                    forecast_cache,
                )
                for e in suite.series
            ]
            for e, f in zip(suite.series, futures, strict=True):
                if started is not None:
                    started(e)
                yield f.result()
    else:
        for e in suite.series:
            if started is not None:
                started(e)
            yield replay_suite_series(str(folder), e, list(setups), policies, tiers, forecast_cache)


def replay_suite_series(
    folder: str,
    entry: SuiteSeries,
    setups: Sequence[ReplaySetup],
    policies: Sequence[str],
    tiers: bool,
    forecast_cache: str | None = None,
) -> list[tuple[str, SuiteResult]]:
    """Replay one suite series at each setup; the printed block and the figures for the
    summary of each (its forecasts kept under ``forecast_cache`` where given)."""
    path = Path(folder) / entry.path
    try:
        history = read_history_csv(path)
    except DataError as exc:
        raise BadInputError(f"--suite: {entry.path}: {exc}") from exc
    series = next(iter(history.values()))
    traces = [prepare_trace(series.rename(path.stem), entry.units_per_gpu, s) for s in setups]
    out = []
    with kept_forecasts(forecast_cache, traces[0], setups) as cache:
        for setup, trace in zip(setups, traces, strict=True):
            replay = run_replay(trace, setup, policies, tiers=tiers, cache=cache)
            result = suite_result(entry, replay)
            out.append((_series_block(entry, replay, result, tiers), result))
    return out


def _series_block(entry: SuiteSeries, replay: Replay, result: SuiteResult, tiers: bool) -> str:
    """What is printed of one series: a title line, its table, the tier line, its margin."""
    test = replay.trace.test_index
    block = [
        f"== {entry.path} ({entry.group}) | demand = ceil(value / {entry.units_per_gpu:g}) GPUs | "
        f"lead {replay.setup.lead_time_s // 60} min | "
        f"test {test[0]:%Y-%m-%d %H:%M} to {test[-1]:%Y-%m-%d %H:%M}",
        format_table(replay),
    ]
    if tiers:
        block.append(format_tiers(replay))
    if result.margin:
        block.append(f"predictive: {result.margin}")
    return "\n".join(block)
