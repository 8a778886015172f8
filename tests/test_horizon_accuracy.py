"""Accuracy at the horizon planned for: the review scores its forecaster per lead day."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler.cli import main
from scaler.reports.document import Report, Section
from scaler.reports.horizon_accuracy import (
    HorizonAccuracy,
    add_horizon_accuracy,
    lead_days_asked,
    longest_lead,
)
from tests.test_report import english_words


def _walk(path: Path, days: int, seed: int = 7) -> Path:
    """An hourly random walk far from zero: its error grows with the lead."""
    rng = np.random.default_rng(seed)
    index = pd.date_range("2027-01-01", periods=days * 24, freq="1h")
    values = 1000 + np.cumsum(rng.normal(0, 3, len(index)))
    frame = pd.DataFrame({"timestamp": index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values})
    frame.to_csv(path, index=False)
    return path


def _accuracy(workdir: Path, days: int, horizon: str, origins: int = 4) -> dict[str, Any]:
    history = _walk(workdir / "walk.csv", days)
    out = f"rep-{horizon}-{days}"
    args = ["report", "--history", str(history), "--horizon", horizon, "-o", "json"]
    args += ["--backtest-origins", str(origins), "--out-dir", out]
    assert main(args) == 0
    data = json.loads((workdir / out / "report.json").read_text(encoding="utf-8"))
    section: dict[str, Any] = next(s for s in data["sections"] if s["key"] == "accuracy")
    return section


def _lead_rows(section: dict[str, Any]) -> list[dict[str, Any]]:
    tables = {tb["key"]: tb for tb in section["tables"]}
    return list(tables["accuracy_by_lead"]["rows"]) if "accuracy_by_lead" in tables else []


def test_lead_days_and_the_longest_lead_a_history_supports() -> None:
    assert lead_days_asked(pd.Timedelta(hours=36)) == 2
    assert lead_days_asked(pd.Timedelta(days=90)) == 90
    y = pd.Series(1.0, index=pd.date_range("2027-01-01", periods=28 * 24, freq="1h"))
    # 28 days: a week before the older of two origins a day apart, the rest ahead.
    assert longest_lead(y, 90, 4) == 20
    assert longest_lead(y, 7, 4) == 7
    assert longest_lead(y, 90, 1) == 21
    assert longest_lead(y.iloc[: 8 * 24], 7, 4) == 0


@pytest.mark.slow
def test_a_seven_day_review_scores_seven_lead_days_with_error_growing(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _accuracy(workdir, 28, "7d")
    rows = _lead_rows(section)
    assert [r["lead_day"] for r in rows] == [1, 2, 3, 4, 5, 6, 7]
    assert {r["origins"] for r in rows} == {4}
    mase = [r["mase"] for r in rows]
    # A random walk drifts away from any forecast: later days are further off.
    assert np.mean(mase[-3:]) > 1.5 * np.mean(mase[:3])
    assert mase[-1] > mase[0]
    assert all(0.0 <= r["coverage"] <= 1.0 for r in rows)
    # The whole horizon is supported, so no sentence about a shortfall; a chart by lead day.
    assert not any("supports lead days" in p for p in section["paragraphs"])
    assert any("7 days" in p for p in section["paragraphs"])
    assert any(c["key"].startswith("lead-accuracy-") for c in section["charts"])
    # The one-day table is still there, one day ahead.
    assert {r["horizon_h"] for r in section["tables"][0]["rows"]} == {24.0}


@pytest.mark.slow
def test_a_ninety_day_review_reports_the_longest_supported_lead(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _accuracy(workdir, 28, "90d")
    rows = _lead_rows(section)
    assert [r["lead_day"] for r in rows] == list(range(1, 21))
    assert "walk: the history supports lead days up to 20 of the 90 asked." in section["paragraphs"]


@pytest.mark.slow
def test_a_short_history_says_no_backtest_at_that_lead_is_possible(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    section = _accuracy(workdir, 5, "7d")
    assert _lead_rows(section) == []
    assert any(p.startswith("walk: no backtest 7 days ahead") for p in section["paragraphs"])
    assert not any(c["key"].startswith("lead-accuracy-") for c in section["charts"])


def test_turned_off_and_one_day_plans_add_no_lead_day_scores() -> None:
    sec = Section("accuracy", "Accuracy")
    add_horizon_accuracy(sec, HorizonAccuracy(asked_days=1, origins=3), 0.1, 0.9, "en")
    assert sec.paragraphs == [] and sec.tables == []
    add_horizon_accuracy(sec, HorizonAccuracy(asked_days=7, origins=0), 0.1, 0.9, "en")
    assert sec.paragraphs == [
        "Backtests are off (--backtest-origins 0), so the accuracy at the plan's horizon "
        "of 7 days is not scored."
    ]
    assert sec.tables == []


@pytest.mark.slow
def test_the_lead_day_scores_read_in_russian() -> None:
    rows = [
        {
            "signal": "rps",
            "estimator": "seasonal_naive_1d",
            "lead_day": d,
            "origins": 2,
            "mase": 0.5 * d,
            "coverage": 0.8,
        }
        for d in (1, 2, 3)
    ]
    result = HorizonAccuracy(
        asked_days=90,
        origins=4,
        rows=rows,
        supported={"rps": 3, "tokens": 0},
        history_days={"rps": 12.0, "tokens": 4.0},
    )
    sec = Section("accuracy", "Точность")
    add_horizon_accuracy(sec, result, 0.1, 0.9, "ru")
    report = Report("report", "ru", "Обзор", "", "2027-01-01T00:00:00Z", [], [sec])
    names = {"rps", "tokens", "seasonal_naive_1d"}
    assert english_words(report, names) == {}
    assert "rps: история позволяет оценить дни упреждения до 3-го из 90 запрошенных." in (
        sec.paragraphs
    )
    assert any(p.startswith("tokens: бэктест на 90 дн.") for p in sec.paragraphs)
    assert [tb.key for tb in sec.tables] == ["accuracy_by_lead"] and len(sec.charts) == 1
