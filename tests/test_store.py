"""The model store: reuse, refit when due or drifted, survive bad artifacts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.estimators import make
from forecaster.store import ModelStore
from scaler import cycle
from scaler.cli import main


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


def test_a_second_store_on_the_same_folder_reuses_the_model(tmp_path: Path) -> None:
    y = series()
    first = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not first.reused and first.note == "fitted (no stored model)"
    files = sorted(p.suffix for p in tmp_path.iterdir())
    assert files == [".joblib", ".json"]
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


def test_newer_data_reuses_and_moves_the_forecast_origin(tmp_path: Path) -> None:
    y = series()
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[:-6], "auto", lambda: make("auto"))
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert outcome.reused
    assert outcome.model.predict(2, [0.5]).index[0] == y.index[-1] + pd.Timedelta("1h")


def test_an_old_model_is_refitted(tmp_path: Path) -> None:
    clock = Clock()
    store = store_at(tmp_path, clock)
    y = series()
    store.get_or_fit(y, "auto", lambda: make("auto"))
    clock.now += 2 * 86400
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "h old" in outcome.note


def test_data_far_past_the_training_window_is_due(tmp_path: Path) -> None:
    y = series(days=14)
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[: -2 * 24], "auto", lambda: make("auto"))
    outcome = store.get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "old" in outcome.note


def test_drift_triggers_a_refit(tmp_path: Path) -> None:
    y = series(days=13)
    store = store_at(tmp_path)
    store.get_or_fit(y.iloc[:-12], "auto", lambda: make("auto"))
    shifted = y.copy()
    shifted.iloc[-12:] += 300  # a new tenant: far outside anything backtested
    outcome = store.get_or_fit(shifted, "auto", lambda: make("auto"))
    assert not outcome.reused and outcome.note.startswith("refitted: drift")


def test_an_unreadable_artifact_is_replaced(tmp_path: Path) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    next(tmp_path.glob("*.joblib")).write_bytes(b"not a pickle at all")
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "unreadable" in outcome.note
    assert store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto")).reused


def test_a_foreign_version_is_refitted(tmp_path: Path) -> None:
    y = series()
    store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    meta_file = next(tmp_path.glob("*.json"))
    meta = json.loads(meta_file.read_text())
    meta["tiercast_version"] = "0.0.1"
    meta_file.write_text(json.dumps(meta))
    outcome = store_at(tmp_path).get_or_fit(y, "auto", lambda: make("auto"))
    assert not outcome.reused and "0.0.1" in outcome.note


def test_different_data_under_the_same_name_is_not_reused(tmp_path: Path) -> None:
    store_at(tmp_path).get_or_fit(series(seed=1), "auto", lambda: make("auto"))
    outcome = store_at(tmp_path).get_or_fit(series(seed=2), "auto", lambda: make("auto"))
    assert not outcome.reused and "no longer matches" in outcome.note


def test_an_unwritable_store_still_forecasts(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("a file where the folder should be")
    outcome = ModelStore(blocker / "models").get_or_fit(
        series(), "seasonal_naive_1d", lambda: make("seasonal_naive_1d")
    )
    assert not outcome.reused
    assert np.isfinite(outcome.model.predict(3, [0.5]).to_numpy()).all()


def test_second_tiercast_run_reuses_stored_models(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cycle, "_STORES", {})
    assert main(["run", "--dry-run"]) == 0
    metas = {p.name: p.read_text() for p in (workdir / "models").glob("*.json")}
    assert len(metas) >= 3  # one per demo signal
    monkeypatch.setattr(cycle, "_STORES", {})  # a new process: only the files remain
    assert main(["run", "--dry-run"]) == 0
    capsys.readouterr()
    store = next(iter(cycle._STORES.values()))
    assert store.stats == {"reused": len(metas), "fitted": 0}
    assert {p.name: p.read_text() for p in (workdir / "models").glob("*.json")} == metas
