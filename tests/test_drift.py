"""Forecasts that notice drift: judged from the run records, refitted once, said once.

A signal whose level shifted away from what its recorded forecasts said is out of band
(coverage and error) for longer than ``drift.for_s``: the cycle refits its model ahead of
schedule, re-learns its margin, writes one Event, counts it, and the next cycle, whose
window still holds the old forecasts, does not refit again.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, ConfigError, DriftConfig, parse_config
from scaler.inputs.demo import DEMO_CONFIG
from scaler.plans import iso
from scaler.records import RunRecord, RunStore
from scaler.service.cycle import forecast_for_plan, model_store_for
from scaler.service.cycle_job import CycleJob
from scaler.service.drift import forecast_pairs, judge
from scaler.service.runs import Inputs
from scaler.service.telemetry import Telemetry

NOW = pd.Timestamp("2026-03-10T12:00:00")
STEP = pd.Timedelta(minutes=5)


class EventfulProvider(RecordingProvider):
    """A recording provider that keeps the Events it is asked to write."""

    def __init__(self, inventory: dict[str, int]) -> None:
        super().__init__(inventory)
        self.events: list[tuple[str, str]] = []

    def record_event(self, reason: str, note: str) -> None:
        self.events.append((reason, note))


def _config(tmp_path: Path) -> Config:
    return parse_config(
        {
            "signals": [{"name": "rps"}],
            "workloads": [
                {"name": "w", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10}
            ],
            "pools": [
                {
                    "name": "od",
                    "tier": "on-demand",
                    "gpu_model": "H100",
                    "gpus_per_node": 8,
                    "price_per_gpu_hour": 4.0,
                    "lead_time_s": 600,
                }
            ],
            "forecast": {"method": "seasonal_naive_1d"},
            "policy": {"growth_backtest_s": 0},
            "model_store": {"path": str(tmp_path / "models")},
        }
    )


def _history(level_after: float) -> dict[str, pd.Series]:
    """Three days at 100, then the last eight hours at ``level_after``."""
    idx = pd.date_range(NOW - pd.Timedelta(days=3), NOW - STEP, freq=STEP, name="timestamp")
    y = np.where(idx >= NOW - pd.Timedelta(hours=8), level_after, 100.0)
    return {"rps": pd.Series(y, index=idx, name="rps")}


def _recorded(store: RunStore, hours: float, median: float) -> None:
    """Cycles of the last ``hours`` that forecast ``median`` +-10% one lead time ahead."""
    for k in range(int(hours * 12)):
        at = NOW - pd.Timedelta(hours=hours) + k * STEP
        store.add(
            RunRecord(
                run_id=f"old{k:04d}",
                job="cycle",
                started_at=iso(at),
                finished_at=iso(at),
                duration_s=1.0,
                status="ok",
                exit_code=0,
                dry_run=True,
                forecast={
                    "rps": {
                        "last_timestamp": iso(at - STEP),
                        "at_lead": {"q0.1": median * 0.9, "q0.5": median, "q0.9": median * 1.1},
                    }
                },
            )
        )


def _job(config: Config, history: dict[str, pd.Series], store: RunStore, now: pd.Timestamp) -> Any:
    provider = EventfulProvider({"od": 2})
    telemetry = Telemetry()
    job = CycleJob(
        load=lambda: Inputs(config, history, now, "test"),
        make_provider=lambda _config: provider,
        telemetry=telemetry,
        store=store,
    )
    return job, provider, telemetry


@pytest.mark.slow
def test_a_drifted_signal_triggers_exactly_one_refit_and_one_event(tmp_path: Path) -> None:
    config = _config(tmp_path)
    history = _history(300.0)  # demand tripled; the recorded forecasts said 100
    store = RunStore(tmp_path / "records.sqlite", keep_days=3650)
    _recorded(store, hours=6, median=100.0)
    models = model_store_for(config.model_store)
    # a stored model, fitted before the drift
    forecast_for_plan(
        config.pools, config.policy, config.forecast, config.model_store, history, NOW
    )
    fitted = models.stats["fitted"]

    job, provider, telemetry = _job(config, history, store, NOW)
    outcome = job()
    assert outcome.status == "ok", outcome.error
    assert models.stats["fitted"] == fitted + 1  # refitted ahead of its daily age limit
    assert [reason for reason, _ in provider.events] == ["ForecastDrift"]
    note = provider.events[0][1]
    assert note.startswith("signal 'rps': forecasts drifted, q0.1-q0.9 covered 0% of actuals")
    assert "refitted ahead of schedule, margin re-learned" in note
    assert outcome.result.plan.risk["drift"]["rps"]["coverage"] == 0.0
    (planned,) = [n for n in outcome.result.plan.notes if str(n) == note]
    # The plan keeps the note as a reason: a Russian review says it in Russian.
    assert planned.text("ru").startswith("сигнал 'rps': прогнозы разошлись с фактом, q0.1-q0.9")
    text = telemetry.exposition().decode()
    assert 'tiercast_drift_refits_total{signal="rps"} 1.0' in text
    assert 'tiercast_forecast_drifted{signal="rps"} 1.0' in text

    # The next cycle's window still holds the old model's forecasts: no second refit.
    again, provider2, _ = _job(config, history, store, NOW + STEP)
    assert again().status == "ok"
    assert models.stats["fitted"] == fitted + 1
    assert provider2.events == []


@pytest.mark.slow
def test_forecasts_within_their_band_refit_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path)
    history = _history(100.0)
    store = RunStore(tmp_path / "records.sqlite", keep_days=3650)
    _recorded(store, hours=6, median=100.0)
    job, provider, telemetry = _job(config, history, store, NOW)
    assert job().status == "ok"
    assert provider.events == []
    assert 'tiercast_forecast_drifted{signal="rps"} 0.0' in telemetry.exposition().decode()


def test_drift_must_last_for_s_before_a_refit() -> None:
    config = DriftConfig(window_s=1800, for_s=1800, min_points=3)
    history = _history(300.0)

    def record(made: pd.Timestamp, level: float) -> Any:
        quantiles = {"q0.1": level * 0.9, "q0.5": level, "q0.9": level * 1.1}
        return type(
            "Record",
            (),
            {
                "job": "cycle",
                "forecast": {"rps": {"last_timestamp": iso(made), "at_lead": quantiles}},
            },
        )()

    # Right for two hours, wrong (100 against 300) for the last 20 minutes only.
    made = [NOW - pd.Timedelta(hours=2) + k * STEP for k in range(24)]
    records = [record(m, 100.0 if m >= NOW - pd.Timedelta(minutes=20) else 300.0) for m in made]
    verdict = judge(forecast_pairs(records, history, 0), config, NOW - STEP, 300)["rps"]
    # Out of band now (4 of the window's 6 outside q0.1-q0.9), but not for 30 minutes.
    assert verdict.out_of_band and not verdict.drifted
    assert verdict.coverage == pytest.approx(2 / 6)
    # Wrong for the whole last hour: drifted.
    records = [record(m, 100.0 if m >= NOW - pd.Timedelta(hours=1) else 300.0) for m in made]
    assert judge(forecast_pairs(records, history, 0), config, NOW - STEP, 300)["rps"].drifted


@pytest.mark.parametrize(
    ("drift", "expected"),
    [
        ({"window_s": 10}, "drift.window_s"),
        ({"min_coverage": 1.5}, "drift.min_coverage"),
        ({"max_error": 0}, "drift.max_error"),
        ({"min_points": True}, "drift.min_points: expected a number, got true"),
    ],
)
def test_bad_drift_config_is_one_line(drift: dict[str, Any], expected: str) -> None:
    data = copy.deepcopy(DEMO_CONFIG)
    data["drift"] = drift
    with pytest.raises(ConfigError) as info:
        parse_config(data, "cfg.yaml")
    message = str(info.value)
    assert "\n" not in message and expected in message


@pytest.mark.slow
def test_the_review_lists_each_drift_refit() -> None:
    from scaler.config import FinanceConfig
    from scaler.reports import reviewing
    from scaler.reports.finance import PricedFleet
    from scaler.reports.hindsight import hindsight_section
    from tests.test_reviewing import OD, T0, _cycle, _history, fleet

    config = fleet([{**OD, "max_nodes": 100}])
    first, second = _cycle(T0, 4.0, 1), _cycle(T0 + STEP, 4.0, 1)
    drift = {"rps": {"coverage": 0.0, "error": 0.8, "points": 72, "band": "q0.1-q0.9"}}
    cycles = [
        first,
        reviewing.RecordedCycle(
            second.created_at, second.forecast, {**second.plan, "risk": {"drift": drift}}
        ),
    ]
    h = reviewing.from_records(PricedFleet.of(config), _history({}), cycles, 0.9)
    assert h.drift[["signal", "points"]].to_dict(orient="records") == [
        {"signal": "rps", "points": 72}
    ]
    section = hindsight_section(h, FinanceConfig(), 0.1, 0.9, "en")
    assert (
        "Forecast drift: the model of signal 'rps' was refitted ahead of schedule at "
        "2027-01-10 00:05 UTC (q0.1-q0.9 covered 0% of actuals, the median was off by 80%"
    ) in " ".join(section.paragraphs)
    assert reviewing.to_dict(h)["drift"][0]["signal"] == "rps"


def test_the_drift_event_is_written_through_the_kubernetes_api(
    tmp_path: Path, clock: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scaler.actuation.kube.transport import RetryPolicy
    from tests.fake_kube import connect_to, start_fake
    from tests.test_kube_providers import provider_for, seed

    monkeypatch.setenv("POD_NAME", "tiercast-0")
    monkeypatch.setenv("POD_NAMESPACE", "tiercast-system")
    fake = start_fake()
    try:
        seed(fake)
        transport = connect_to(
            fake, tmp_path, RetryPolicy(4, 0.05, 0.2, sleep=clock.sleep), timeout_s=0.3
        )
        provider = provider_for(transport, clock)
        provider.record_event("ForecastDrift", "signal 'rps': forecasts drifted")
        [event] = [o for k, o in fake.state.objects.items() if k[1] == "events"]
    finally:
        fake.stop()
    assert (event["reason"], event["type"], event["action"]) == (
        "ForecastDrift",
        "Warning",
        "Refit",
    )
    assert event["regarding"] == {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": "tiercast-0",
        "namespace": "tiercast-system",
    }
    assert event["note"] == "signal 'rps': forecasts drifted"


def test_drift_defaults_are_pinned() -> None:
    d = DriftConfig()
    assert (d.enabled, d.window_s, d.for_s, d.min_coverage, d.max_error, d.min_points) == (
        True,
        21600,
        1800,
        0.5,
        0.5,
        12,
    )
