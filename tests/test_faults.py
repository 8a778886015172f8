"""Fault injection: each fault the README's fault table lists, through the one cycle job.

For every fault: the cycle completes or stops safely, nothing scales down on bad data, no
action is sent twice after a retry, the error shows in ``/metrics`` (``tiercast_errors_total``)
and in the log, and the next cycle, with the fault gone, recovers.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from forecaster.errors import TemporaryError
from scaler.actuation.protocol import ActionResult, RecordingProvider
from scaler.plans import Action
from scaler.records import RunStore
from scaler.service.cycle_job import CycleJob
from scaler.service.runs import Inputs, JobOutcome, Stop
from scaler.service.telemetry import Telemetry
from tests.prometheus_server import StubReply, StubServer, matrix_body


@pytest.fixture(autouse=True)
def _cwd_in_tmp(workdir: Path) -> Path:
    """The demo config's model store is the relative path ``models``: each test runs in a
    temporary folder of its own, so its fits land there and never in the checkout."""
    return workdir


NOW = pd.Timestamp("2026-11-30T12:00:00")
STEP = 60


def errors(telemetry: Telemetry) -> dict[tuple[str, str], float]:
    out = {}
    for metric in telemetry.registry.collect():
        if metric.name == "tiercast_errors":
            for s in metric.samples:
                if s.name.endswith("_total"):
                    out[(s.labels["kind"], s.labels["stage"])] = s.value
    return out


def decisions(outcome: JobOutcome) -> dict[str, str]:
    return {a["pool"]: a["decision"] for a in outcome.record.actions}


# -- Prometheus: down, slow, partial ----------------------------------------------------


def gauge_values(end: pd.Timestamp, level: float, upto: pd.Timestamp | None = None) -> bytes:
    """Two days of a flat gauge at ``level`` ending at ``upto`` (default ``end``)."""
    last = upto or end
    start = end - pd.Timedelta(days=2)
    times = pd.date_range(start, last, freq=f"{STEP}s")
    values = [(t.timestamp(), str(level)) for t in times]
    return matrix_body([({"__name__": "demand"}, values)])


def prom_config(tmp: Path, url: str) -> Path:
    data = {
        "signals": [{"name": "demand", "query": "demand", "step_s": STEP}],
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
                "current_nodes": 10,
                "max_nodes": 20,
            }
        ],
        "policy": {"scale_down_stabilization_s": 0, "staleness_limit_s": 900},
        "prometheus": {
            "url": url,
            "lookback_s": 2 * 86400,
            "retries": 0,
            "timeout_s": 1.0,
            "retry_backoff_s": 0,
        },
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def prom_job(config: Path, telemetry: Telemetry, store: RunStore) -> CycleJob:
    from scaler.inputs.loading import load_inputs

    args = argparse.Namespace(config=str(config), history=None, now=NOW.isoformat())

    def load() -> Inputs:
        cfg, history, now, label = load_inputs(args)
        return Inputs(cfg, history, now, label)

    provider = RecordingProvider({"h100": 10})
    return CycleJob(
        load=load,
        make_provider=lambda _c: provider,
        telemetry=telemetry,
        store=store,
        dry_run=False,
    )


@pytest.mark.parametrize("fault", ["down", "slow", "error-500"])
@pytest.mark.slow
def test_prometheus_unavailable_changes_nothing_and_the_next_cycle_recovers(
    fault: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    state = {"fault": fault}

    def reply(_handler: Any) -> StubReply:
        if state["fault"] == "slow":
            return StubReply(200, gauge_values(NOW, 8.0), delay_s=2.5)
        if state["fault"] in ("error-500", "down"):
            return StubReply(500, b'{"status":"error","errorType":"internal","error":"boom"}')
        return StubReply(200, gauge_values(NOW, 8.0))

    telemetry, store = Telemetry(), RunStore(tmp_path / "runs.sqlite")
    with StubServer(reply) as stub:
        url = "http://127.0.0.1:9" if fault == "down" else stub.url  # port 9: nothing listens
        job = prom_job(prom_config(tmp_path, url), telemetry, store)
        with caplog.at_level(logging.ERROR, logger="scaler.service.cycle_job"):
            bad = job()
        assert (bad.status, bad.exit_code, bad.record.actions) == ("failed", 1, [])
        assert isinstance(bad.error, TemporaryError)
        assert errors(telemetry).get(("prometheus_unavailable", "collect")) == 1
        assert "failed in collect" in caplog.text
        state["fault"] = "none"  # the fault is gone
        good = prom_job(prom_config(tmp_path, stub.url), telemetry, store)()
    assert good.status == "ok"
    assert decisions(good) == {"h100": "scale-down"}  # 8 GPUs of demand: 10 nodes is too many
    assert [r.status for r in store.recent()] == ["ok", "failed"]


@pytest.mark.slow
def test_prometheus_partial_data_holds_capacity(tmp_path: Path) -> None:
    # The series stops an hour before now: stale. The planner must not scale down on it.
    body = {"b": gauge_values(NOW, 8.0, upto=NOW - pd.Timedelta(hours=1))}

    def reply(_handler: Any) -> StubReply:
        return StubReply(200, body["b"])

    telemetry, store = Telemetry(), RunStore(tmp_path / "runs.sqlite")
    with StubServer(reply) as stub:
        config = prom_config(tmp_path, stub.url)
        held = prom_job(config, telemetry, store)()
        assert (held.status, held.exit_code) == ("held", 1)
        assert "scale-down" not in decisions(held).values()
        assert any("stale" in n for n in held.record.notes)
        text = telemetry.exposition().decode()
        assert "tiercast_held_gpu_models 1.0" in text
        assert 'tiercast_data_staleness_seconds{signal="demand"} 3600.0' in text
        body["b"] = gauge_values(NOW, 8.0)
        good = prom_job(config, telemetry, store)()
    assert good.status == "ok" and decisions(good) == {"h100": "scale-down"}


# -- API server and node agent: 409, 429, 500, timeouts, unreachable ----------------------


class FlakyProvider:
    """A recording provider whose next calls fail the way an API server does.

    ``fail``: a list of (when, error) consumed one per apply call: ``before`` fails
    without changing anything; ``after`` changes the pool and then fails (the answer
    was lost: a timeout after the write landed). ``inventory_down`` fails reads.
    """

    def __init__(self, inventory: dict[str, int]) -> None:
        self.inner = RecordingProvider(inventory)
        self.fail: list[tuple[str, TemporaryError]] = []
        self.inventory_down: TemporaryError | None = None
        self.apply_calls: list[tuple[str, int]] = []

    def inventory(self) -> dict[str, int]:
        if self.inventory_down is not None:
            raise self.inventory_down
        return self.inner.inventory()

    def apply(self, action: Action) -> ActionResult:
        self.apply_calls.append((action.pool, action.target_nodes))
        if self.fail:
            when, exc = self.fail.pop(0)
            if when == "after":
                self.inner.apply(action)
            raise exc
        return self.inner.apply(action)

    @property
    def scale_calls(self) -> list[dict]:
        return [c for c in self.inner.calls if c["verb"] == "scale"]


def demo_job(
    provider: FlakyProvider,
    telemetry: Telemetry,
    sleeps: list[float],
    store: RunStore | None = None,
) -> CycleJob:
    from scaler.inputs.demo import demo_inputs

    config, history, now = demo_inputs()
    return CycleJob(
        load=lambda: Inputs(config, history, now, "demo"),
        make_provider=lambda _c: provider,
        telemetry=telemetry,
        dry_run=False,
        retries=2,
        sleep=sleeps.append,
        store=store,
    )


def demo_inventory() -> dict[str, int]:
    from scaler.inputs.demo import demo_inputs

    config, _, _ = demo_inputs()
    return {p.name: p.current_nodes or p.min_nodes for p in config.pools}


@pytest.mark.slow
@pytest.mark.parametrize(
    "when, error, status, delay",
    [
        ("after", TemporaryError("PUT .../scale: timed out after 10 s"), "ok", 1.0),
        ("before", TemporaryError("PUT .../scale: HTTP 429 Too Many Requests", delay_s=3), "ok", 3),
        ("before", TemporaryError("PUT .../scale: HTTP 409 Conflict"), "ok", 1.0),
        ("before", TemporaryError("PUT .../scale: HTTP 500"), "ok", 1.0),
    ],
    ids=["timeout-after-write", "429", "409", "500"],
)
@pytest.mark.usefixtures("warm_demo_models")
def test_api_errors_are_retried_without_duplicate_actions(
    when: str, error: TemporaryError, status: str, delay: float, tmp_path: Path
) -> None:
    provider, telemetry, sleeps = FlakyProvider(demo_inventory()), Telemetry(), []
    provider.fail = [(when, error)]
    # With the run records, as the service runs: the second cycle knows what the first
    # raised and that it still boots (it keeps what bridges it).
    store = RunStore(tmp_path / "runs.sqlite")
    outcome = demo_job(provider, telemetry, sleeps, store)()
    assert outcome.status == status
    changed = [
        a for a in outcome.record.actions if a["decision"] != "no-op" and a["kind"] == "nodes"
    ]
    assert changed and all(a["outcome"] in ("applied", "recorded") for a in changed)
    # Each pool got exactly one scale call, however many attempts it took.
    pools = [c["pool"] for c in provider.scale_calls]
    assert len(pools) == len(set(pools)) == len(changed)
    assert sleeps == [delay]  # backoff, or the server's Retry-After
    assert errors(telemetry)[("temporary", "act")] == 1
    if when == "after":
        first = changed[0]
        assert "confirmed at" in first["message"]
        assert provider.apply_calls.count((first["pool"], first["target_nodes"])) == 1
    # The same cycle again: already at target, nothing is sent.
    again = demo_job(provider, telemetry, sleeps, store)()
    assert again.status == "ok" and len(provider.scale_calls) == len(changed)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_persistent_api_failure_fails_the_cycle_then_recovers(
    caplog: pytest.LogCaptureFixture,
) -> None:
    provider, telemetry, sleeps = FlakyProvider(demo_inventory()), Telemetry(), []
    provider.fail = [("before", TemporaryError("HTTP 500 Internal Server Error"))] * 3
    with caplog.at_level(logging.WARNING, logger="scaler.service.guarded"):
        outcome = demo_job(provider, telemetry, sleeps)()
    assert (outcome.status, outcome.exit_code) == ("failed", 1)
    failed = [a for a in outcome.record.actions if a["outcome"] == "failed"]
    assert len(failed) == 1 and "gave up after 3 attempts" in failed[0]["message"]
    assert "retrying in" in caplog.text
    assert errors(telemetry)[("temporary", "act")] == 3
    recovered = demo_job(provider, telemetry, sleeps)()
    assert recovered.status == "ok"
    pools = [c["pool"] for c in provider.scale_calls]
    assert len(pools) == len(set(pools))


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_node_agent_or_api_unreachable_on_inventory_changes_nothing() -> None:
    provider, telemetry, sleeps = FlakyProvider(demo_inventory()), Telemetry(), []
    provider.inventory_down = TemporaryError("GET /api/v1/nodes: connection refused")
    outcome = demo_job(provider, telemetry, sleeps)()
    assert (outcome.status, outcome.exit_code, provider.apply_calls) == ("failed", 1, [])
    assert errors(telemetry)[("temporary", "inventory")] == 1
    provider.inventory_down = None
    assert demo_job(provider, telemetry, sleeps)().status == "ok"


# -- records store unwritable ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_unwritable_run_records_fail_the_run_visibly_but_actions_stand(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    provider, telemetry = FlakyProvider(demo_inventory()), Telemetry()
    job = demo_job(provider, telemetry, [])
    job.store = RunStore(blocker / "runs.sqlite")
    outcome = job()
    assert outcome.status == "ok" and outcome.exit_code == 1
    assert errors(telemetry)[("records", "record")] == 1
    job.store = RunStore(tmp_path / "runs.sqlite")
    again = job()
    assert again.exit_code == 0 and RunStore(tmp_path / "runs.sqlite").recent()


# -- clock jump --------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_clock_jump_forward_holds_and_backward_is_harmless() -> None:
    from scaler.inputs.demo import demo_inputs

    config, history, now = demo_inputs()
    inventory = {p.name: p.current_nodes or p.min_nodes for p in config.pools}
    clock = {"now": now + pd.Timedelta(hours=3)}  # the node's clock jumped 3 h ahead
    provider, telemetry = RecordingProvider(inventory), Telemetry()
    job = CycleJob(
        load=lambda: Inputs(config, history, None, "demo"),
        make_provider=lambda _c: provider,
        telemetry=telemetry,
        clock=lambda: clock["now"],
        dry_run=False,
    )
    jumped = job()
    assert jumped.status == "held"
    assert "scale-down" not in decisions(jumped).values()
    staleness = telemetry.registry.get_sample_value(
        "tiercast_data_staleness_seconds", {"signal": "chat_rps"}
    )
    assert staleness is not None and math.isclose(staleness, 3 * 3600 + 300)
    clock["now"] = now - pd.Timedelta(hours=1)  # and back behind the data
    back = job()
    assert back.status == "ok" and back.error is None


# -- SIGTERM mid-cycle -------------------------------------------------------------------


class StopsOnFirstApply(RecordingProvider):
    """SIGTERM arrives while the first action is being applied."""

    def __init__(self, inventory: dict[str, int], stop: Stop) -> None:
        super().__init__(inventory)
        self.stop = stop

    def apply(self, action: Action) -> ActionResult:
        self.stop.set(15)
        return super().apply(action)


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_sigterm_mid_cycle_finishes_the_action_in_flight_and_sends_no_more(
    tmp_path: Path,
) -> None:
    from scaler.inputs.demo import demo_inputs

    config, history, now = demo_inputs()
    inventory = {p.name: p.current_nodes or p.min_nodes for p in config.pools}
    stop = Stop()
    provider = StopsOnFirstApply(inventory, stop)
    store = RunStore(tmp_path / "runs.sqlite")
    job = CycleJob(
        load=lambda: Inputs(config, history, now, "demo"),
        make_provider=lambda _c: provider,
        store=store,
        stop=stop,
        dry_run=False,
    )
    outcome = job()
    assert (outcome.status, outcome.exit_code) == ("abandoned", 143)
    outcomes = [a["outcome"] for a in outcome.record.actions if a["decision"] != "no-op"]
    assert outcomes[0] == "recorded" and set(outcomes[1:]) == {"skipped"} and len(outcomes) > 1
    assert len(provider.calls) == 1
    assert json.loads(json.dumps(store.recent()[0].to_dict()))["status"] == "abandoned"
    # A restarted process (a fresh stop flag) finishes the job, without repeating the first.
    job.stop = Stop()
    provider.stop = Stop()
    resumed = job()
    assert resumed.status == "ok"
    pools = [c["pool"] for c in provider.calls]
    assert len(pools) == len(set(pools)) == len(outcomes)


# -- model store unwritable or corrupt (the refit job), and the report job --------------


@pytest.mark.slow
def test_refit_with_corrupt_or_unwritable_model_store_completes(tmp_path: Path) -> None:
    from scaler.inputs.demo import demo_inputs
    from scaler.service.scheduled import ScheduledJob, refit_models, write_capacity_report

    config, history, now = demo_inputs()
    models = tmp_path / "models"
    config = config.model_copy(
        update={"model_store": config.model_store.model_copy(update={"path": str(models)})}
    )
    telemetry, store = Telemetry(), RunStore(tmp_path / "runs.sqlite")

    def job() -> ScheduledJob:
        return ScheduledJob(
            "refit", lambda: Inputs(config, history, now, "demo"), refit_models, telemetry, store
        )

    first = job()()
    assert first.status == "ok", first.record.error
    files = sorted(models.iterdir())
    assert files
    for f in files:  # every artifact corrupted on disk
        f.write_bytes(b"\x00garbage")
    second = job()()
    assert second.status == "ok" and any("chat_rps" in n for n in second.record.notes)
    # An unwritable volume: the store's folder is a plain file (permissions do not stop root).
    blocked = tmp_path / "blocked"
    blocked.write_text("not a folder")
    config = config.model_copy(
        update={"model_store": config.model_store.model_copy(update={"path": str(blocked)})}
    )
    third = job()()
    assert third.status == "ok"
    report = ScheduledJob(
        "report",
        lambda: Inputs(config, history, now, "demo"),
        write_capacity_report(str(tmp_path / "reports")),
        telemetry,
        store,
    )()
    assert report.status == "ok" and any(n.endswith(".html") for n in report.record.notes)
    assert [r.job for r in store.recent()] == ["report", "refit", "refit", "refit"]
    broken = ScheduledJob(
        "report",
        lambda: (_ for _ in ()).throw(TemporaryError("Prometheus down")),
        write_capacity_report(str(tmp_path / "reports")),
        telemetry,
        store,
    )()
    assert broken.status == "failed" and errors(telemetry)[("temporary", "report")] == 1


@pytest.mark.slow
def test_sigterm_during_a_slow_collection_still_leaves_a_run_record(tmp_path: Path) -> None:
    import os
    import signal
    import subprocess
    import sys
    import time

    from tests.conftest import REPO

    with StubServer(lambda _: StubReply(200, gauge_values(NOW, 8.0), delay_s=3.0)) as stub:
        config = prom_config(tmp_path, stub.url)
        data = yaml.safe_load(config.read_text())
        data["prometheus"]["timeout_s"] = 10.0
        data["service"] = {"records_path": str(tmp_path / "runs.sqlite")}
        config.write_text(yaml.safe_dump(data))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "scaler.cli",
                "run",
                "--dry-run",
                "--config",
                str(config),
                "--now",
                NOW.isoformat(),
            ],
            cwd=tmp_path,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not stub.requests and time.monotonic() < deadline:
                time.sleep(0.1)
            assert stub.requests, "the run never queried Prometheus"
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
    assert proc.returncode == 143, err[-1500:]
    [record] = RunStore(tmp_path / "runs.sqlite").recent()
    assert record.status == "abandoned" and record.exit_code == 143
