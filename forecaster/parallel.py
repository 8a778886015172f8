"""Forecast many series per cycle: in worker processes on one machine, or on a Dask cluster.

A large fleet has thousands of series (per model, pool, region, cluster) and a
cycle must still finish in minutes. :func:`forecast_many` streams the series in
small batches through a :class:`Backend` and yields one :class:`SeriesOutcome`
per series as soon as its batch is done:

* **backends**: :class:`JoblibBackend` (joblib's process pool; Prophet runs Stan
  in a subprocess, so threads would not help) and :class:`DaskBackend`
  (``dask.distributed``, an optional extra: ``pip install 'tiercast[distributed]'``),
  pointed at a scheduler address or at a ``LocalCluster`` it starts itself.
* **same results whatever the backend**: every series goes through
  :func:`forecaster.forecasting.forecast_series` with its own explicit model store
  (never the per-process in-memory one, which would make a series' result depend
  on which worker saw it before), and numpy's global random state is seeded from
  the series name for the duration of its forecast and restored afterwards.
* **per-series failure**: an exception from one series' forecast falls back to
  the daily seasonal naive model for that series only, and the outcome says so;
  a batch lost with its worker (a crash, a killed process) is retried series by
  series, and a series that loses its worker again is forecast with seasonal
  naive in the calling process.
* **bounded memory**: the input is any iterable (a generator reading one series
  at a time is the point); at most ``max_in_flight`` batches of ``batch_size``
  series are held at once, whatever the number of series.
* **warm cycles**: with ``ForecastSpec.store_path`` the workers read and write the
  on-disk :class:`forecaster.store.ModelStore`; a model that is not yet due for a
  refit is moved onto the new data and only predicts.
* **each series alone**: no series is another's fleet, as in a cycle in one process;
  ``auto`` never considers the global model (:func:`forecaster.selection.auto_candidates`).
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import logging
import math
import multiprocessing
import os
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, TypeVar

import numpy as np
import pandas as pd
from threadpoolctl import threadpool_limits

from forecaster.artifacts import load_signing_key
from forecaster.errors import BadInputError, DataError, TemporaryError, TiercastError
from forecaster.forecasting import DEFAULT_QUANTILES, SeriesForecast, forecast_series
from forecaster.store import ModelStore

log = logging.getLogger(__name__)

FALLBACK_METHOD = "seasonal_naive_1d"
"""What a series whose forecast raised (or whose worker died twice) is forecast with."""

Status = Literal["ok", "fallback", "failed"]

T = TypeVar("T")
R = TypeVar("R")


@dataclass(frozen=True)
class ForecastSpec:
    """What to compute for every series; shipped to the workers with each batch."""

    horizon: pd.Timedelta
    """How far past the newest observed sample (or past ``now``) to forecast."""
    quantiles: tuple[float, ...] = DEFAULT_QUANTILES
    method: str = "auto"
    """Estimator name from the registry, or ``auto`` (selected per series by backtest)."""
    store_path: str | None = None
    """Model store folder shared by the workers (same file system); None: fit every series."""
    max_age_s: float = 86400.0
    """A stored model older than this is refitted, not reused. Default 86400 (daily)."""
    now: pd.Timestamp | None = None
    """When set, a series whose newest sample is older than ``now`` is forecast further
    ahead by that gap, so every forecast reaches ``now + horizon`` (what the planner needs)."""
    seed: int = 0
    """Mixed with each series' name into the seed of numpy's global random state."""
    setup: Callable[[], None] | None = None
    """Run in the worker before each batch (picklable, idempotent): registers custom
    estimators or configures logging where the forecasts actually run."""
    signing_key_file: str | None = None
    """The model store's HMAC key file, read by each worker from its own mount (the key
    itself never travels with the batch); None: ``$TIERCAST_MODEL_SIGNING_KEY_FILE``."""


@dataclass
class SeriesOutcome:
    """The forecast of one series and how it went."""

    name: str
    forecast: SeriesForecast | None
    """None only when even the fallback could not forecast (``status == 'failed'``)."""
    status: Status
    """``ok``; ``fallback`` (seasonal naive after a failure); ``failed`` (no forecast)."""
    error: str | None
    """Why the requested method was not used (one line), or None."""
    reused: bool
    """True when a stored model was reused (predict only, no refit)."""
    seconds: float
    """Time spent on this series in its worker (not counting transfer)."""


def series_seed(seed: int, name: str) -> int:
    """A stable 32-bit seed per series: the same wherever and whenever the series runs."""
    digest = hashlib.sha256(f"{seed}\0{name}".encode()).digest()
    return int.from_bytes(digest[:4], "little")


def _one_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__


def _fallback(y: pd.Series, spec: ForecastSpec, horizon: pd.Timedelta) -> SeriesForecast:
    # A private in-memory store: the fallback must not overwrite the stored model.
    return forecast_series(y, horizon, spec.quantiles, FALLBACK_METHOD, ModelStore(path=None))


def _series_horizon(y: pd.Series, spec: ForecastSpec) -> pd.Timedelta:
    if spec.now is None:
        return spec.horizon
    observed = y.dropna()
    if observed.empty:
        return spec.horizon
    return spec.horizon + max(pd.Timedelta(0), spec.now - observed.index[-1])


def forecast_one(y: pd.Series, spec: ForecastSpec, store: ModelStore) -> SeriesOutcome:
    """Forecast one series; never raises for a problem of that series alone."""
    name = str(y.name)
    start = time.perf_counter()
    state = np.random.get_state()
    np.random.seed(series_seed(spec.seed, name))
    try:
        horizon = _series_horizon(y, spec)
        reused_before = store.stats["reused"]
        try:
            fc = forecast_series(y, horizon, spec.quantiles, spec.method, store)
        except Exception as exc:  # a fit can raise nearly anything; only this series pays
            try:
                fc = _fallback(y, spec, horizon)
            except TiercastError as again:
                return SeriesOutcome(
                    name,
                    None,
                    "failed",
                    f"{_one_line(exc)}; fallback failed too ({_one_line(again)})",
                    False,
                    time.perf_counter() - start,
                )
            fc.notes.append(
                f"{spec.method} raised {_one_line(exc)}; fell back to {FALLBACK_METHOD}"
            )
            fc.reason = "fallback after a failed fit"
            return SeriesOutcome(
                name, fc, "fallback", _one_line(exc), False, time.perf_counter() - start
            )
        reused = store.stats["reused"] > reused_before
        if fc.reason == "fallback after a failed fit":
            # forecast_series caught the estimator's own error and said why in its notes.
            why = next((n for n in fc.notes if "fell back" in n), "fit failed")
            return SeriesOutcome(name, fc, "fallback", why, reused, time.perf_counter() - start)
        return SeriesOutcome(name, fc, "ok", None, reused, time.perf_counter() - start)
    finally:
        np.random.set_state(state)


def run_batch(batch: list[pd.Series], spec: ForecastSpec) -> list[SeriesOutcome]:
    """The worker's job: forecast each series of a batch with a store of its own.

    A fresh :class:`ModelStore` per batch keeps a long-lived worker's memory flat
    (the store caches every entry it reads) and makes reuse depend on the disk
    only, which every backend sees the same way.
    """
    if spec.setup is not None:
        spec.setup()
    store = ModelStore(
        spec.store_path,
        max_age_s=spec.max_age_s,
        signing_key=load_signing_key(spec.signing_key_file),
    )
    if multiprocessing.parent_process() is None:
        return [forecast_one(y, spec, store) for y in batch]
    # In a worker process: one BLAS/OpenMP thread, since the pool already runs a
    # process per core (two threads per worker on two cores made two workers no
    # faster than one; docs/benchmarks.md, "Forecasting at scale").
    with threadpool_limits(limits=1):
        return [forecast_one(y, spec, store) for y in batch]


class Backend(Protocol):
    """Runs a function over a stream of tasks, a bounded number at a time.

    ``map_unordered`` yields every task exactly once, in completion order, with
    the function's result or the exception that lost it (a dead worker, a lost
    connection). It must not read more than ``max_in_flight`` tasks ahead of the
    ones it has yielded, so a stream of any length fits in bounded memory.
    """

    name: str
    workers: int
    max_in_flight: int

    def map_unordered(
        self, fn: Callable[[T], R], tasks: Iterable[T]
    ) -> Iterator[tuple[T, R | BaseException]]: ...

    def close(self) -> None: ...


class JoblibBackend:
    """Worker processes on this machine: joblib's ``loky`` pool; ``n_jobs=1`` runs in-process.

    The pool is the reusable executor behind ``joblib.Parallel``, driven directly
    so that a new task is submitted only when the caller has taken a result:
    ``Parallel``'s generators keep dispatching while results pile up unread.
    """

    name = "joblib"

    def __init__(self, n_jobs: int = 1, max_in_flight: int | None = None) -> None:
        if isinstance(n_jobs, bool) or not isinstance(n_jobs, int) or n_jobs == 0 or n_jobs < -1:
            raise BadInputError(
                f"The 'jobs' parameter of the joblib backend must be an int >= 1 or -1 (all cores). "
                f"Got {n_jobs!r} instead."
            )
        self.n_jobs = n_jobs
        self.workers = (os.cpu_count() or 1) if n_jobs == -1 else n_jobs
        self.max_in_flight = max_in_flight or 2 * self.workers

    def map_unordered(
        self, fn: Callable[[T], R], tasks: Iterable[T]
    ) -> Iterator[tuple[T, R | BaseException]]:
        if self.workers == 1:
            for task in tasks:
                result: Any
                try:
                    result = fn(task)
                except Exception as exc:
                    result = exc
                yield task, result
            return
        from concurrent.futures import FIRST_COMPLETED, Future, wait

        from joblib.externals.loky import get_reusable_executor

        source = iter(tasks)
        pending: dict[Future[R], T] = {}

        def submit_next() -> None:
            for task in itertools.islice(source, 1):
                # Asked again every time: after a worker died, loky hands out a fresh pool.
                executor = get_reusable_executor(max_workers=self.workers)
                pending[executor.submit(fn, task)] = task

        for _ in range(self.max_in_flight):
            submit_next()
        while pending:
            done, _ = wait(pending, return_when=FIRST_COMPLETED)
            for future in done:
                task = pending.pop(future)
                try:
                    result = future.result()
                except Exception as exc:  # a worker died: every task the pool held is lost
                    log.warning("joblib worker pool lost a batch: %s", _one_line(exc))
                    result = exc
                yield task, result
                submit_next()

    def close(self) -> None:
        """Nothing to release: joblib keeps its reusable pool for the next cycle."""


class DaskBackend:
    """A ``dask.distributed`` cluster: the one at ``scheduler``, or a ``LocalCluster`` of ``n_workers``."""

    name = "dask"

    def __init__(
        self,
        scheduler: str | None = None,
        n_workers: int = 2,
        max_in_flight: int | None = None,
        timeout_s: float = 30.0,
    ) -> None:
        try:
            from distributed import Client, LocalCluster
        except ImportError as exc:
            raise BadInputError(
                "backend 'dask' needs the distributed extra: pip install 'tiercast[distributed]'"
            ) from exc
        if scheduler is None and (isinstance(n_workers, bool) or n_workers < 1):
            raise BadInputError(
                f"The 'jobs' parameter of the dask backend must be an int >= 1 (LocalCluster "
                f"workers). Got {n_workers!r} instead."
            )
        self.scheduler = scheduler
        self._cluster: Any = None
        try:
            if scheduler is None:
                # One thread per worker process: the series seed lives in numpy's global
                # random state, which threads of one process would share.
                self._cluster = LocalCluster(
                    n_workers=n_workers,
                    threads_per_worker=1,
                    processes=True,
                    dashboard_address=None,
                    silence_logs=logging.ERROR,
                )
                self._client = Client(self._cluster, timeout=timeout_s)
            else:
                self._client = Client(scheduler, timeout=timeout_s)
        except (OSError, TimeoutError) as exc:
            self.close()
            where = scheduler or "a LocalCluster"
            raise TemporaryError(f"cannot reach the dask scheduler at {where}: {exc}") from exc
        info = self._client.scheduler_info()
        threads = sum(int(w.get("nthreads", 1)) for w in info.get("workers", {}).values())
        self.workers = max(1, threads)
        self.max_in_flight = max_in_flight or 2 * self.workers

    def map_unordered(
        self, fn: Callable[[T], R], tasks: Iterable[T]
    ) -> Iterator[tuple[T, R | BaseException]]:
        from distributed import as_completed

        source = iter(tasks)
        pending: dict[Any, T] = {}
        done = as_completed()

        def submit_next() -> None:
            for task in itertools.islice(source, 1):
                future = self._client.submit(fn, task, pure=False)
                pending[future.key] = task
                done.add(future)

        for _ in range(self.max_in_flight):
            submit_next()
        for future in done:
            task = pending.pop(future.key)
            result: Any
            try:
                result = future.result()
            except Exception as exc:  # KilledWorker, a lost connection: this batch only
                result = exc
            future.release()
            submit_next()
            yield task, result

    def close(self) -> None:
        client = getattr(self, "_client", None)
        if client is not None:
            client.close()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


def make_backend(kind: str = "joblib", jobs: int = 1, scheduler: str | None = None) -> Backend:
    """The backend named ``kind`` (``joblib`` or ``dask``) with ``jobs`` workers."""
    if kind == "joblib":
        if scheduler is not None:
            raise BadInputError(
                f"a scheduler address ({scheduler!r}) needs backend 'dask'; got backend 'joblib'"
            )
        return JoblibBackend(jobs)
    if kind == "dask":
        return DaskBackend(scheduler, n_workers=(os.cpu_count() or 1) if jobs == -1 else jobs)
    raise BadInputError(
        f"The 'backend' parameter must be 'joblib' or 'dask'. Got {kind!r} instead."
    )


def batched(series: Iterable[pd.Series], size: int) -> Iterator[list[pd.Series]]:
    """Lists of up to ``size`` series, read lazily from ``series``; names checked for reuse."""
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise BadInputError(
            f"The 'batch_size' parameter must be an int >= 1. Got {size!r} instead."
        )
    seen: set[str] = set()
    batch: list[pd.Series] = []
    for y in series:
        if not isinstance(y, pd.Series) or y.name is None:
            raise BadInputError(
                f"every series must be a named pandas Series; got {type(y).__name__} "
                f"named {getattr(y, 'name', None)!r}"
            )
        name = str(y.name)
        if name in seen:
            # The model store and the results are keyed by name: two would overwrite each other.
            raise BadInputError(f"series name {name!r} appears twice; names must be unique")
        seen.add(name)
        batch.append(y)
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def forecast_many(
    series: Iterable[pd.Series],
    spec: ForecastSpec,
    backend: Backend | None = None,
    batch_size: int = 8,
) -> Iterator[SeriesOutcome]:
    """Forecast every series of ``series`` through ``backend``, yielding outcomes as they finish.

    Order follows completion, not input; every input series gets exactly one
    outcome. The default backend runs in this process.
    """
    backend = backend if backend is not None else JoblibBackend(1)
    job = functools.partial(run_batch, spec=spec)
    retry: list[list[pd.Series]] = []
    for batch, result in backend.map_unordered(job, batched(series, batch_size)):
        if not isinstance(result, BaseException):
            yield from result
        elif len(batch) > 1:
            retry.extend([y] for y in batch)
        else:
            yield _lost(batch[0], spec, result)
    # One series at a time: a series lost while alone in flight is the one that kills
    # its worker (a pool that dies takes every task in flight with it), and only it
    # falls back. Slow, but only after a crash and only for the batches it took down.
    for batch in retry:
        for _, result in backend.map_unordered(job, [batch]):
            if isinstance(result, BaseException):
                yield _lost(batch[0], spec, result)
            else:
                yield from result


def _lost(y: pd.Series, spec: ForecastSpec, exc: BaseException) -> SeriesOutcome:
    """The worker running ``y`` died: forecast it here with the cheap fallback."""
    name = str(y.name)
    start = time.perf_counter()
    why = f"worker lost ({_one_line(exc)})"
    try:
        fc = _fallback(y, spec, _series_horizon(y, spec))
    except TiercastError as again:
        return SeriesOutcome(
            name, None, "failed", f"{why}; fallback failed too ({_one_line(again)})", False, 0.0
        )
    fc.notes.append(f"{why}; fell back to {FALLBACK_METHOD}")
    fc.reason = "fallback after a failed fit"
    return SeriesOutcome(name, fc, "fallback", why, False, time.perf_counter() - start)


@dataclass
class BatchReport:
    """Every outcome of one :func:`forecast_all` call, by series name, and the totals."""

    outcomes: dict[str, SeriesOutcome] = field(default_factory=dict)
    seconds: float = 0.0
    """Wall-clock time of the whole call."""

    @property
    def forecasts(self) -> dict[str, SeriesForecast]:
        return {n: o.forecast for n, o in self.outcomes.items() if o.forecast is not None}

    def count(self, status: Status) -> int:
        return sum(1 for o in self.outcomes.values() if o.status == status)

    @property
    def reused(self) -> int:
        return sum(1 for o in self.outcomes.values() if o.reused)

    @property
    def series_per_s(self) -> float:
        return len(self.outcomes) / self.seconds if self.seconds > 0 else math.inf

    def problems(self) -> list[str]:
        """One line per series that fell back or failed, for logs and run records."""
        return [
            f"{o.name}: {o.status}: {o.error}"
            for o in sorted(self.outcomes.values(), key=lambda o: o.name)
            if o.status != "ok"
        ]


def forecast_all(
    series: Iterable[pd.Series],
    spec: ForecastSpec,
    backend: Backend | None = None,
    batch_size: int = 8,
) -> BatchReport:
    """:func:`forecast_many`, collected: what a cycle that plans on every forecast wants."""
    start = time.perf_counter()
    report = BatchReport()
    for outcome in forecast_many(series, spec, backend, batch_size):
        report.outcomes[outcome.name] = outcome
    report.seconds = time.perf_counter() - start
    for line in report.problems():
        log.warning("forecast %s", line)
    return report


def forecast_history_parallel(
    history: Iterable[pd.Series] | dict[str, pd.Series],
    spec: ForecastSpec,
    backend: str = "joblib",
    jobs: int = 1,
    scheduler: str | None = None,
    batch_size: int = 8,
) -> dict[str, SeriesForecast]:
    """Like :func:`forecaster.forecasting.forecast_history`, on a backend named by configuration.

    The backend lives for this call only (joblib keeps its process pool between
    calls anyway). A series that fell back is logged; one that could not be
    forecast at all fails the call, as it would in one process.
    """
    series: Iterable[pd.Series] = (
        (y.rename(name) for name, y in history.items()) if isinstance(history, dict) else history
    )
    runner = make_backend(backend, jobs, scheduler)
    try:
        report = forecast_all(series, spec, runner, batch_size)
    finally:
        runner.close()
    failed = [o for o in report.outcomes.values() if o.status == "failed"]
    if failed:
        first = failed[0]
        raise DataError(f"cannot forecast {len(failed)} series, e.g. {first.name!r}: {first.error}")
    return report.forecasts
