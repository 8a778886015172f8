"""Suspect data holds capacity: label sets that stop reporting, zeros unlike the past,
spikes, and a need no pool could hold (``forecaster.suspect``, the planner's holds).

Each cycle test also plans the same data with the screening left out, so it shows the
scale-down (or the jump to the maximum) that the suspect data caused before.
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from forecaster.suspect import (
    BELIEVED_AFTER,
    Suspicion,
    mark,
    marked,
    screen_history,
    spikes,
    stopped_label_sets,
    zero_run,
)
from scaler.actuation.protocol import RecordingProvider
from scaler.config import Config, parse_config
from scaler.planning import tiers as tiers_module
from scaler.records import RunStore
from scaler.service import cycle as cycle_module
from scaler.service.cycle import run_cycle
from scaler.service.cycle_job import CycleJob
from scaler.service.runs import Inputs
from scaler.service.telemetry import Telemetry
from tests.prometheus_server import StubReply, StubServer, matrix_body

NOW = pd.Timestamp("2026-11-30T12:00:00")
STEP = pd.Timedelta(minutes=5)
MINUTE = pd.Timedelta(minutes=1)


def _config(tmp: Path, **signal: Any) -> dict[str, Any]:
    return {
        "signals": [{"name": "demand", "step_s": 300, **signal}],
        "workloads": [
            {"name": "w", "signal": "demand", "gpu_model": "H100", "units_per_replica": 1.0}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "lead_time_s": 600,
                "current_nodes": 5,
                "max_nodes": 20,
            }
        ],
        "forecast": {"method": "seasonal_naive_1d"},
        "policy": {"scale_down_stabilization_s": 0, "staleness_limit_s": 900},
        "model_store": {"path": str(tmp / "models")},
        "service": {"records_path": str(tmp / "runs.sqlite")},
    }


def _history(level: float = 36.0, days: int = 3) -> pd.Series:
    """A gently daily gauge around ``level`` ending one step before NOW (never zero)."""
    index = pd.date_range(NOW - pd.Timedelta(days=days), NOW - STEP, freq=STEP, name="timestamp")
    hours = (index.hour + index.minute / 60).to_numpy()
    return pd.Series(level + 2 * np.sin(2 * math.pi * hours / 24), index=index, name="demand")


def _cycle(config: Config, y: pd.Series, *, screen: bool = True) -> Any:
    provider = RecordingProvider({"h100": 5})
    if screen:
        return run_cycle(config, {"demand": y}, provider, NOW, dry_run=True)
    with pytest.MonkeyPatch.context() as mp:
        # What the cycle did before suspect data was screened: the history as given, and
        # any need planned on.
        mp.setattr(cycle_module, "screen_history", _unscreened)
        mp.setattr(tiers_module, "implausible_models", lambda _pools, _levels: {})
        return run_cycle(config, {"demand": y}, provider, NOW, dry_run=True)


def _unscreened(history: Any, now: Any, recent: Any) -> Any:
    from forecaster.suspect import Screened

    return Screened(dict(history), {}, [])


def _decision(result: Any) -> tuple[str, int]:
    [action] = [a for a in result.plan.actions if a.pool == "h100"]
    return action.decision, action.target_nodes


# -- series rules ------------------------------------------------------------------------


def test_an_hour_of_zeros_unlike_the_past_is_suspect_and_missing() -> None:
    y = _history()
    y[y.index >= NOW - pd.Timedelta(hours=1)] = 0.0
    out, found = zero_run(y, NOW)
    assert found is not None and found.hold
    assert found.since == NOW - pd.Timedelta(hours=1)
    assert "zeros since 2026-11-30 11:00Z (12 sample(s))" in found.why
    assert out[out.index >= found.since].isna().all() and out.notna().sum() == len(y) - 12


def test_zeros_as_long_as_before_or_believed_after_a_day_are_not_suspect() -> None:
    y = _history()
    night = (y.index >= NOW - pd.Timedelta(hours=30)) & (y.index < NOW - pd.Timedelta(hours=26))
    y[night] = 0.0  # four hours of zeros yesterday
    y[y.index >= NOW - pd.Timedelta(hours=1)] = 0.0
    assert zero_run(y, NOW)[1] is None
    flat = _history(days=3)
    flat[flat.index >= NOW - BELIEVED_AFTER - STEP] = 0.0
    assert zero_run(flat, NOW)[1] is None
    never = pd.Series(0.0, index=_history().index)
    assert zero_run(never, NOW)[1] is None


def test_a_spike_1000x_the_q99_is_missing_and_holds_only_when_newest() -> None:
    y = _history()
    y.iloc[-1] = 1e14
    out, found = spikes(y, pd.Timedelta(minutes=15))
    assert found is not None and found.hold and np.isnan(out.iloc[-1])
    assert "1 sample(s) over 1000x its q0.99" in found.why
    old = _history()
    old.iloc[100] = 1e14
    out, found = spikes(old, pd.Timedelta(minutes=15))
    assert found is not None and not found.hold and np.isnan(out.iloc[100])
    assert spikes(_history() * 900, pd.Timedelta(minutes=15))[1] is None


def test_a_mark_survives_the_history_and_masks_from_its_time() -> None:
    y = _history()
    since = NOW - pd.Timedelta(minutes=30)
    marked_y = mark(y, Suspicion(since, "2 of 4 label sets stopped reporting"))
    assert marked(marked_y) is not None and marked(y) is None
    assert marked(marked_y.rename("x")[marked_y.index < NOW]) is not None
    screened = screen_history({"demand": marked_y}, NOW, pd.Timedelta(minutes=15))
    assert screened.held == {"demand": "2 of 4 label sets stopped reporting"}
    assert screened.history["demand"][since:].isna().all()


# -- label sets ---------------------------------------------------------------------------


def _label_sets(
    n: int, stopped: int, stop_at: pd.Timestamp, last_value: float = 4.0
) -> dict[str, pd.Series]:
    index = pd.date_range(stop_at - pd.Timedelta(hours=6), NOW - MINUTE, freq=MINUTE)
    sets = {}
    for i in range(n):
        s = pd.Series(4.0, index=index)
        if i < stopped:
            s = s[s.index < stop_at].copy()
            s.iloc[-1] = last_value
        sets[f'{{pod="p{i}"}}'] = s
    return sets


def _sum(sets: dict[str, pd.Series]) -> pd.Series:
    return pd.concat(list(sets.values()), axis=1).sum(axis=1, min_count=1)


def test_label_sets_that_stop_reporting_leave_a_partial_sum() -> None:
    stop = NOW - pd.Timedelta(hours=1)
    sets = _label_sets(10, 5, stop)
    found = stopped_label_sets(sets, _sum(sets), NOW, pd.Timedelta(minutes=15))
    assert found is not None and found.since == stop
    assert found.why.startswith("5 of 10 label sets stopped reporting at 2026-11-30 11:00Z")


def test_drained_replaced_or_long_gone_label_sets_are_no_gap() -> None:
    limit = pd.Timedelta(minutes=15)
    stop = NOW - pd.Timedelta(hours=1)
    drained = _label_sets(10, 5, stop, last_value=0.0)
    assert stopped_label_sets(drained, _sum(drained), NOW, limit) is None
    replaced = _label_sets(10, 5, stop)
    for i in range(5):  # new pods took their place
        replaced[f'{{pod="new{i}"}}'] = pd.Series(
            4.0, index=pd.date_range(stop, NOW - MINUTE, freq=MINUTE)
        )
    assert stopped_label_sets(replaced, _sum(replaced), NOW, limit) is None
    took_up = _label_sets(10, 5, stop)
    for i in range(5, 10):  # the others took the load up
        s = took_up[f'{{pod="p{i}"}}']
        s[s.index >= stop] = 8.0
    assert stopped_label_sets(took_up, _sum(took_up), NOW, limit) is None
    gone = _label_sets(10, 5, NOW - BELIEVED_AFTER - STEP)
    assert stopped_label_sets(gone, _sum(gone), NOW, limit) is None


def _prom_body(stopped: int, level: float = 4.0) -> bytes:
    start = NOW - pd.Timedelta(days=2)
    series = []
    for i in range(10):
        last = NOW - pd.Timedelta(hours=1) if i < stopped else NOW
        times = pd.date_range(start, last, freq="300s", inclusive="left")
        series.append(({"pod": f"p{i}"}, [(t.timestamp(), str(level)) for t in times]))
    return matrix_body(series)


def _prom_job(tmp: Path, url: str) -> CycleJob:
    from scaler.inputs.loading import load_inputs

    data = _config(tmp, query="sum by (pod) (demand)")
    data["prometheus"] = {"url": url, "lookback_s": 2 * 86400, "retries": 0, "timeout_s": 5}
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    args = argparse.Namespace(config=str(path), history=None, now=NOW.isoformat())

    def load() -> Inputs:
        cfg, history, now, label = load_inputs(args)
        return Inputs(cfg, history, now, label)

    return CycleJob(
        load=load,
        make_provider=lambda _c: RecordingProvider({"h100": 5}),
        telemetry=Telemetry(),
        store=RunStore(tmp / "runs.sqlite"),
        dry_run=False,
    )


@pytest.mark.slow
def test_five_of_ten_label_sets_stopping_for_an_hour_hold_the_pool(tmp_path: Path) -> None:
    # Ten pods at 4 each (40 GPUs: the 5 nodes there are); five stop reporting an hour ago,
    # and the sum of the rest, 20, would release 2 of the nodes.
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    with StubServer(lambda _h: StubReply(200, _prom_body(stopped=5))) as stub:
        held = _prom_job(tmp_path / "a", stub.url)()
        with pytest.MonkeyPatch.context() as mp:
            mp.setattr(cycle_module, "screen_history", _unscreened)
            before = _prom_job(tmp_path / "b", stub.url)()
    assert [(a["decision"], a["target_nodes"]) for a in before.record.actions] == [
        ("scale-down", 3)
    ]
    assert (held.status, held.exit_code, held.record.actions) == ("held", 1, [])
    assert held.record.plan["pools"]["h100"]["target_nodes_now"] == 5
    why = held.record.plan["risk"]["held_models"]["H100-80GB"]
    assert why.startswith(
        "signal 'demand': 5 of 10 label sets stopped reporting at 2026-11-30 11:00Z"
    )


# -- the cycle ---------------------------------------------------------------------------


def test_an_hour_of_zeros_holds_the_pool_where_it_released_all(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path))
    y = _history()
    y[y.index >= NOW - pd.Timedelta(hours=1)] = 0.0
    assert _decision(_cycle(config, y, screen=False)) == ("scale-down", 0)
    result = _cycle(config, y)
    assert _decision(result) == ("no-op", 5)
    assert result.plan.risk["held_models"]["H100-80GB"].startswith(
        "signal 'demand': zeros since 2026-11-30 11:00Z"
    )
    assert any("zeros since" in str(n) and "no scale-down" in str(n) for n in result.plan.notes)


def test_a_1e14_spike_holds_the_pool_where_it_bought_the_maximum(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path))
    y = _history()
    y.iloc[-1] = 1e14
    assert _decision(_cycle(config, y, screen=False)) == ("scale-up", 13)  # 5 + max step 8
    result = _cycle(config, y)
    assert _decision(result) == ("no-op", 5)
    assert "over 1000x its q0.99" in result.plan.risk["held_models"]["H100-80GB"]


def test_an_old_spike_is_a_gap_and_noted_not_held(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path))
    y = _history()
    y.iloc[-300] = 1e14
    result = _cycle(config, y)
    assert result.plan.risk["held_models"] == {}
    assert any("over 1000x its q0.99" in str(n) for n in result.plan.notes)
    assert _decision(result) == ("no-op", 5)


def test_demand_past_anything_the_pools_hold_is_held(tmp_path: Path) -> None:
    config = parse_config(_config(tmp_path))
    y = _history() * 0 + 9.9e14  # in range, and steady: no spike, no zeros
    assert _decision(_cycle(config, y, screen=False)) == ("scale-up", 13)
    result = _cycle(config, y)
    assert _decision(result) == ("no-op", 5)
    assert "over 1000x the 160 its pools can hold" in result.plan.risk["held_models"]["H100-80GB"]


def test_units_per_replica_below_1e_6_is_a_one_line_config_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from scaler.cli import main

    data = _config(tmp_path, file="demand.csv")
    data["workloads"][0]["units_per_replica"] = 1e-9
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    _history().to_frame("value").to_csv(tmp_path / "demand.csv")
    code = main(["run", "--dry-run", "--config", str(path), "--plan-out", str(tmp_path / "p")])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1
    assert "workloads[0].units_per_replica" in err[0] and "0.000001" in err[0]
    assert not (tmp_path / "p").exists()
