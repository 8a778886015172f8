"""The model store: reuse, refit when due or drifted, survive bad artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.estimators import make
from forecaster.store import ModelStore
from scaler.cli import main
from scaler.service import cycle
from scaler.service.growth_cache import FILE_NAME as GROWTH_CACHE


def series(days: int = 12, seed: int = 0, name: str = "rps") -> pd.Series:
    index = pd.date_range("2026-02-02", periods=days * 24, freq="1h", name="timestamp")
    rng = np.random.default_rng(seed)
    values = 100 + 40 * np.sin(2 * np.pi * index.hour.to_numpy() / 24)
    return pd.Series(values + rng.normal(0, 3, len(index)), index=index, name=name)


class Clock:
    """A wall clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1_800_000_000.0

    def __call__(self) -> float:
        return self.now


def store_at(path: Path, clock: Clock | None = None) -> ModelStore:
    return ModelStore(path, max_age_s=86400, clock=clock or Clock())


@pytest.mark.slow
def test_a_second_store_on_the_same_folder_reuses_the_model(tmp_path: Path) -> None:
    y = series()
    first = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not first.reused and first.note == "fitted (no stored model)"
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".json", ".npz"]
    meta = json.loads(next(tmp_path.glob("*.json")).read_text())
    assert meta["series"] == "rps" and meta["method"] == "auto"
    assert meta["estimator"] == first.model.label()
    assert meta["training_window"]["end"] == y.index[-1].isoformat()
    assert "backtest_mase" in meta["backtest"] and meta["tiercast_version"]
    again = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert again.reused and again.note.startswith("reused stored model")
    pd.testing.assert_frame_equal(
        first.model.predict(24, [0.5, 0.9]), again.model.predict(24, [0.5, 0.9])
    )


@pytest.mark.slow
def test_newer_data_reuses_and_moves_the_forecast_origin(tmp_path: Path) -> None:
    y = series()
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[:-6], "auto", lambda: make("auto"))
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert outcome.reused
    assert outcome.model.predict(2, [0.5]).index[0] == y.index[-1] + pd.Timedelta("1h")


@pytest.mark.slow
def test_an_old_model_is_refitted(tmp_path: Path) -> None:
    clock = Clock()
    store = store_at(tmp_path, clock)
    y = series()
    store.get_or_fit(y, "auto", lambda: make("auto"))
    clock.now += 2 * 86400
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "h old" in outcome.note


@pytest.mark.slow
def test_data_far_past_the_training_window_is_due(tmp_path: Path) -> None:
    y = series(days=14)
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[: -2 * 24], "auto", lambda: make("auto"))
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "old" in outcome.note


@pytest.mark.slow
def test_drift_triggers_a_refit(tmp_path: Path) -> None:
    y = series(days=13)
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[:-12], "auto", lambda: make("auto"))
    shifted = y.copy()
    shifted.iloc[-12:] += 300  # a new tenant: far outside anything backtested
    outcome = store.get_or_fit(shifted, "auto", lambda: make("auto"))
    assert not outcome.reused and outcome.note.startswith("refitted: drift")


@pytest.mark.slow
def test_an_unreadable_artifact_is_replaced(tmp_path: Path) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    next(tmp_path.glob("*.npz")).write_bytes(b"not an archive at all")
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "unreadable" in outcome.note
    assert store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto")).reused


@pytest.mark.slow
def test_a_foreign_version_is_refitted(tmp_path: Path) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    meta_file = next(tmp_path.glob("*.json"))
    meta = json.loads(meta_file.read_text())
    meta["tiercast_version"] = "0.0.1"
    meta_file.write_text(json.dumps(meta))
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "0.0.1" in outcome.note


@pytest.mark.slow
def test_different_data_under_the_same_name_is_not_reused(tmp_path: Path) -> None:
    # Signed, so that whatever auto selects (pickled parts included) is stored.
    key = b"k" * 32
    store = ModelStore(tmp_path, max_age_s=86400, clock=Clock(), signing_key=key)
    store.get_or_fit(series(seed=1), "auto", lambda: make("auto"))
    again = ModelStore(tmp_path, max_age_s=86400, clock=Clock(), signing_key=key)
    outcome = again.get_or_fit(series(seed=2), "auto", lambda: make("auto"))
    assert not outcome.reused and "no longer matches" in outcome.note


def test_an_unwritable_store_still_forecasts(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    outcome = ModelStore(blocker / "models").get_or_fit(
        series(), "seasonal_naive_1d", lambda: make("seasonal_naive_1d")
    )
    assert not outcome.reused
    assert np.isfinite(outcome.model.predict(3, [0.5]).to_numpy()).all()


@pytest.mark.slow
def test_second_tiercast_run_reuses_stored_models(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    state_dir: Path,
) -> None:
    monkeypatch.setattr(cycle, "_STORES", {})
    assert main(["run", "--dry-run"]) == 0
    # Model sidecars only: the growth backtest's forecasts are kept beside them.
    metas = {p.name: p.read_text() for p in (state_dir / "models").glob("*.json")}
    kept = metas.pop(GROWTH_CACHE)
    assert len(metas) >= 3  # one per demo signal
    monkeypatch.setattr(cycle, "_STORES", {})  # a new process: only the files remain
    assert main(["run", "--dry-run"]) == 0
    capsys.readouterr()
    store = next(iter(cycle._STORES.values()))
    assert store.stats == {"reused": len(metas), "fitted": 0}
    # Nothing was fitted or forecast again: every file is as the first run left it.
    assert {p.name: p.read_text() for p in (state_dir / "models").glob("*.json")} == {
        **metas,
        GROWTH_CACHE: kept,
    }


class _Touch:
    """A pickle that creates a marker file when unpickled: what an attacker would plant."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[object, tuple[str]]:
        return (Path.touch, (str(self.marker),))  # type: ignore[return-value]


def _planted_sidecar(store: ModelStore, y: pd.Series, method: str) -> dict[str, object]:
    """A sidecar that passes every check of the store, so only the artifact decides."""
    meta = store._meta(str(y.name), method, y, make("seasonal_naive_1d").fit(y))
    meta["format"] = 2  # what the pickle-based store wrote
    return meta


@pytest.mark.slow
def test_a_planted_joblib_artifact_is_never_unpickled(tmp_path: Path) -> None:
    import joblib

    y = series()
    store = store_at(tmp_path)
    stem = tmp_path / store.key("rps", "auto")
    marker = tmp_path / "pwned"
    joblib.dump({"model": _Touch(marker), "tail": y.tail(24)}, stem.with_suffix(".joblib"))
    stem.with_suffix(".json").write_text(json.dumps(_planted_sidecar(store, y, "auto")))
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not marker.exists()
    assert not outcome.reused


@pytest.mark.parametrize("signed", [False, True])
@pytest.mark.slow
def test_a_planted_pickle_inside_the_archive_is_refused(tmp_path: Path, signed: bool) -> None:
    import pickle

    from forecaster import artifacts

    y = series()
    key = b"k" * 32 if signed else None
    store = ModelStore(tmp_path, clock=Clock(), signing_key=key)
    stem = tmp_path / store.key("rps", "auto")
    marker = tmp_path / "pwned"
    blob = np.frombuffer(pickle.dumps(_Touch(marker)), dtype=np.uint8)
    state = {"$t": "dict", "v": [["model", {"$t": "pickle", "k": "p0", "hmac": "0" * 64}]]}
    text = np.frombuffer(json.dumps(state).encode(), dtype=np.uint8)
    with stem.with_suffix(".npz").open("wb") as handle:
        np.savez(handle, __state__=text, p0=blob)
    meta = _planted_sidecar(store, y, "auto")
    meta["format"] = 3
    stem.with_suffix(".json").write_text(json.dumps(meta))
    with pytest.raises(artifacts.UntrustedArtifact):
        artifacts.loads(stem.with_suffix(".npz"), store.key("rps", "auto"), key)
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not marker.exists()
    assert not outcome.reused and "refused" in outcome.note
    # The refit replaced the planted file with one this store can read back.
    assert (
        ModelStore(tmp_path, clock=Clock(), signing_key=key)
        .get_or_fit(y, "auto", lambda: make("auto"))
        .reused
    )


def test_an_object_array_in_the_archive_is_refused(tmp_path: Path) -> None:
    y = series()
    store = store_at(tmp_path)
    store.get_or_fit(y, "seasonal_naive_1d", lambda: make("seasonal_naive_1d"))
    archive = next(tmp_path.glob("*.npz"))
    marker = tmp_path / "pwned"
    with np.load(archive) as npz:
        arrays = {name: npz[name] for name in npz.files}
    arrays["a0"] = np.array([_Touch(marker)], dtype=object)
    with archive.open("wb") as handle:
        np.savez(handle, **arrays)  # object arrays are pickled by numpy
    outcome = store_at(tmp_path).get_or_fit(
        y, "seasonal_naive_1d", lambda: make("seasonal_naive_1d")
    )
    assert not marker.exists()
    assert not outcome.reused and "refused" in outcome.note


def test_a_class_outside_tiercast_is_never_built(tmp_path: Path) -> None:
    y = series()
    store = store_at(tmp_path)
    store.get_or_fit(y, "seasonal_naive_1d", lambda: make("seasonal_naive_1d"))
    archive = next(tmp_path.glob("*.npz"))
    with np.load(archive) as npz:
        arrays = {name: npz[name] for name in npz.files}
    state = json.loads(arrays["__state__"].tobytes())
    state["v"][0][1]["cls"] = "subprocess:Popen"
    arrays["__state__"] = np.frombuffer(json.dumps(state).encode(), dtype=np.uint8)
    with archive.open("wb") as handle:
        np.savez(handle, **arrays)
    outcome = store_at(tmp_path).get_or_fit(
        y, "seasonal_naive_1d", lambda: make("seasonal_naive_1d")
    )
    assert not outcome.reused and "refused" in outcome.note and "tiercast estimator" in outcome.note


@pytest.mark.slow
def test_gradient_boosting_is_stored_only_when_signed(tmp_path: Path) -> None:
    y = series(days=15)
    unsigned = tmp_path / "unsigned"
    ModelStore(unsigned, clock=Clock()).get_or_fit(y, "gbm", lambda: make("gbm"))
    assert not list(unsigned.glob("*.npz"))  # nothing written that could not be trusted back
    signed = tmp_path / "signed"
    key = b"a signing key of enough bytes"
    first = ModelStore(signed, clock=Clock(), signing_key=key).get_or_fit(
        y, "gbm", lambda: make("gbm")
    )
    again = ModelStore(signed, clock=Clock(), signing_key=key).get_or_fit(
        y, "gbm", lambda: make("gbm")
    )
    assert again.reused
    pd.testing.assert_frame_equal(first.model.predict(6, [0.5]), again.model.predict(6, [0.5]))
    other = ModelStore(signed, clock=Clock(), signing_key=b"another key, also long").get_or_fit(
        y, "gbm", lambda: make("gbm")
    )
    assert not other.reused and "signature" in other.note


@pytest.mark.slow
@pytest.mark.parametrize(
    "change",
    [
        {"training_window": "yesterday"},
        {"training_window": {"start": 1, "end": [], "step_s": "5m"}},
        {"created_at_epoch": "now"},
        {"backtest": {"backtest_mase": "low"}},
        {"series": ["rps"]},
        {"format": True},
    ],
    ids=lambda c: next(iter(c)),
)
def test_a_sidecar_of_the_wrong_shape_is_replaced(
    tmp_path: Path, change: dict[str, object]
) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    meta_file = next(tmp_path.glob("*.json"))
    meta_file.write_text(json.dumps({**json.loads(meta_file.read_text()), **change}))
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "malformed" in outcome.note
    assert store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto")).reused


@pytest.mark.slow
def test_a_sidecar_that_is_not_an_object_is_replaced(tmp_path: Path) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    next(tmp_path.glob("*.json")).write_text("[1, 2, 3]")
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "malformed" in outcome.note
    assert store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto")).reused


@pytest.mark.slow
@pytest.mark.parametrize(
    "method",
    [
        "prophet_default",
        "seasonal_profile_7d",
        "profile_regression_1d",
        "recent_level",
        "ensemble",
        "auto_mix",
        "profile_mix",
        "ets_auto",
        "theta",
        "mstl",
    ],
)
def test_every_array_estimator_round_trips_without_pickle(tmp_path: Path, method: str) -> None:
    y = series(days=15)
    first = store_at(tmp_path).get_or_fit(y, method, lambda: make(method))
    again = store_at(tmp_path).get_or_fit(y, method, lambda: make(method))
    assert again.reused, again.note
    pd.testing.assert_frame_equal(
        first.model.predict(12, [0.1, 0.9]), again.model.predict(12, [0.1, 0.9])
    )
    # Unsigned, so nothing in the archive is pickled (the statsmodels fits are rebuilt
    # from their stored window and parameters).
    for archive in tmp_path.glob("*.npz"):
        with np.load(archive, allow_pickle=False) as arrays:
            assert not [k for k in arrays.files if k.startswith("p")], archive


def test_the_signing_key_comes_from_the_config_and_is_checked(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from forecaster.artifacts import load_signing_key

    key_file = workdir / "key"
    key_file.write_bytes(b"0123456789abcdef0123\n")
    key_file.chmod(0o600)  # a key others can read is refused
    assert load_signing_key(key_file) == b"0123456789abcdef0123"
    monkeypatch.setenv("TIERCAST_MODEL_SIGNING_KEY_FILE", str(key_file))
    assert load_signing_key(None) == b"0123456789abcdef0123"
    monkeypatch.delenv("TIERCAST_MODEL_SIGNING_KEY_FILE")
    assert load_signing_key(None) is None
    key_file.write_bytes(b"short")
    series().rename("value").to_csv(workdir / "rps.csv")
    config = {
        "signals": [{"name": "rps", "file": "rps.csv", "step_s": 3600}],
        "workloads": [{"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10}],
        "pools": [
            {
                "name": "p",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "current_nodes": 2,
            }
        ],
        "model_store": {"signing_key_file": str(key_file)},
    }
    (workdir / "c.yaml").write_text(json.dumps(config))
    monkeypatch.setattr(cycle, "_STORES", {})
    assert main(["run", "--dry-run", "--config", str(workdir / "c.yaml")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "signing_key_file" in err[0] and "at least 16" in err[0]
