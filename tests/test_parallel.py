"""Batch forecasting of many series: backend equivalence, per-series fallback, batching, warm cycles."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster import estimators
from forecaster.errors import BadInputError, DataError, TemporaryError
from forecaster.estimators import BaseEstimator, SeasonalNaive, register
from forecaster.parallel import (
    DaskBackend,
    ForecastSpec,
    JoblibBackend,
    forecast_all,
    forecast_many,
    make_backend,
    series_seed,
)
from forecaster.synthetic import seasonal_series

HORIZON = pd.Timedelta(hours=6)


def small_fleet(count: int, days: int = 4) -> list[pd.Series]:
    """Short, varied series at 15 minutes: cheap enough to fit many times in a test."""
    return [
        seasonal_series(
            f"svc-{i}",
            days=days,
            step="15min",
            base=10.0 + 37.0 * i,
            daily_amplitude=0.2 + 0.1 * (i % 5),
            peak_hour=float(3 * i % 24),
            noise=0.05 + 0.02 * (i % 3),
            seed=i,
        )
        for i in range(count)
    ]


def assert_same_outcomes(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for name in a:
        x, y = a[name], b[name]
        assert (x.status, x.reused, x.error) == (y.status, y.reused, y.error), name
        assert x.forecast.estimator == y.forecast.estimator, name
        assert x.forecast.reason == y.forecast.reason, name
        pd.testing.assert_frame_equal(x.forecast.frame, y.forecast.frame, check_exact=True)


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """A 2-worker Dask LocalCluster (processes, one thread each) for the module's tests."""
    distributed = pytest.importorskip("distributed")
    import logging

    import dask

    # Worker processes import pandas, scipy and scikit-learn before they report in:
    # on a loaded 2-core machine that can exceed the default connect timeout.
    with (
        dask.config.set({"distributed.comm.timeouts.connect": "90s"}),
        distributed.LocalCluster(
            n_workers=2,
            threads_per_worker=1,
            processes=True,
            dashboard_address=None,
            silence_logs=logging.ERROR,
        ) as local,
    ):
        yield local.scheduler_address


# -- backend equivalence ----------------------------------------------------------------


@pytest.mark.slow
def test_one_process_two_processes_and_dask_give_identical_forecasts(cluster: str) -> None:
    fleet = small_fleet(6)
    spec = ForecastSpec(HORIZON, (0.1, 0.5, 0.9), "auto")
    serial = forecast_all(fleet, spec, JoblibBackend(1), batch_size=2)
    assert serial.count("ok") == 6
    two = forecast_all(fleet, spec, JoblibBackend(2), batch_size=2)
    dask = DaskBackend(scheduler=cluster)
    try:
        assert dask.workers == 2
        on_dask = forecast_all(fleet, spec, dask, batch_size=2)
    finally:
        dask.close()
    assert_same_outcomes(serial.outcomes, two.outcomes)
    assert_same_outcomes(serial.outcomes, on_dask.outcomes)
    # And the same as forecasting each series alone, in this process, without the engine.
    from forecaster.forecasting import forecast_series
    from forecaster.store import ModelStore

    alone = forecast_series(fleet[3], HORIZON, (0.1, 0.5, 0.9), "auto", ModelStore(path=None))
    pd.testing.assert_frame_equal(alone.frame, serial.outcomes["svc-3"].forecast.frame)


def test_global_random_state_is_seeded_per_series_and_restored() -> None:
    np.random.seed(123)
    expected = np.random.random()
    np.random.seed(123)
    forecast_all(small_fleet(2, days=2), ForecastSpec(HORIZON, method="seasonal_naive_1d"))
    assert np.random.random() == expected
    assert series_seed(0, "a") == series_seed(0, "a") != series_seed(0, "b") != series_seed(1, "b")


# -- fakes that fail for chosen series, registered wherever the forecasts run ---------------


class Explode(BaseEstimator):
    """Seasonal naive, except for series named ``raise-*`` (RuntimeError), ``value-*``
    (ValueError, caught by forecast_series itself) and ``crash-*`` (the worker process
    exits, only outside the process that started the test)."""

    name = "test_explode"

    def __init__(self, parent_pid: int = 0) -> None:
        self.parent_pid = parent_pid

    def fit(self, history: pd.Series) -> Explode:
        name = str(history.name)
        if name.startswith("raise-"):
            raise RuntimeError(f"solver diverged on {name}")
        if name.startswith("value-"):
            raise ValueError(f"bad value in {name}")
        if name.startswith("crash-") and os.getpid() != self.parent_pid:
            os._exit(3)
        self.inner_ = SeasonalNaive("1d").fit(history)
        self.last_timestamp_ = self.inner_.last_timestamp_
        return self

    def predict(self, horizon: int, quantiles: Sequence[float]) -> pd.DataFrame:
        self._check_fitted()
        return self.inner_.predict(horizon, quantiles)


def register_fakes(parent_pid: int) -> None:
    register("test_explode", functools.partial(Explode, parent_pid))


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> ForecastSpec:
    """A spec using the fake; the registry entry is removed again after the test."""
    setup = functools.partial(register_fakes, os.getpid())
    monkeypatch.setitem(estimators._REGISTRY, "test_explode", functools.partial(Explode, 0))
    return ForecastSpec(HORIZON, (0.1, 0.5, 0.9), "test_explode", setup=setup)


def named(y: pd.Series, name: str) -> pd.Series:
    return y.rename(name)


@pytest.mark.parametrize("jobs", [1, 2])
@pytest.mark.slow
def test_a_failing_series_falls_back_alone(fakes: ForecastSpec, jobs: int) -> None:
    fleet = small_fleet(5, days=2)
    empty = pd.Series(np.nan, index=fleet[0].index, name="empty-0")
    series = [
        fleet[0],
        named(fleet[1], "raise-1"),
        fleet[2],
        named(fleet[3], "value-3"),
        empty,
        fleet[4],
    ]
    report = forecast_all(series, fakes, JoblibBackend(jobs), batch_size=2)
    out = report.outcomes
    assert [out[n].status for n in ("svc-0", "svc-2", "svc-4")] == ["ok"] * 3
    assert {out[n].forecast.estimator for n in ("svc-0", "svc-2", "svc-4")} == {"test_explode"}
    raised = out["raise-1"]
    assert raised.status == "fallback"
    assert raised.forecast.estimator == "seasonal_naive_1d"
    assert "RuntimeError: solver diverged on raise-1" in raised.error
    assert any("fell back to seasonal_naive_1d" in n for n in raised.forecast.notes)
    caught = out["value-3"]
    assert caught.status == "fallback"
    assert caught.forecast.estimator == "seasonal_naive_1d"
    assert "bad value in value-3" in caught.error
    assert out["empty-0"].status == "failed"
    assert out["empty-0"].forecast is None
    assert "fewer than 2 observed values" in out["empty-0"].error
    assert report.count("ok") == 3 and report.count("fallback") == 2 and report.count("failed") == 1
    assert sorted(line.split(":")[0] for line in report.problems()) == [
        "empty-0",
        "raise-1",
        "value-3",
    ]
    # The fallback equals what seasonal naive gives that series on its own.
    alone = forecast_all([fleet[1]], ForecastSpec(HORIZON, (0.1, 0.5, 0.9), "seasonal_naive_1d"))
    pd.testing.assert_frame_equal(raised.forecast.frame, alone.outcomes["svc-1"].forecast.frame)


@pytest.mark.slow
def test_a_series_that_kills_its_worker_falls_back_alone(fakes: ForecastSpec) -> None:
    fleet = small_fleet(6, days=2)
    series = [*fleet[:2], named(fleet[2], "crash-2"), *fleet[3:]]
    report = forecast_all(series, fakes, JoblibBackend(2), batch_size=3)
    out = report.outcomes
    assert len(out) == 6
    assert out["crash-2"].status == "fallback"
    assert out["crash-2"].error.startswith("worker lost")
    assert out["crash-2"].forecast.estimator == "seasonal_naive_1d"
    # Its batch mates and every other series were retried and forecast as asked.
    for y in fleet[:2] + fleet[3:]:
        assert out[str(y.name)].status == "ok", out[str(y.name)].error
        assert out[str(y.name)].forecast.estimator == "test_explode"


@pytest.mark.slow
def test_a_failing_series_falls_back_alone_on_dask(fakes: ForecastSpec, cluster: str) -> None:
    fleet = small_fleet(3, days=2)
    dask = DaskBackend(scheduler=cluster)
    try:
        report = forecast_all([fleet[0], named(fleet[1], "raise-1"), fleet[2]], fakes, dask, 1)
    finally:
        dask.close()
    assert report.outcomes["raise-1"].status == "fallback"
    assert report.outcomes["svc-0"].forecast.estimator == "test_explode"
    assert report.outcomes["svc-2"].status == "ok"


# -- batching and memory --------------------------------------------------------------------


class CountingSource:
    """A lazy source that records how far ahead of the results it has been read."""

    def __init__(self, fleet: list[pd.Series]) -> None:
        self.fleet = fleet
        self.read = 0
        self.done = 0
        self.max_ahead = 0

    def __iter__(self) -> Iterator[pd.Series]:
        for y in self.fleet:
            self.read += 1
            self.max_ahead = max(self.max_ahead, self.read - self.done)
            yield y


@pytest.mark.slow
@pytest.mark.parametrize("jobs", [1, 2])
def test_series_are_read_in_bounded_batches(jobs: int) -> None:
    fleet = small_fleet(30, days=2)
    source = CountingSource(fleet)
    backend = JoblibBackend(jobs, max_in_flight=2)
    spec = ForecastSpec(HORIZON, method="seasonal_naive_1d")
    names = []
    for outcome in forecast_many(source, spec, backend, batch_size=3):
        source.done += 1
        names.append(outcome.name)
    assert sorted(names) == sorted(str(y.name) for y in fleet)
    # At most max_in_flight batches are held, plus the batch being assembled.
    assert source.max_ahead <= (2 + 1) * 3


def test_bad_streams_and_settings_are_refused_in_one_line() -> None:
    spec = ForecastSpec(HORIZON, method="seasonal_naive_1d")
    fleet = small_fleet(2, days=2)
    with pytest.raises(BadInputError, match="'svc-0' appears twice"):
        forecast_all([fleet[0], fleet[1], fleet[0]], spec)
    with pytest.raises(BadInputError, match="named pandas Series"):
        forecast_all([fleet[0].rename(None)], spec)
    with pytest.raises(BadInputError, match=r"'batch_size' parameter must be an int >= 1\. Got 0"):
        forecast_all(fleet, spec, batch_size=0)
    with pytest.raises(BadInputError, match="'jobs' parameter of the joblib backend"):
        make_backend("joblib", 0)
    with pytest.raises(BadInputError, match="needs backend 'dask'"):
        make_backend("joblib", 2, "tcp://127.0.0.1:8786")
    with pytest.raises(BadInputError, match=r"must be 'joblib' or 'dask'\. Got 'ray'"):
        make_backend("ray", 2)


@pytest.mark.slow
def test_unreachable_scheduler_is_a_temporary_error() -> None:
    pytest.importorskip("distributed")
    with pytest.raises(
        TemporaryError, match=r"cannot reach the dask scheduler at tcp://127\.0\.0\.1:9"
    ):
        DaskBackend(scheduler="tcp://127.0.0.1:9", timeout_s=1.0)


def test_a_stale_series_is_forecast_up_to_now_plus_the_horizon() -> None:
    fleet = small_fleet(2, days=2)
    last = fleet[0].index[-1]
    stale = fleet[1][fleet[1].index <= last - pd.Timedelta(hours=2)]
    now = last + pd.Timedelta(minutes=15)
    spec = ForecastSpec(HORIZON, method="seasonal_naive_1d", now=now)
    out = forecast_all([fleet[0], stale], spec).outcomes
    for name in ("svc-0", "svc-1"):
        assert out[name].forecast.frame.index[-1] >= now + HORIZON - pd.Timedelta(minutes=15)


# -- warm cycles ----------------------------------------------------------------------------


@pytest.mark.slow
def test_warm_cycle_reuses_stored_models_whatever_the_backend(tmp_path: Path) -> None:
    full = small_fleet(4, days=5)
    cold = [y.iloc[:-1] for y in full]
    warm = [y.iloc[1:] for y in full]
    # With a signing key every selected model is stored, those with pickled parts
    # (gradient boosting, the statsmodels fits) signed; without one those are refitted.
    key = tmp_path / "model-key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)  # a key others can read is refused
    spec = ForecastSpec(
        HORIZON,
        (0.1, 0.5, 0.9),
        "auto",
        store_path=str(tmp_path / "models"),
        signing_key_file=str(key),
    )
    first = forecast_all(cold, spec, JoblibBackend(2), batch_size=2)
    assert first.reused == 0 and first.count("ok") == 4
    assert len(list((tmp_path / "models").glob("*.npz"))) == 4
    serial = forecast_all(warm, spec, JoblibBackend(1), batch_size=2)
    two = forecast_all(warm, spec, JoblibBackend(2), batch_size=2)
    assert serial.reused == two.reused == 4
    assert_same_outcomes(serial.outcomes, two.outcomes)
    for y in warm:
        outcome = serial.outcomes[str(y.name)]
        assert outcome.reused and outcome.status == "ok"
        assert outcome.forecast.frame.index[0] == y.index[-1] + pd.Timedelta(minutes=15)
        # Reusing keeps the cold cycle's selection.
        assert outcome.forecast.estimator == first.outcomes[str(y.name)].forecast.estimator


# -- the realistic benchmark series ---------------------------------------------------------


@pytest.mark.slow
def test_benchmark_series_are_realistic_and_deterministic(traces: Path) -> None:
    from forecaster.benchmarks.scaleout import END, POINTS, SeriesBank, load_shapes

    shapes = load_shapes(traces)
    assert len(shapes) >= 5
    assert {s.daily for s in shapes} == {True, False}
    bank = SeriesBank.build(40, shapes)
    again = SeriesBank.build(40, load_shapes(traces))
    np.testing.assert_array_equal(bank.values, again.values)
    assert bank.names == again.names
    assert len(set(bank.names)) == 40
    assert len({n.split("-", 1)[1] for n in bank.names}) >= 5  # drawn from several traces
    cold = next(bank.cold())
    warm = next(bank.warm())
    assert len(cold) == len(warm) == POINTS
    assert cold.index[-1] == END - pd.Timedelta(minutes=5) and warm.index[-1] == END
    assert np.nanmin(bank.values) >= 0
    levels = np.nanmean(bank.values, axis=1)
    assert levels.max() / levels.min() > 100  # rescaled over orders of magnitude
    assert np.isnan(bank.values).any(axis=1).sum() >= 1  # some series have gaps


def test_benchmark_needs_the_traces(tmp_path: Path) -> None:
    from forecaster.benchmarks.scaleout import load_shapes

    with pytest.raises(DataError, match="no trace shapes found"):
        load_shapes(tmp_path)


# -- configuration and the cycle -------------------------------------------------------------


def test_forecast_config_parallel_defaults_and_errors() -> None:
    from scaler.config import ConfigError, ForecastConfig, parse_config
    from scaler.inputs.demo import demo_inputs

    defaults = ForecastConfig()
    assert (defaults.jobs, defaults.backend, defaults.scheduler, defaults.batch_size) == (
        1,
        "joblib",
        None,
        8,
    )
    config, _, _ = demo_inputs()
    data = config.model_dump(mode="json")
    data["forecast"] = {"jobs": 0}
    with pytest.raises(ConfigError, match=r"forecast\.jobs must be >= 1 or -1"):
        parse_config(data)
    data["forecast"] = {"scheduler": "tcp://10.0.0.1:8786"}
    with pytest.raises(ConfigError, match=r"forecast\.scheduler needs forecast\.backend: dask"):
        parse_config(data)
    data["forecast"] = {"backend": "ray"}
    with pytest.raises(ConfigError, match="backend"):
        parse_config(data)


@pytest.mark.slow
def test_cycle_forecasts_in_worker_processes_as_in_one(tmp_path: Path) -> None:
    from scaler.config import Config
    from scaler.inputs.demo import demo_inputs
    from scaler.service.cycle import forecast_for_plan

    config, history, now = demo_inputs()
    # Four days of history keep the automatic selection quick; the last signal goes stale.
    history = {n: y[y.index >= now - pd.Timedelta(days=4)] for n, y in history.items()}
    history["embed_rps"] = history["embed_rps"][
        history["embed_rps"].index < now - pd.Timedelta(hours=1)
    ]

    key = tmp_path / "model-key"
    key.write_bytes(b"k" * 32)
    key.chmod(0o600)  # a key others can read is refused

    def with_forecast(store: str, **forecast: object):
        # Signed, so that every selected model is stored (pickled parts included).
        return config.model_copy(
            update={
                "forecast": config.forecast.model_copy(update=forecast),
                "model_store": config.model_store.model_copy(
                    update={"path": store, "signing_key_file": str(key)}
                ),
            }
        )

    def forecast(config: Config) -> dict:
        return forecast_for_plan(
            config.pools, config.policy, config.forecast, config.model_store, history, now
        )

    serial = forecast(with_forecast(str(tmp_path / "a")))
    parallel = forecast(with_forecast(str(tmp_path / "b"), jobs=2))
    assert sorted(serial) == sorted(parallel) == sorted(history)
    for name, fc in serial.items():
        assert parallel[name].estimator == fc.estimator
        pd.testing.assert_frame_equal(parallel[name].frame, fc.frame, check_exact=True)
    assert len(list((tmp_path / "b").glob("*.npz"))) == len(history)
    # The stale signal's forecast still reaches now + horizon.
    assert parallel["embed_rps"].frame.index[-1] >= now + pd.Timedelta(
        seconds=config.policy.horizon_s
    )


@pytest.mark.slow
def test_bench_scale_prints_the_table_and_verdicts(
    traces: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.cli import main

    sizes = ["--count", "6", "--fit-count", "3", "--prophet-count", "0", "--batch-size", "2"]
    sizes += ["--rival-count", "2"]
    code = main(["bench-scale", *sizes, "--backends", "joblib"])
    out = capsys.readouterr().out
    assert code == 0
    assert out.startswith("| model | cycle | backend | series |")
    assert "| calibration: pure-Python loop | CPU only | joblib 2 processes |" in out
    assert "| auto (default) | warm: predict only | joblib 2 processes | 6 |" in out
    assert "- warm predict-only cycle of 6 series in" in out
    assert "- nightly refit of 6 series with auto in" in out
    assert "| ets_auto (statsmodels) | cold | joblib 1 process | 2 |" in out
    assert "mstl (statsmodels) " in out and "x auto)" in out
    assert "| gbm median (LightGBM trees) | cold | joblib 1 process | 2 |" in out
    assert "- gbm's median model with LightGBM's trees takes " in out
    warm = [line for line in out.splitlines() if "warm: predict only" in line]
    assert all(line.split("|")[9].strip() == "6" for line in warm)  # every model reused


@pytest.mark.slow
def test_bench_scale_refuses_unknown_backends(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cli import main

    assert main(["bench-scale", "--backends", "ray"]) == 2
    assert "--backends must list joblib and/or dask; got ray" in capsys.readouterr().err
