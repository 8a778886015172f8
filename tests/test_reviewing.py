"""Forecast against actual: run records and backtests against the history, costed per pool.

Hand-made records and backtests on a one-pool fleet, so every GPU-hour and every
cost can be worked out by hand; then the report command on recorded demo cycles.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.backtesting import Backtest
from scaler.cli import main
from scaler.reports import reviewing
from scaler.reports.finance import PricedFleet
from tests.test_finance import fleet

T0 = pd.Timestamp("2027-01-10T00:00:00")
OD = {"name": "od", "tier": "on-demand", "price_per_gpu_hour": 2.0, "lead_time_s": 600}


def _history(values: dict[pd.Timestamp, float]) -> dict[str, pd.Series]:
    index = pd.date_range(T0 - pd.Timedelta(hours=1), T0 + pd.Timedelta(hours=1), freq="5min")
    y = pd.Series(3.0, index=index, name="rps")
    for at, v in values.items():
        y[at] = v
    return {"rps": y}


def _cycle(at: pd.Timestamp, forecast_gpus: float, nodes: int) -> reviewing.RecordedCycle:
    timeline = [at + pd.Timedelta(minutes=5 * k) for k in range(4)]
    return reviewing.RecordedCycle(
        created_at=at,
        forecast={
            "rps": {
                "last_timestamp": at.strftime("%Y-%m-%dT%H:%M:%SZ"),
                "at_lead": {
                    "q0.1": forecast_gpus - 1,
                    "q0.5": forecast_gpus,
                    "q0.9": forecast_gpus + 1,
                },
            }
        },
        plan={
            "step_s": 300,
            "timeline": [x.strftime("%Y-%m-%dT%H:%M:%SZ") for x in timeline],
            "demand_gpus": {"H100-80GB": [0.0, 0.0, forecast_gpus, 0.0]},
            "pools": [{"pool": "od", "target_nodes": [0, 0, nodes, 0]}],
        },
    )


def test_records_compare_the_lead_time_forecast_and_plan_with_what_happened() -> None:
    config = fleet([{**OD, "max_nodes": 100}])
    # Cycle 1 planned 4 GPUs for T0+10min, 6 came: 2 short for one cycle (5 min).
    # Cycle 2 planned 8 GPUs for T0+15min, 6 came: 2 idle for one cycle.
    history = _history({T0 + pd.Timedelta(minutes=10): 6.0, T0 + pd.Timedelta(minutes=15): 6.0})
    cycles = [_cycle(T0, 4.5, 4), _cycle(T0 + pd.Timedelta(minutes=5), 7.0, 8)]
    h = reviewing.from_records(PricedFleet.of(config), history, cycles, 0.9)
    assert h.source == "records"
    assert list(h.gpus["actual_gpus"]) == [6.0, 6.0]
    assert list(h.gpus["planned_gpus"]) == [4.0, 8.0]
    [pool] = h.pools.to_dict(orient="records")
    cycle_h = 300 / 3600
    assert pool["planned_gpu_hours"] == pytest.approx(12 * cycle_h)
    assert pool["idle_gpu_hours"] == pytest.approx(2 * cycle_h)
    assert pool["idle_cost"] == pytest.approx(2 * cycle_h * 2.0)
    assert pool["short_gpu_hours"] == pytest.approx(2 * cycle_h)
    assert pool["short_cost"] == pytest.approx(2 * cycle_h * 2.0)
    # The signal forecasts one lead time (600 s) after the newest sample each cycle saw.
    sig = h.signals.set_index("timestamp")
    assert list(sig["actual"]) == [6.0, 6.0] and list(sig["q0.5"]) == [4.5, 7.0]
    acc = h.accuracy().iloc[0]
    assert acc["mae"] == pytest.approx((1.5 + 1.0) / 2) and acc["above_q"] == pytest.approx(0.5)
    # With a price for unserved demand, the short GPU-hours cost that instead.
    priced = config.model_copy(
        update={"finance": config.finance.model_copy(update={"unserved_price_per_gpu_hour": 50.0})}
    )
    [pool] = reviewing.from_records(PricedFleet.of(priced), history, cycles, 0.9).pools.to_dict(
        orient="records"
    )
    assert pool["short_cost"] == pytest.approx(2 * cycle_h * 50.0)


def test_backtest_fallback_plans_the_forecast_and_costs_the_gap() -> None:
    config = fleet([{**OD, "max_nodes": 100}])
    steps = 12
    origin = T0
    forecasts = np.zeros((1, steps, 3))
    forecasts[0, :, 0], forecasts[0, :, 1], forecasts[0, :, 2] = 2.0, 3.0, 5.0
    actual = np.full(steps, 3.0)
    actual[-1] = 7.0  # one 5-minute step above the q0.9 plan of 5 GPUs
    bt = Backtest(
        label="fake",
        origins=[origin],
        quantiles=[0.1, 0.5, 0.9],
        forecasts=forecasts,
        actuals=actual[None, :],
        scales=np.ones(1),
        fit_seconds=0.0,
    )
    times = pd.date_range(origin, periods=steps, freq="5min")
    history = _history(dict(zip(times, actual, strict=True)))
    h = reviewing.from_backtests(PricedFleet.of(config), history, {"rps": bt}, 0.9)
    assert h.source == "backtest"
    assert list(h.gpus["planned_gpus"]) == [5.0] * steps
    [pool] = h.pools.to_dict(orient="records")
    step_h = 5 / 60
    assert pool["planned_gpu_hours"] == pytest.approx(5 * steps * step_h)
    assert pool["idle_gpu_hours"] == pytest.approx(2 * (steps - 1) * step_h)
    assert pool["short_gpu_hours"] == pytest.approx(2 * step_h)
    assert h.accuracy().iloc[0]["coverage"] == pytest.approx((steps - 1) / steps)


@pytest.mark.slow
def test_report_reads_recorded_cycles(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import argparse

    from scaler.cli.plan import plan_without_acting
    from scaler.records import RunRecord, RunStore, forecast_summary, plan_summary

    store = RunStore(workdir / "runs.sqlite")
    end = pd.Timestamp("2026-11-02T00:00:00")
    for k in (3, 2, 1):
        now = end - pd.Timedelta(minutes=30 * k)
        args = argparse.Namespace(
            config=None, history=None, now=now.isoformat(), horizon="2h", current_nodes=[]
        )
        config, _, _, _, result = plan_without_acting(args)
        lead = max(p.lead_time_s for p in config.pools)
        store.add(
            RunRecord(
                run_id=f"r{k}",
                job="cycle",
                started_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                finished_at=now.strftime("%Y-%m-%dT%H:%M:%SZ"),
                duration_s=1.0,
                status="ok",
                exit_code=0,
                forecast=forecast_summary(result.forecasts, [0.1, 0.5, 0.9], lead),
                plan=plan_summary(result.plan),
            ),
            result.plan,
        )
    code = main(
        [
            "report",
            "--out-dir",
            "rep",
            "-o",
            "json",
            "--backtest-origins",
            "0",
            "--records",
            "runs.sqlite",
            "--horizon",
            "2h",
        ]
    )
    assert code == 0
    capsys.readouterr()
    data = json.loads((workdir / "rep" / "report.json").read_text(encoding="utf-8"))
    sec = next(s for s in data["sections"] if s["key"] == "hindsight")
    assert sec["paragraphs"][0].startswith("From the run records")
    tables = {tb["key"]: tb["rows"] for tb in sec["tables"]}
    assert {r["pool"] for r in tables["hindsight_pools"]} >= {"h100-reserved", "l40s-on-demand"}
    for r in tables["hindsight_pools"]:
        assert r["planned_gpu_hours"] == pytest.approx(r["used_gpu_hours"] + r["idle_gpu_hours"])
    assert len(sec["charts"]) >= 4
    assert main(["report", "--out-dir", "rep2", "--records", "missing.sqlite"]) == 2
    assert "--records" in capsys.readouterr().err
