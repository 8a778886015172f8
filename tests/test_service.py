"""Service mode: schedules, the scheduler (no overlap, counted skips), the metrics endpoint and
probes, JSON logs without secrets, Lease leader election against the fake API server, and
``tiercast serve`` end to end against the real test Prometheus (in process, and SIGTERM on a
subprocess)."""

from __future__ import annotations

import argparse
import datetime as dt
import io
import json
import logging
import os
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from scaler.config import ServiceConfig, parse_config, parse_schedule
from scaler.inputs.demo import DEMO_CONFIG, demo_inputs
from scaler.records import RunStore
from scaler.service.cycle_job import CycleJob
from scaler.service.leader import LeaseElector
from scaler.service.runs import Inputs, Stop
from scaler.service.scheduler import Service
from scaler.service.telemetry import JsonFormatter, MetricsServer, RedactSecrets, Telemetry, redact
from scaler.service.wiring import provider_factory
from tests.conftest import REPO
from tests.fake_kube import TOKEN, FakeKube, kubeconfig_for
from tests.prometheus_server import DIRTY_GAUGE, DIRTY_START, PrometheusServer, prometheus

__all__ = ["prometheus"]  # the session fixture, imported for use here

LEASES = "/apis/coordination.k8s.io/v1/namespaces/default/leases"


def test_service_defaults_are_pinned() -> None:
    s = ServiceConfig()
    assert (s.cycle_schedule, s.refit_schedule, s.report_schedule) == (
        "*/5 * * * *",
        "17 3 * * *",
        "0 6 * * 1",
    )
    assert (s.misfire_grace_s, s.shutdown_grace_s, s.records_keep_days) == (120, 25.0, 30)
    assert (s.metrics_port, s.log_format, s.leader_election) == (9108, "text", False)
    assert (s.lease_name, s.lease_duration_s, s.lease_renew_s, s.action_retries) == (
        "tiercast-leader",
        15,
        5.0,
        2,
    )


def test_schedules_use_cron_weekday_numbers_seconds_and_intervals() -> None:
    monday = dt.datetime(2026, 11, 30, 0, 0, tzinfo=dt.UTC)  # a Monday
    weekly = parse_schedule("0 6 * * 1")
    assert weekly.get_next_fire_time(None, monday) == monday.replace(hour=6)
    sunday = parse_schedule("0 6 * * 0").get_next_fire_time(None, monday)
    assert (
        sunday.weekday() == 6
        and parse_schedule("0 6 * * 7").get_next_fire_time(None, monday) == sunday
    )
    assert parse_schedule("*/10 * * * * *").get_next_fire_time(
        None, monday.replace(second=1)
    ) == monday.replace(second=10)
    assert parse_schedule("@every 90s").interval.total_seconds() == 90
    with pytest.raises(Exception, match=r"service\.cycle_schedule") as info:
        parse_config({**DEMO_CONFIG, "service": {"cycle_schedule": "*/5 * * *"}}, "c.yaml")
    assert "expected 5 cron fields" in str(info.value) and "\n" not in str(info.value)


@pytest.fixture
def quiet_service() -> Iterator[list[Service]]:
    made: list[Service] = []
    yield made
    for s in made:
        if s.scheduler.running:
            s.shutdown(1.0)


@pytest.mark.slow
def test_scheduler_runs_jobs_without_overlap_and_counts_skips(
    quiet_service: list[Service], workdir: Path
) -> None:
    # In a temporary folder: the demo config's model store is the relative ``models``.
    config, _, _ = demo_inputs()
    config = config.model_copy(update={"service": ServiceConfig(metrics_port=0, misfire_grace_s=5)})
    fast_runs: list[float] = []
    running, most = [0], [0]
    lock = threading.Lock()

    def slow() -> None:
        with lock:
            running[0] += 1
            most[0] = max(most[0], running[0])
        time.sleep(0.7)
        with lock:
            running[0] -= 1

    telemetry, stop = Telemetry(), Stop()
    from scaler.service.leader import AlwaysLeader

    service = Service(
        config,
        {
            "fast": ("@every 0.2s", lambda: fast_runs.append(time.monotonic())),
            "slow": ("@every 0.2s", slow),
        },
        telemetry,
        AlwaysLeader(),
        stop,
    )
    quiet_service.append(service)
    service.start()
    assert service.readyz() == (True, "ok") and service.healthz() == (True, "ok")
    time.sleep(1.8)
    assert service.shutdown(2.0)
    assert len(fast_runs) >= 4
    assert most[0] == 1
    text = telemetry.exposition().decode()
    assert 'tiercast_job_skipped_total{reason="overlap",task="slow"}' in text
    assert service.readyz() == (False, "shutting down")


def get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


@pytest.mark.slow
def test_metrics_endpoint_and_probes(workdir: Path) -> None:
    config, history, now = demo_inputs()
    telemetry = Telemetry()
    ready = [False]
    server = MetricsServer(
        telemetry, "127.0.0.1", 0, lambda: (True, "ok"), lambda: (ready[0], "starting")
    ).start()
    try:
        base = f"http://127.0.0.1:{server.port}"
        assert get(base + "/readyz") == (503, "starting\n")
        ready[0] = True
        assert get(base + "/readyz")[0] == 200 and get(base + "/healthz")[0] == 200
        assert get(base + "/nope")[0] == 404
        job = CycleJob(
            load=lambda: Inputs(config, history, now, "demo"),
            make_provider=provider_factory(dry_run=True),
            telemetry=telemetry,
        )
        assert job().status == "ok"
        code, text = get(base + "/metrics")
    finally:
        server.stop()
    assert code == 200
    for needle in (
        'tiercast_forecast{at="lead",quantile="0.9",signal="chat_rps"}',
        'tiercast_capacity_planned_nodes{pool="h100-spot",tier="spot"}',
        'tiercast_capacity_actual_nodes{pool="h100-spot",tier="spot"}',
        'tiercast_job_runs_total{status="ok",task="cycle"} 1.0',
        'tiercast_data_staleness_seconds{signal="chat_rps"} 300.0',
        "tiercast_job_duration_seconds_bucket",
        "tiercast_actions_total{",
        "tiercast_cost_per_hour",
    ):
        assert needle in text, needle


def test_json_logs_carry_fields_and_never_secrets() -> None:
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactSecrets())
    logger = logging.getLogger("tiercast.test.json")
    logger.addHandler(handler)
    logger.propagate = False
    try:
        logger.warning(
            "GET https://admin:hunter2@prom.example/api failed; Authorization: Bearer abc.def",
            extra={"run_id": "r1", "stage": "collect"},
        )
        try:
            raise RuntimeError("password=s3cret rejected")
        except RuntimeError:
            logger.exception("login failed")
    finally:
        logger.removeHandler(handler)
    lines = [json.loads(line) for line in stream.getvalue().splitlines()]
    assert lines[0]["level"] == "warning" and lines[0]["run_id"] == "r1"
    assert lines[0]["stage"] == "collect" and lines[0]["time"].endswith("+00:00")
    text = stream.getvalue()
    for secret in ("hunter2", "abc.def", "s3cret"):
        assert secret not in text
    assert "RuntimeError" in lines[1]["message"]
    assert redact("token=xyz, user=bob") == "token=***, user=bob"


@pytest.fixture
def fake_kube() -> Iterator[FakeKube]:
    fake = FakeKube()
    fake.start()
    yield fake
    fake.stop()


def lease_api(fake: FakeKube) -> k8s.CoordinationV1Api:
    cfg = k8s.Configuration()
    cfg.host = fake.url
    cfg.api_key = {"authorization": f"Bearer {TOKEN}"}
    return k8s.CoordinationV1Api(k8s.ApiClient(cfg))


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


class CountingProvider:
    """A recording provider that counts the apply calls it received."""

    def __init__(self, inventory: dict[str, int]) -> None:
        from scaler.actuation.protocol import RecordingProvider

        self.inner = RecordingProvider(inventory)
        self.applied = 0

    def inventory(self) -> dict[str, int]:
        return self.inner.inventory()

    def apply(self, action: Any) -> Any:
        self.applied += 1
        return self.inner.apply(action)


@pytest.mark.slow
def test_two_replicas_one_acts_and_leader_loss_hands_over(
    fake_kube: FakeKube, workdir: Path
) -> None:
    # In a temporary folder: the demo config's model store is the relative ``models``.
    api = lease_api(fake_kube)
    clock_a, clock_b = Clock(), Clock()
    wall_b = [dt.datetime(2026, 11, 30, tzinfo=dt.UTC)]
    a = LeaseElector(api, "tiercast", "default", "pod-a", 15, 5.0, monotonic=clock_a)
    b = LeaseElector(
        api, "tiercast", "default", "pod-b", 15, 5.0, monotonic=clock_b, wall=lambda: wall_b[0]
    )
    assert a.try_acquire_or_renew() and not b.try_acquire_or_renew()

    config, history, now = demo_inputs()
    inventory = {p.name: p.current_nodes or p.min_nodes for p in config.pools}
    providers = {"a": CountingProvider(inventory), "b": CountingProvider(inventory)}
    outcomes = {
        name: CycleJob(
            load=lambda: Inputs(config, history, now, "demo"),
            make_provider=lambda _c, n=name: providers[n],  # type: ignore[misc]
            leadership=elector,
            dry_run=False,
        )()
        for name, elector in (("a", a), ("b", b))
    }
    assert providers["a"].applied > 0 and providers["b"].applied == 0
    assert outcomes["a"].record.leader and not outcomes["b"].record.leader
    assert all(x["message"].startswith("not the leader") for x in outcomes["b"].record.actions)

    # A wall-clock jump on b does not make a live Lease look expired: expiry is measured
    # on b's monotonic clock from when it last saw the Lease change.
    wall_b[0] += dt.timedelta(hours=2)
    assert not b.try_acquire_or_renew()
    # a stops renewing (partitioned): it stops acting before anyone may take over ...
    clock_a.t += 11
    assert not a.is_leader()
    # ... and b takes the Lease once it has seen no renewal for the lease duration.
    clock_b.t += 16
    assert b.try_acquire_or_renew() and b.is_leader()
    spec = fake_kube.get(f"{LEASES}/tiercast")["spec"]
    assert spec["holderIdentity"] == "pod-b" and spec["leaseTransitions"] == 1
    # The old leader comes back: the write it computed from an old read is refused.
    assert not a.try_acquire_or_renew()
    # A clean shutdown releases the Lease for an immediate handover.
    b.release()
    assert a.try_acquire_or_renew()


def test_lease_api_errors_are_temporary_and_counted(fake_kube: FakeKube) -> None:
    api = lease_api(fake_kube)
    errors: list[Exception] = []
    a = LeaseElector(api, "tiercast", "default", "pod-a", 3, 0.2, on_error=errors.append)
    fake_kube.inject("500", times=2, path="/leases")
    a.start()
    deadline = time.monotonic() + 10
    while not a.is_leader() and time.monotonic() < deadline:
        time.sleep(0.05)
    a.stop()
    assert len(errors) >= 1 and "HTTP 500" in str(errors[0])
    assert not fake_kube.get(f"{LEASES}/tiercast")["spec"].get("holderIdentity")


def test_the_elector_serve_builds_reaches_the_cluster_its_kubeconfig_and_context_name(
    fake_kube: FakeKube, tmp_path: Path
) -> None:
    # The kubeconfig's current context names a cluster that answers nothing; --context picks
    # the fake API server. The elector must reach the fake, as actuation would.
    from scaler.cli import build_parser
    from scaler.service.wiring import make_leadership

    kubeconfig = kubeconfig_for(fake_kube.url)
    kubeconfig["clusters"].append({"name": "dead", "cluster": {"server": "http://127.0.0.1:9"}})
    kubeconfig["contexts"].append(
        {"name": "decoy", "context": {"cluster": "dead", "user": "tiercast"}}
    )
    kubeconfig["current-context"] = "decoy"
    path = tmp_path / "kubeconfig"
    path.write_text(yaml.safe_dump(kubeconfig))
    args = build_parser().parse_args(
        ["serve", "--kubeconfig", str(path), "--context", "fake", "--leader-election"]
    )
    config = parse_config({**DEMO_CONFIG, "service": {"leader_election": args.leader_election}})
    elector = make_leadership(config, Telemetry(), "pod-a", args.kubeconfig, args.context)
    assert isinstance(elector, LeaseElector)
    assert elector.try_acquire_or_renew()
    assert fake_kube.get(f"{LEASES}/tiercast-leader")["spec"]["holderIdentity"] == "pod-a"
    elector.release()


def gauge_config(tmp: Path, url: str, schedule: str) -> Path:
    config = {
        "signals": [{"name": "gauge", "query": DIRTY_GAUGE, "step_s": 60}],
        "workloads": [
            {"name": "w", "signal": "gauge", "gpu_model": "H100", "units_per_replica": 20.0}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "current_nodes": 1,
            }
        ],
        "prometheus": {"url": url, "lookback_s": 86400, "retries": 0, "timeout_s": 5},
        "service": {
            "cycle_schedule": schedule,
            "records_path": str(tmp / "runs.sqlite"),
            "metrics_port": 0,
        },
    }
    path = tmp / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


GAUGE_END = (DIRTY_START + __import__("pandas").Timedelta(minutes=200)).isoformat()


def serve_args(config: Path) -> argparse.Namespace:
    return argparse.Namespace(
        config=str(config),
        history=None,
        now=GAUGE_END,
        plan_out=None,
        dry_run=False,
        server_dry_run=False,
        kubeconfig=None,
        context=None,
    )


@pytest.mark.slow
def test_serve_runs_scheduled_cycles_against_prometheus_with_a_lease(
    workdir: Path, prometheus: PrometheusServer, fake_kube: FakeKube, quiet_service: list[Service]
) -> None:
    from scaler.inputs.loading import load_inputs

    path = gauge_config(workdir, prometheus.url, "@every 1s")
    args = serve_args(path)
    config = load_inputs(args)[0]
    telemetry, stop = Telemetry(), Stop()
    elector = LeaseElector(lease_api(fake_kube), "tiercast", "default", "pod-a", 5, 0.5)

    def load() -> Inputs:
        cfg, history, now, label = load_inputs(args)
        return Inputs(cfg, history, now, label)

    cycle = CycleJob(
        load=load,
        make_provider=provider_factory(dry_run=False),
        telemetry=telemetry,
        store=RunStore(config.service.records_path),
        leadership=elector,
        dry_run=False,
        stop=stop,
        identity="pod-a",
    )
    service = Service(config, {"cycle": ("@every 1s", cycle)}, telemetry, elector, stop)
    quiet_service.append(service)
    service.start()
    deadline = time.monotonic() + 30
    store = RunStore(config.service.records_path)
    while time.monotonic() < deadline:
        if Path(config.service.records_path).exists() and len(store.recent()) >= 2:
            break
        time.sleep(0.2)
    assert service.shutdown(10.0)
    runs = store.recent()
    assert len(runs) >= 2
    assert {r.status for r in runs} == {"ok"}, [r.error or r.notes for r in runs]
    # Prometheus answers for the window that ends at --now: the newest minutes of the gauge.
    assert runs[0].inputs["gauge"]["last"] >= "2010-01-01T03:19:00Z"
    assert any(r.leader for r in runs)
    text = telemetry.exposition().decode()
    assert 'tiercast_job_runs_total{status="ok",task="cycle"}' in text
    # Released on shutdown, so a peer need not wait for it to expire.
    assert not fake_kube.get(f"{LEASES}/tiercast")["spec"].get("holderIdentity")


@pytest.mark.slow
def test_serve_process_exits_cleanly_on_sigterm(workdir: Path, state_dir: Path) -> None:
    _, history, _ = demo_inputs()
    rows = ["timestamp,series,value"]
    for name, y in history.items():
        rows += [f"{t.isoformat()},{name},{v}" for t, v in y.dropna().items()]
    (workdir / "history.csv").write_text("\n".join(rows) + "\n")
    data = dict(DEMO_CONFIG)
    data["signals"] = [{**s, "file": "history.csv"} for s in DEMO_CONFIG["signals"]]
    data["service"] = {"cycle_schedule": "@every 1s", "metrics_port": 0, "log_format": "json"}
    (workdir / "config.yaml").write_text(yaml.safe_dump(data))
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaler.cli", "serve", "--config", "config.yaml", "--dry-run"],
        cwd=workdir,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 90
        records = state_dir / "tiercast-records.sqlite"
        while time.monotonic() < deadline and proc.poll() is None:
            if records.exists() and RunStore(records).recent():
                break
            time.sleep(0.3)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    runs = RunStore(records).recent()
    assert runs and all(r.status in ("ok", "abandoned") for r in runs)
    logs = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    assert any("SIGTERM received" in x["message"] for x in logs)


# -- deploy/: the service overlay, the Dockerfile, the Grafana dashboard ---------------

DEPLOY = REPO / "deploy"
OVERLAY = DEPLOY / "overlays" / "service"


def overlay_documents() -> list[dict[str, Any]]:
    """The overlay rendered by kustomize (through kubectl), or skip when kubectl is absent."""
    import shutil

    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize overlay cannot be rendered here")
    done = subprocess.run(
        [kubectl, "kustomize", str(OVERLAY)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


@pytest.mark.slow
def test_service_overlay_renders_validates_and_is_consistent() -> None:
    import kubernetes_validate

    from scaler.cli import build_parser

    docs = overlay_documents()
    for doc in docs:
        if doc["kind"] != "DaemonSet" or doc["apiVersion"] == "apps/v1":
            kubernetes_validate.validate(doc, "1.37.0", strict=True)
    kinds = {(d["kind"], d["metadata"]["name"]) for d in docs}
    assert ("StatefulSet", "tiercast-service") in kinds
    assert not any(k == "CronJob" for k, _ in kinds), "serve and the CronJob would both act"
    assert {("ServiceAccount", "tiercast"), ("ConfigMap", "tiercast-config")} <= kinds
    zones = (None, "tiercast-system", "tiercast-node-agent")
    # The one exception: the Role and RoleBinding on the GPU Operator's mig-parted ConfigMap.
    operator = {
        (d["kind"], d["metadata"]["name"])
        for d in docs
        if d["metadata"].get("namespace") == "gpu-operator"
    }
    assert operator <= {("Role", "tiercast-mig-parted"), ("RoleBinding", "tiercast-mig-parted")}
    assert all(d["metadata"].get("namespace") in (*zones, "gpu-operator") for d in docs)
    agent_zone = [d for d in docs if d["metadata"].get("namespace") == "tiercast-node-agent"]
    assert all("node-agent" in d["metadata"]["name"] for d in agent_zone)
    deploy = next(d for d in docs if d["kind"] == "StatefulSet")
    pod = deploy["spec"]["template"]["spec"]
    container = pod["containers"][0]
    base_cron = yaml.safe_load((DEPLOY / "base" / "cronjob.yaml").read_text())
    base_image = base_cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == base_image["image"]
    assert pod["serviceAccountName"] == "tiercast" and pod["securityContext"]["runAsNonRoot"]
    args = build_parser().parse_args(container["args"])
    assert args.command == "serve" and args.leader_election and args.log_format == "json"
    assert container["ports"][0]["containerPort"] == ServiceConfig().metrics_port
    assert pod["terminationGracePeriodSeconds"] > ServiceConfig().shutdown_grace_s
    assert {e["name"] for e in container["env"]} >= {"POD_NAME"}
    role = next(
        d for d in docs if d["kind"] == "Role" and d["metadata"]["namespace"] == "tiercast-system"
    )
    lease_rules = [r for r in role["rules"] if "leases" in r["resources"]]
    assert lease_rules and {"get", "create", "update"} <= set(lease_rules[0]["verbs"])
    selector = deploy["spec"]["selector"]["matchLabels"]
    for kind in ("Service", "PodDisruptionBudget"):
        doc = next(d for d in docs if d["kind"] == kind)
        sel = doc["spec"]["selector"]
        assert sel.get("matchLabels", sel) == selector


def test_dockerfile_is_multi_stage_non_root_without_build_tools() -> None:
    text = (DEPLOY / "Dockerfile").read_text()
    stages = re.split(r"(?m)^FROM ", text)[1:]
    assert len(stages) >= 2
    final = stages[-1]
    user = re.search(r"(?m)^USER (\S+)", final)
    assert user is not None and user.group(1).split(":")[0] not in ("0", "root")
    assert "build-essential" not in final and "apt-get install" not in final
    assert "pip uninstall -y pip" in final
    assert re.search(r'(?m)^ENTRYPOINT \["tiercast"\]', final)
    # The final stage installs from the build stage's wheels only, never from an index.
    assert "--no-index" in final and "COPY --from=build" in final


def test_grafana_dashboard_queries_only_metrics_tiercast_exports() -> None:
    dash = json.loads((DEPLOY / "grafana-dashboard.json").read_text())
    families = list(Telemetry().registry.collect())
    exported = {m.name for m in families} | {s.name for m in families for s in m.samples}
    exported |= {m.name + suffix for m in families for suffix in ("_total", "_bucket")}
    used = set()
    for panel in dash["panels"]:
        for target in panel["targets"]:
            used |= set(re.findall(r"\b(tiercast_[a-z_]+)", target["expr"]))
    assert used and used <= exported, used - exported
    assert {"tiercast_forecast", "tiercast_capacity_planned_nodes", "tiercast_errors_total"} <= used
    ids = [p["id"] for p in dash["panels"]]
    assert len(ids) == len(set(ids))


@pytest.mark.slow
def test_serve_starts_with_prometheus_down_is_not_ready_and_records_each_failed_cycle(
    workdir: Path, state_dir: Path
) -> None:
    from tests.prometheus_server import free_port

    metrics = free_port()
    data = {
        "signals": [{"name": "demand", "query": "demand", "step_s": 60}],
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
                "current_nodes": 3,
            }
        ],
        "prometheus": {"url": f"http://127.0.0.1:{free_port()}", "retries": 0, "timeout_s": 1},
        "service": {
            "cycle_schedule": "@every 1s",
            "metrics_port": metrics,
            "metrics_host": "127.0.0.1",
        },
    }
    (workdir / "config.yaml").write_text(yaml.safe_dump(data))
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaler.cli", "serve", "--config", "config.yaml", "--dry-run"],
        cwd=workdir,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    records = state_dir / "tiercast-records.sqlite"
    try:
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline and proc.poll() is None:
            if records.exists() and len(RunStore(records).recent()) >= 2:
                break
            time.sleep(0.3)
        assert proc.poll() is None, proc.communicate()[1][-2000:]
        try:
            urllib.request.urlopen(f"http://127.0.0.1:{metrics}/readyz", timeout=5)
            raise AssertionError("ready without a successful cycle")
        except urllib.error.HTTPError as exc:
            assert exc.code == 503 and b"no cycle has completed" in exc.read()
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0, err[-2000:]
    runs = RunStore(records).recent()
    assert len(runs) >= 2 and all(r.status in ("failed", "abandoned") for r in runs)
    assert any("cannot be reached" in (r.error or "") for r in runs)


@pytest.mark.slow
def test_agent_state_needs_the_token_and_idle_connections_are_capped() -> None:
    import socket

    from scaler.agent.node import Agent, StaticGate, serve
    from scaler.agent.nvml import FakeNvml
    from scaler.serving import MAX_CONNECTIONS

    token = "a-token-of-enough-length"
    server = serve(Agent(FakeNvml(["H100-80GB"]), StaticGate(True), None), "127.0.0.1", 0, token)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(base + "/state", timeout=5)
        assert info.value.code == 401
        request = urllib.request.Request(
            base + "/state", headers={"Authorization": f"Bearer {token}"}
        )
        assert urllib.request.urlopen(request, timeout=5).status == 200
        assert urllib.request.urlopen(base + "/metrics", timeout=5).status == 200
        idle = [
            socket.create_connection(server.server_address, timeout=5)
            for _ in range(MAX_CONNECTIONS + 20)
        ]
        time.sleep(0.5)
        workers = [t for t in threading.enumerate() if t.name.startswith("Thread-")]
        assert len(workers) <= MAX_CONNECTIONS + 5
        for s in idle:
            s.close()
        time.sleep(0.3)
        assert urllib.request.urlopen(base + "/healthz", timeout=5).status == 200
    finally:
        server.shutdown()
        server.server_close()
