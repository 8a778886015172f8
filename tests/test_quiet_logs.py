"""Quiet by default (issue #50, finding 12): one line per problem.

Pod churn is one warning, not one per pod; numpy's and statsmodels' warnings are counted
and summarised in one INFO line, tiercast's own warnings still shown; and no line claims
what did not happen (``cycle abandoned:`` always gives its reason).
"""

from __future__ import annotations

import argparse
import logging
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.library_warnings import is_library_warning, summarised_warnings
from forecaster.sources import LabelledSeries, StaticSource
from scaler.config import Config, parse_config
from scaler.inputs.collecting import collect

T0 = pd.Timestamp("2026-12-01 00:00:00")
MIN = pd.Timedelta(minutes=1)
QUERY = "sum by (pod) (rate(req_total[5m]))"


def _config() -> Config:
    return parse_config(
        {
            "signals": [{"name": "rps", "query": QUERY, "step_s": 60}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 1}
            ],
            "pools": [
                {
                    "name": "p",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 1.0,
                }
            ],
            "prometheus": {"url": "http://unused:9090", "lookback_s": 6 * 3600},
        }
    )


def _pod(i: int, first: int, last: int) -> LabelledSeries:
    index = pd.DatetimeIndex([T0 + k * MIN for k in range(first, last)], name="timestamp")
    return LabelledSeries({"pod": f"p{i}"}, pd.Series(1.0, index=index))


def test_pod_churn_is_one_warning_not_one_per_pod(caplog: pytest.LogCaptureFixture) -> None:
    # 60 pods that each lived 20 minutes over five hours, and four that run throughout.
    pods = [_pod(i, 5 * i, 5 * i + 20) for i in range(60)]
    pods += [_pod(1000 + i, 0, 360) for i in range(4)]
    caplog.set_level(logging.INFO, logger="scaler.inputs.collecting")
    collect(_config(), "rps", now=T0 + 359 * MIN, source=StaticSource({QUERY: pods}))
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    churn = [m for m in warned if "label sets have long gaps or stopped" in m]
    assert len(churn) == 1, warned[:5]
    assert "60 of 64 label sets" in churn[0]
    assert not [m for m in warned if m.startswith("collected ")]
    assert len(warned) <= 2, warned  # the churn line, and at most the held-data line
    # Each pod's detail is still there at INFO.
    assert sum(r.getMessage().startswith("collected ") for r in caplog.records) == 64


def test_one_label_set_with_a_gap_keeps_its_own_line(caplog: pytest.LogCaptureFixture) -> None:
    pods = [_pod(0, 0, 30)]
    collect(_config(), "rps", now=T0 + 359 * MIN, source=StaticSource({QUERY: pods}))
    warned = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert any(m.startswith("collected rps") for m in warned), warned


def test_numpy_and_statsmodels_warnings_are_summarised_in_one_info_line(
    caplog: pytest.LogCaptureFixture, capsys: pytest.CaptureFixture[str]
) -> None:
    from statsmodels.tools.sm_exceptions import ConvergenceWarning

    caplog.set_level(logging.INFO, logger="forecaster.library_warnings")
    with summarised_warnings() as counts:
        warnings.simplefilter("always")
        for _ in range(112):
            np.nanmedian(np.full(4, np.nan))
        warnings.warn("Maximum Likelihood optimization failed", ConvergenceWarning, stacklevel=1)
    assert counts[("RuntimeWarning", "All-NaN slice encountered")] == 112
    assert counts[("ConvergenceWarning", "Maximum Likelihood optimization failed")] == 1
    assert capsys.readouterr().err == ""
    [line] = [r.getMessage() for r in caplog.records if r.name == "forecaster.library_warnings"]
    assert line.startswith("library warnings (handled; summarised): 112 x RuntimeWarning")
    assert "ConvergenceWarning" in line and "\n" not in line


def test_tiercast_own_warnings_are_still_shown() -> None:
    import scaler.replay.forecast_store as store

    ours = store.__file__
    with pytest.warns(UserWarning, match="forecasting afresh"), summarised_warnings() as counts:
        warnings.warn_explicit("x is unreadable; forecasting afresh", UserWarning, ours, 1)
    assert not counts
    here = str(Path(__file__).resolve())
    assert is_library_warning(RuntimeWarning, here)
    assert not is_library_warning(UserWarning, str(Path(collect.__code__.co_filename)))


@pytest.mark.slow
def test_forecast_over_a_one_year_gap_prints_no_library_warning(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.cli import main

    first = pd.date_range("2025-11-01", periods=3 * 288, freq="5min")
    last = pd.date_range("2026-11-01", periods=3 * 288, freq="5min")
    index = first.append(last)
    values = 50 + 20 * np.sin(np.arange(len(index)) * 2 * np.pi / 288)
    pd.DataFrame({"timestamp": index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values}).to_csv(
        workdir / "gap.csv", index=False
    )
    with warnings.catch_warnings():
        warnings.simplefilter("default")  # as the command line has them
        assert main(["forecast", "--history", "gap.csv", "--out-file", "f.csv"]) == 0
    err = capsys.readouterr().err
    assert "Warning" not in err and "All-NaN" not in err, err[:500]


def test_an_abandoned_cycle_says_why(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.records import RunRecord
    from scaler.service import wiring
    from scaler.service.runs import EXIT_ABANDONED, JobOutcome

    record = RunRecord("r", "cycle", "t0", "t1", 0.1, "abandoned", EXIT_ABANDONED)

    class Abandoned:
        def __init__(self, **_kwargs: object) -> None:
            pass

        def __call__(self) -> JobOutcome:
            return JobOutcome("cycle", "abandoned", EXIT_ABANDONED, record)

    monkeypatch.setattr(wiring, "CycleJob", Abandoned)
    args = argparse.Namespace(
        config=None, history=None, plan_out="p.json", dry_run=True, state_dir=None
    )
    config = _config()
    inputs = type("I", (), {"config": config})()
    code = wiring.run_once(args, lambda: inputs, lambda *_a: None)
    assert code == EXIT_ABANDONED
    err = capsys.readouterr().err
    assert "tiercast: cycle abandoned: a stop request" in err
    assert not err.rstrip().endswith("abandoned:")
