"""Operating tiercast: backfill flag warnings, durable state, alerts and KEDA in deploy/.

The manifests are rendered with ``kubectl kustomize`` (skipped with a message where
kubectl is absent) and validated against the Kubernetes 1.37 schemas; the alert rules
are run through the real ``promtool test rules`` from Debian's prometheus package.
"""

from __future__ import annotations

import re
import shutil
import stat
import subprocess
from pathlib import Path
from typing import Any

import kubernetes_validate
import pytest
import yaml

from scaler.cli import main
from scaler.service.telemetry import Telemetry
from tests.conftest import REPO
from tests.test_alert_rules import alerts_under_test

DEPLOY = REPO / "deploy"
K8S_VERSION = "1.37.0"


def _csv(path: Path) -> Path:
    path.write_text("timestamp,value\n2021-05-01T00:00:00,1\n2021-05-01T00:05:00,2\n")
    return path


# -- tiercast backfill: a flag the installed promtool lacks is said, not dropped ---------


def test_backfill_warns_when_promtool_lacks_the_block_duration_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A promtool before 2.24: no --max-block-duration, and (as kingpin does) an unknown
    # flag is refused with exit 1. Debian's promtool has the flag, hidden from --help.
    tool = workdir / "old-promtool"
    tool.write_text(
        "#!/bin/sh\n"
        'for a in "$@"; do case "$a" in --max-block-duration*) '
        "echo \"promtool: error: unknown long flag '$a'\" >&2; exit 1;; esac; done\n"
        'for a in "$@"; do [ "$a" = "--help" ] && exit 0; done\n'
        'mkdir -p "$5/01FAKEBLOCK"\n'
    )
    tool.chmod(tool.stat().st_mode | stat.S_IEXEC)
    _csv(workdir / "a.csv")
    code = main(
        [
            *("backfill", "a.csv", "--tsdb", "tsdb", "--metric", "m"),
            *("--block-duration", "24h", "--promtool", str(tool)),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    lines = [ln for ln in captured.err.splitlines() if "warning" in ln]
    assert len(lines) == 1 and "--block-duration 24h ignored" in lines[0], captured.err
    assert "backfilled 2 samples" in captured.out


def _fake_promtool(folder: Path) -> Path:
    """A promtool that advertises --max-block-duration and records its arguments."""
    script = folder / "promtool"
    script.write_text(
        "#!/bin/sh\n"
        'if [ "$4" = "--help" ]; then echo "  --max-block-duration=2h  longest block"; exit 0; fi\n'
        f'echo "$@" > {folder}/args\n'
        'mkdir -p "$6/01FAKEBLOCK" 2>/dev/null || mkdir -p "$5/01FAKEBLOCK"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    return script


def test_backfill_passes_the_block_duration_when_promtool_has_the_flag(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tool = _fake_promtool(workdir)
    _csv(workdir / "a.csv")
    code = main(
        [
            *("backfill", "a.csv", "--tsdb", "tsdb", "--metric", "m"),
            *("--block-duration", "24h", "--promtool", str(tool)),
        ]
    )
    captured = capsys.readouterr()
    assert code == 0
    assert "--max-block-duration=24h" in (workdir / "args").read_text()
    assert "warning" not in captured.err


# -- durable state: the model store and run records live on a PersistentVolumeClaim ---------


def _render(path: Path) -> list[dict[str, Any]]:
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        pytest.skip("kubectl is not installed: the kustomize overlays cannot be rendered here")
    done = subprocess.run(
        [kubectl, "kustomize", str(path)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _config_in(docs: list[dict[str, Any]]) -> dict[str, Any]:
    cm = next(
        d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "tiercast-config"
    )
    return yaml.safe_load(cm["data"]["config.yaml"])


def _state_paths(config: dict[str, Any], working_dir: str) -> list[Path]:
    """Where the config puts the model store and the run records, as the pod resolves them."""
    from scaler.config import parse_config

    parsed = parse_config(config, "deploy ConfigMap")
    paths = [parsed.model_store.path, parsed.service.records_path]
    return [Path(p) if Path(p).is_absolute() else Path(working_dir) / p for p in paths]


def _mount_of(container: dict[str, Any], volume: str) -> str:
    return next(m["mountPath"] for m in container["volumeMounts"] if m["name"] == volume)


def test_cronjob_keeps_models_and_records_on_a_persistent_volume() -> None:
    docs = _render(DEPLOY / "base")
    cron = next(d for d in docs if d["kind"] == "CronJob")
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    container = pod["containers"][0]
    volumes = {v["name"]: v for v in pod["volumes"]}
    claim = volumes["state"]["persistentVolumeClaim"]["claimName"]
    pvc = next(d for d in docs if d["kind"] == "PersistentVolumeClaim")
    kubernetes_validate.validate(pvc, K8S_VERSION, strict=True)
    assert pvc["metadata"]["name"] == claim
    assert pvc["spec"]["accessModes"] == ["ReadWriteOnce"]
    # One writer at a time is what makes ReadWriteOnce and SQLite safe here.
    assert cron["spec"]["concurrencyPolicy"] == "Forbid"
    mount = _mount_of(container, "state")
    for path in _state_paths(_config_in(docs), container["workingDir"]):
        assert path.is_relative_to(mount), f"{path} is not on the state volume {mount}"
    # Nothing else the pod writes is on an emptyDir that would be mistaken for state.
    assert all("emptyDir" not in v for n, v in volumes.items() if n == "state")


@pytest.mark.slow
def test_service_replicas_each_keep_their_own_state_volume() -> None:
    docs = _render(DEPLOY / "overlays" / "service")
    sts = next(d for d in docs if d["kind"] == "StatefulSet")
    kubernetes_validate.validate(sts, K8S_VERSION, strict=True)
    assert not [d for d in docs if d["kind"] == "PersistentVolumeClaim"], (
        "a shared claim would put two SQLite writers on one volume"
    )
    (template,) = sts["spec"]["volumeClaimTemplates"]
    assert template["metadata"]["name"] == "state"
    assert template["spec"]["accessModes"] == ["ReadWriteOnce"]
    assert template["spec"]["resources"]["requests"]["storage"]
    container = sts["spec"]["template"]["spec"]["containers"][0]
    mount = _mount_of(container, "state")
    for path in _state_paths(_config_in(docs), container["workingDir"]):
        assert path.is_relative_to(mount)
    governing = next(
        d
        for d in docs
        if d["kind"] == "Service" and d["metadata"]["name"] == sts["spec"]["serviceName"]
    )
    assert governing["spec"]["clusterIP"] == "None"


# -- the node agent's /state needs the token from its Secret ------------------------------


def test_node_agent_serves_state_only_with_the_token_of_its_secret() -> None:
    import argparse
    import urllib.error
    import urllib.request

    from scaler.agent import node as node_agent
    from scaler.cli import agent as agent_cli

    docs = _render(DEPLOY / "base")
    ds = next(d for d in docs if d["kind"] == "DaemonSet")
    kubernetes_validate.validate(ds, K8S_VERSION, strict=True)
    pod = ds["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    (mount,) = [m for m in container["volumeMounts"] if "secret" in volumes[m["name"]]]
    secret = volumes[mount["name"]]["secret"]
    assert mount["readOnly"] is True
    # Required: without the Secret the pod does not start with /state open.
    assert secret["secretName"] == "tiercast-node-agent-token" and not secret.get("optional")
    (item,) = secret["items"]
    assert item["key"] == "token"
    flags = [a for a in container["args"] if a.startswith("--token-file=")]
    assert flags == [f"--token-file={mount['mountPath']}/{item['path']}"]
    # The Secret is created by hand (README), never shipped in the manifests.
    assert not [d for d in docs if d["kind"] == "Secret"]
    # The flag as the DaemonSet passes it parses, and a server with that token refuses
    # /state without it while /metrics and /healthz (Prometheus, probes) stay open.
    sub = argparse.ArgumentParser().add_subparsers()
    agent_cli.register(sub)
    parsed = sub.choices["agent"].parse_args(container["args"][1:])
    assert parsed.token_file == f"{mount['mountPath']}/{item['path']}"
    from scaler.agent.nvml import FakeNvml

    agent = node_agent.Agent(FakeNvml(["H100-80GB"]), node_agent.StaticGate(True))
    server = node_agent.serve(agent, "127.0.0.1", 0, "t" * 32)
    base = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{base}/state", timeout=10)
        assert refused.value.code == 401
        asked = urllib.request.Request(
            f"{base}/state", headers={"Authorization": "Bearer " + "t" * 32}
        )
        with urllib.request.urlopen(asked, timeout=10) as answer:
            assert answer.status == 200
        for path in ("/metrics", "/healthz"):
            with urllib.request.urlopen(f"{base}{path}", timeout=10) as answer:
                assert answer.status == 200
    finally:
        server.shutdown()


# -- alerts: every rule fires on the fault it names and stays quiet otherwise -------------

MONITORING = DEPLOY / "monitoring"
ALERT_TESTS = """
rule_files: [rules.yaml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'tiercast_job_runs_total{namespace="a",task="cycle",status="failed"}'
        values: '0+1x40'
      - series: 'tiercast_job_runs_total{namespace="b",task="cycle",status="failed"}'
        values: '0x40'
      - series: 'tiercast_job_last_success_timestamp_seconds{namespace="a",task="cycle"}'
        values: '0x40'
      - series: 'tiercast_job_last_success_timestamp_seconds{namespace="b",task="cycle"}'
        values: '0+60x40'
    alert_rule_test:
      - eval_time: 20m
        alertname: TiercastCyclesFailing
        exp_alerts:
          - exp_labels: {namespace: a, severity: warning}
      - eval_time: 25m
        alertname: TiercastNoSuccessfulCycle
        exp_alerts:
          - exp_labels: {namespace: a, severity: critical}
      - eval_time: 12m
        alertname: TiercastNoSuccessfulCycle
        exp_alerts: []
  - interval: 1m
    input_series:
      - series: 'tiercast_data_staleness_seconds{namespace="a",signal="chat_rps",pod="p0"}'
        values: '1200x30'
      - series: 'tiercast_data_staleness_seconds{namespace="a",signal="code_rps",pod="p0"}'
        values: '60x30'
      - series: 'tiercast_expected_unserved_gpu_hours{namespace="a",pod="p0"}'
        values: '2.5x30'
      - series: 'tiercast_expected_unserved_gpu_hours{namespace="b",pod="p0"}'
        values: '0x30'
      - series: 'tiercast_leader{namespace="a",pod="p0"}'
        values: '0x30'
      - series: 'tiercast_leader{namespace="a",pod="p1"}'
        values: '0x30'
      - series: 'tiercast_leader{namespace="b",pod="p0"}'
        values: '1x30'
      - series: 'tiercast_leader{namespace="b",pod="p1"}'
        values: '0x30'
      - series: 'kube_job_status_failed{namespace="tiercast-system",job_name="tiercast-1"}'
        values: '1x30'
      - series: 'kube_job_status_failed{namespace="tiercast-system",job_name="tiercast-2"}'
        values: '1x30'
      - series: 'kube_job_status_failed{namespace="tiercast-system",job_name="other-1"}'
        values: '5x30'
    alert_rule_test:
      - eval_time: 11m
        alertname: TiercastSignalStale
        exp_alerts:
          - exp_labels: {namespace: a, signal: chat_rps, severity: warning}
      - eval_time: 5m
        alertname: TiercastSignalStale
        exp_alerts: []
      - eval_time: 16m
        alertname: TiercastPlanShort
        exp_alerts:
          - exp_labels: {namespace: a, severity: warning}
      - eval_time: 6m
        alertname: TiercastNoLeader
        exp_alerts:
          - exp_labels: {namespace: a, severity: critical}
      - eval_time: 11m
        alertname: TiercastCronJobFailing
        exp_alerts:
          - exp_labels: {namespace: tiercast-system, severity: warning}
  - interval: 5m
    input_series:
      - series: 'tiercast_signal_last_value{namespace="a",signal="over",pod="p0"}'
        values: '100x24'
      - series: 'tiercast_forecast{namespace="a",signal="over",quantile="0.9",at="lead",pod="p0"}'
        values: '50x24'
      - series: 'tiercast_signal_last_value{namespace="a",signal="fine",pod="p0"}'
        values: '100x24'
      - series: 'tiercast_forecast{namespace="a",signal="fine",quantile="0.9",at="lead",pod="p0"}'
        values: '120x24'
      - series: 'tiercast_forecast{namespace="a",signal="over",quantile="0.5",at="lead",pod="p0"}'
        values: '200x24'
    alert_rule_test:
      - eval_time: 60m
        alertname: TiercastForecastBandMissed
        exp_alerts:
          - exp_labels: {namespace: a, signal: over, severity: warning}
      - eval_time: 30m
        alertname: TiercastForecastBandMissed
        exp_alerts: []
"""


def _rules() -> dict[str, Any]:
    return yaml.safe_load((MONITORING / "prometheusrule.yaml").read_text())


def test_alert_rules_pass_promtool_unit_tests(tmp_path: Path) -> None:
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    groups = _rules()["spec"]["groups"]
    (tmp_path / "full.yaml").write_text(yaml.safe_dump({"groups": groups}))
    # promtool checks the expressions and the annotation templates of the real rules ...
    check = subprocess.run(
        ["promtool", "check", "rules", "full.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert check.returncode == 0, check.stdout + check.stderr
    # ... and the unit tests check when each fires (annotations left to the check above).
    for group in groups:
        for rule in group["rules"]:
            rule.pop("annotations", None)
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump({"groups": groups}))
    (tmp_path / "tests.yaml").write_text(ALERT_TESTS)
    done = subprocess.run(
        ["promtool", "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_every_alert_has_a_promtool_test_and_names_exported_metrics() -> None:
    rules = [r for g in _rules()["spec"]["groups"] for r in g["rules"]]
    tested = set(re.findall(r"alertname: (\w+)", ALERT_TESTS)) | alerts_under_test()
    assert {r["alert"] for r in rules} == tested
    families = list(Telemetry().registry.collect())
    exported = {m.name for m in families} | {s.name for m in families for s in m.samples}
    exported |= {m.name + "_total" for m in families}
    for rule in rules:
        used = set(re.findall(r"\b(tiercast_[a-z_]+)", rule["expr"]))
        assert used <= exported, (rule["alert"], used - exported)
        assert rule["labels"]["severity"] in ("warning", "critical")
        assert rule["annotations"]["summary"]


@pytest.mark.slow
def test_servicemonitor_selects_the_service_overlay_metrics_port() -> None:
    monitor = yaml.safe_load((MONITORING / "servicemonitor.yaml").read_text())
    docs = _render(DEPLOY / "overlays" / "service")
    service = next(
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "tiercast-metrics"
    )
    labels = service["metadata"]["labels"]
    assert monitor["spec"]["selector"]["matchLabels"].items() <= labels.items()
    ports = {p["name"] for p in service["spec"]["ports"]}
    assert {e["port"] for e in monitor["spec"]["endpoints"]} <= ports
    assert monitor["spec"]["namespaceSelector"]["matchNames"] == [service["metadata"]["namespace"]]
    rendered = _render(MONITORING)
    assert {d["kind"] for d in rendered} == {"ServiceMonitor", "PrometheusRule"}


# -- KEDA: a workload's replicas follow tiercast's forecast ------------------------------

KEDA = DEPLOY / "examples" / "keda-scaledobject.yaml"


def _check_scaled_object(doc: dict[str, Any]) -> None:
    """The rules of KEDA 2's ScaledObject CRD (keda.sh/v1alpha1) that this example relies on.

    Written from the CRD's documented schema: ``spec.scaleTargetRef.name`` and
    ``spec.triggers`` are required, each trigger has a ``type`` and string-valued
    ``metadata``; replica counts are non-negative integers with min <= max; the
    fallback needs a positive ``failureThreshold`` and ``replicas``.
    """
    assert doc["apiVersion"] == "keda.sh/v1alpha1" and doc["kind"] == "ScaledObject"
    spec = doc["spec"]
    assert isinstance(spec["scaleTargetRef"]["name"], str) and spec["scaleTargetRef"]["name"]
    assert spec["triggers"], "spec.triggers is required"
    for trigger in spec["triggers"]:
        assert isinstance(trigger["type"], str)
        assert all(isinstance(v, str) for v in trigger["metadata"].values()), (
            "trigger metadata values are strings in the CRD (quote numbers)"
        )
    low, high = spec.get("minReplicaCount", 0), spec.get("maxReplicaCount", 100)
    assert isinstance(low, int) and isinstance(high, int) and 0 <= low <= high
    fallback = spec.get("fallback")
    if fallback is not None:
        assert fallback["failureThreshold"] > 0 and fallback["replicas"] > 0


def test_keda_example_scales_from_the_forecast_like_the_plan_does(tmp_path: Path) -> None:
    doc = yaml.safe_load(KEDA.read_text())
    _check_scaled_object(doc)
    (trigger,) = doc["spec"]["triggers"]
    meta = trigger["metadata"]
    assert trigger["type"] == "prometheus"
    assert meta["ignoreNullValues"] == "false", "a lost series must not scale to the minimum"
    # The query names a series tiercast exports, at the policy quantile, one lead ahead.
    assert set(re.findall(r"\b(tiercast_[a-z_]+)", meta["query"])) == {"tiercast_forecast"}
    assert 'at="lead"' in meta["query"]
    config = _config_in(_render(DEPLOY / "base"))
    signal = re.search(r'signal="([^"]+)"', meta["query"])
    assert signal is not None
    workload = next(w for w in config["workloads"] if w["signal"] == signal.group(1))
    assert float(meta["threshold"]) == float(workload["units_per_replica"])
    assert doc["spec"]["minReplicaCount"] == workload["min_replicas"]
    quantile = re.search(r'quantile="([^"]+)"', meta["query"])
    assert quantile is not None and float(quantile.group(1)) == config["policy"]["quantile"]
    if shutil.which("promtool") is None:
        pytest.skip("promtool is not installed: the query's syntax is not checked")
    (tmp_path / "q.yaml").write_text(
        yaml.safe_dump(
            {"groups": [{"name": "q", "rules": [{"record": "q", "expr": meta["query"]}]}]}
        )
    )
    done = subprocess.run(
        ["promtool", "check", "rules", "q.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr


@pytest.mark.parametrize(
    "path",
    sorted([*MONITORING.glob("*.yaml"), KEDA, *(DEPLOY / "overlays" / "service").glob("*.yaml")]),
    ids=lambda p: p.name,
)
def test_operations_manifests_lint_clean(path: Path) -> None:
    from yamllint import linter

    from tests.test_kube_deploy import LINT

    problems = list(linter.run(path.read_text(), LINT, str(path)))
    assert problems == [], "\n".join(f"{path.name}:{p.line}: {p.message}" for p in problems)


# -- shell completion ----------------------------------------------------------------------


def _complete(script: str, line: str) -> list[str]:
    """What bash completes for ``line`` (ending where the cursor is) with the script loaded."""
    words = line.split(" ")
    program = (
        script
        + f"COMP_WORDS=({' '.join(repr(w) for w in words)}); COMP_CWORD={len(words) - 1}\n"
        + '_tiercast; printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(["bash", "-c", program], capture_output=True, text=True, check=True)
    return [w for w in done.stdout.splitlines() if w]


def test_bash_completion_offers_commands_and_each_commands_flags(
    capsys: pytest.CaptureFixture[str],
) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert {"run", "plan", "report", "serve", "simulate"} <= set(_complete(script, "tiercast "))
    assert _complete(script, "tiercast hist") == ["history"]
    run_flags = _complete(script, "tiercast run --dr")
    assert run_flags == ["--dry-run"]
    # Flags of another command are not offered.
    assert "--horizon" not in _complete(script, "tiercast run --")
    assert "--horizon" in _complete(script, "tiercast plan --")
    # Values of an option with a fixed set; flags after it still complete as flags.
    assert _complete(script, "tiercast forecast -o ") == ["csv", "table", "json", "yaml"]
    assert _complete(script, "tiercast run --output y") == ["yaml"]
    assert "--out-file" in _complete(script, "tiercast forecast --out")
    # Old spellings kept for one release are not offered.
    assert "--out" not in _complete(script, "tiercast forecast --out")
    assert _complete(script, "tiercast run --dry-run ") == ["client", "server"]
    assert _complete(script, "tiercast report -o ") == ["html", "md", "csv", "json"]
    assert "--no-progress" in _complete(script, "tiercast report --no")
    # The benchmarks: under `lab`, and their flags under either spelling, never listed on top.
    assert "lab" in _complete(script, "tiercast ")
    assert not any(w.startswith("bench") for w in _complete(script, "tiercast "))
    assert _complete(script, "tiercast lab bench-s") == ["bench-scale", "bench-start"]
    assert _complete(script, "tiercast lab bench-scale --cou") == ["--count"]
    assert _complete(script, "tiercast bench-scale --cou") == ["--count"]


# -- where the config comes from -----------------------------------------------------------


def test_config_from_flag_then_environment_then_in_cluster_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import argparse

    from scaler.inputs import loading

    mounted = tmp_path / "mounted.yaml"
    monkeypatch.setattr(loading, "IN_CLUSTER_CONFIG", mounted)
    monkeypatch.delenv("TIERCAST_CONFIG", raising=False)

    def resolved(**flags: Any) -> str | None:
        return loading.resolve_config_path(argparse.Namespace(**flags))

    assert resolved(config=None) is None  # nothing anywhere: the demo
    mounted.write_text("signals: []\n")
    assert resolved(config=None) == str(mounted)
    assert resolved(config=None, history="h.csv") is None, "--history builds its own config"
    monkeypatch.setenv("TIERCAST_CONFIG", "/from/env.yaml")
    assert resolved(config=None) == "/from/env.yaml"
    assert resolved(config="given.yaml") == "given.yaml"


def test_a_missing_config_from_the_environment_is_one_line_exit_2(
    workdir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("TIERCAST_CONFIG", str(workdir / "nope.yaml"))
    assert main(["run", "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nope.yaml" in err[0]


# -- -o json|yaml|table on stdout ----------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_run_plan_and_history_print_json_or_yaml_on_stdout_alone(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    import json

    assert main(["run", "--dry-run", "-o", "json"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)  # stdout is the document and nothing else
    plan = json.loads((state_dir / "tiercast-plan.json").read_text())
    assert doc["plan"] == plan and doc["dry_run"] is True
    acted = {(a["pool"], a["decision"]) for a in plan["actions"] if a["decision"] != "no-op"}
    assert {(r["pool"], r["decision"]) for r in doc["results"]} == acted and acted
    assert all(r["outcome"] == "recorded" for r in doc["results"])
    assert "plan written to" in captured.err
    assert main(["plan", "-o", "yaml"]) == 0
    doc = yaml.safe_load(capsys.readouterr().out)
    assert doc["plan"]["actions"] and "results" in doc
    assert main(["history", "-o", "yaml", "-n", "1"]) == 0
    (run,) = yaml.safe_load(capsys.readouterr().out)
    assert run["status"] == "ok" and run["plan"]["created_at"] == plan["created_at"]
    assert main(["history", "-o", "json", "-n", "1"]) == 0
    assert json.loads(capsys.readouterr().out)[0]["run_id"] == run["run_id"]


def _daily_csv(path: Path, days: int = 3) -> Path:
    """``days`` of a 10-minute daily cycle: enough for seasonal-naive backtests."""
    import math

    import pandas as pd

    stamps = pd.date_range("2026-01-01", periods=days * 144, freq="10min")
    rows = [
        f"{t.isoformat()},{100 + 50 * math.sin(i / 144 * 2 * math.pi):.3f}"
        for i, t in enumerate(stamps)
    ]
    path.write_text("timestamp,value\n" + "\n".join(rows) + "\n")
    return path


def test_forecast_prints_json_yaml_or_a_table_on_stdout_and_csv_by_default(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import json

    import pandas as pd

    history = _daily_csv(workdir / "h.csv")
    base = ["forecast", "--history", str(history), "--method", "seasonal_naive_1d"]
    base += ["--horizon", "1h", "--quantiles", "0.1,0.9"]
    assert main([*base, "-o", "json"]) == 0
    captured = capsys.readouterr()
    (doc,) = json.loads(captured.out)["forecasts"]  # stdout is the document alone
    assert doc["series"] == "h" and doc["estimator"] == "seasonal_naive_1d"
    assert doc["step_s"] == 600 and len(doc["points"]) == 6
    assert doc["points"][0]["timestamp"] == "2026-01-04T00:00:00Z"
    assert doc["points"][0]["q0.1"] <= doc["points"][0]["q0.9"]
    assert "h: seasonal_naive_1d" in captured.err
    assert main([*base, "-o", "yaml"]) == 0
    assert yaml.safe_load(capsys.readouterr().out)["forecasts"][0]["points"] == doc["points"]
    assert main([*base, "-o", "table"]) == 0
    table = capsys.readouterr().out.splitlines()
    assert table[0].startswith("h: seasonal_naive_1d, 6 steps")
    assert table[1].split() == ["timestamp", "q0.1", "q0.9"] and len(table) == 8
    # The default is still the CSV, to stdout or to --out-file (alias --output-file).
    assert main(base) == 0
    csv_text = capsys.readouterr().out
    assert csv_text.splitlines()[0] == "timestamp,q0.1,q0.9"
    assert main([*base, "--output-file", "f.csv"]) == 0
    assert "forecast written to f.csv" in capsys.readouterr().err
    assert (workdir / "f.csv").read_text() == csv_text
    assert main([*base, "-o", "json", "--out-file", "f.json"]) == 0
    assert json.loads((workdir / "f.json").read_text())["forecasts"][0] == doc
    frame = pd.read_csv(workdir / "f.csv")
    assert float(frame["q0.1"].iloc[0]) == pytest.approx(doc["points"][0]["q0.1"], rel=1e-5)


def test_forecast_o_with_a_file_name_is_deprecated_or_refused_in_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    history = _daily_csv(workdir / "h.csv")
    base = ["forecast", "--history", str(history), "--method", "seasonal_naive_1d"]
    # The former '-o FILE.csv' still writes the CSV, and says what to use instead.
    assert main([*base, "--horizon", "1h", "-o", "old.csv"]) == 0
    err = capsys.readouterr().err
    assert "'forecast -o FILE' is deprecated; use --out-file old.csv" in err
    assert (workdir / "old.csv").read_text().startswith("timestamp,q0.1,q0.5,q0.9\n")
    # Anything else is not taken for a file: a typo must not write a file named 'jsn'.
    with pytest.raises(SystemExit) as stop:
        main([*base, "-o", "jsn"])
    assert stop.value.code == 2
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert "'jsn' is not a format; expected one of csv, table, json, yaml" in last
    assert "--out-file" in last and not (workdir / "jsn").exists()


# -- progress bars: on a terminal only -------------------------------------------------------


class _Stream:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def test_progress_is_wanted_only_by_a_terminal_without_opt_outs() -> None:
    from forecaster.progress import progress_wanted

    ttys = [_Stream(True), _Stream(True)]
    env = {"TERM": "xterm"}
    assert progress_wanted(streams=ttys, environ=env)
    assert not progress_wanted(streams=[_Stream(True), _Stream(False)], environ=env)
    assert not progress_wanted(streams=[_Stream(False), _Stream(True)], environ=env)
    assert not progress_wanted(disabled=True, streams=ttys, environ=env)
    assert not progress_wanted(streams=ttys, environ={**env, "TIERCAST_NO_PROGRESS": "1"})
    assert progress_wanted(streams=ttys, environ={**env, "TIERCAST_NO_PROGRESS": "0"})
    assert not progress_wanted(log_format="json", streams=ttys, environ=env)
    assert not progress_wanted(streams=ttys, environ={**env, "TIERCAST_LOG_FORMAT": "json"})
    assert not progress_wanted(streams=ttys, environ={"TERM": "dumb"})


def _on_terminal(argv: list[str], cwd: Path, **env: str) -> str:
    """Run ``tiercast argv`` with stdout and stderr on one pseudo-terminal; what it showed."""
    import fcntl
    import os
    import pty
    import select
    import struct
    import sys
    import termios
    import time

    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
    environ = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}
    environ.update({"TERM": "xterm", **env})
    for name in ("TIERCAST_NO_PROGRESS", "TIERCAST_LOG_FORMAT"):
        if name not in env:
            environ.pop(name, None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "scaler.cli", *argv],
        stdin=subprocess.DEVNULL,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        env=environ,
    )
    os.close(slave)
    shown = b""
    deadline = time.monotonic() + 120
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 1.0)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other side closed
                break
            if not chunk:
                break
            shown += chunk
    finally:
        os.close(master)
        proc.wait(timeout=30)
    assert proc.returncode == 0, shown[-2000:]
    return shown.decode("utf-8", "replace")


BAR = re.compile(r"\d+%\|")
"""What tqdm draws: a percentage, then the bar's left edge."""


@pytest.mark.slow
def test_backtest_draws_a_bar_on_a_terminal_and_none_when_opted_out(workdir: Path) -> None:
    history = _daily_csv(workdir / "h.csv", days=4)
    argv = ["backtest", "--history", str(history), "--methods", "seasonal_naive_1d"]
    argv += ["--origins", "2"]
    shown = _on_terminal(argv, workdir)
    assert BAR.search(shown) and "backtest:" in shown and "2/2" in shown
    assert "\r" in shown.replace("\r\n", "")  # redrawn in place
    assert "seasonal_naive_1d" in shown  # the table row, printed above the bar
    for opted_out in (
        _on_terminal([*argv, "--no-progress"], workdir),
        _on_terminal(argv, workdir, TIERCAST_NO_PROGRESS="1"),
        _on_terminal(argv, workdir, TIERCAST_LOG_FORMAT="json"),
    ):
        assert not BAR.search(opted_out) and "backtest:" not in opted_out
        assert "seasonal_naive_1d" in opted_out


@pytest.mark.slow
def test_no_bar_reaches_pipes_or_captured_output(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import sys

    history = _daily_csv(workdir / "h.csv", days=4)
    argv = ["backtest", "--history", str(history), "--methods", "seasonal_naive_1d"]
    argv += ["--origins", "2"]
    done = subprocess.run(
        [sys.executable, "-m", "scaler.cli", *argv],
        capture_output=True,
        text=True,
        cwd=workdir,
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "TERM": "xterm"},
        check=True,
    )
    assert "seasonal_naive_1d" in done.stdout
    for text in (done.stdout, done.stderr):
        assert "\r" not in text and not BAR.search(text) and "backtest:" not in text
    assert main(["forecast", "--history", str(history), "--method", "seasonal_naive_1d"]) == 0
    captured = capsys.readouterr()
    for text in (captured.out, captured.err):
        assert "\r" not in text and not BAR.search(text)


def test_bench_scale_bar_total_is_the_rows_it_measures(monkeypatch: pytest.MonkeyPatch) -> None:
    import argparse
    from types import SimpleNamespace

    from forecaster.benchmarks import scaleout as bench
    from scaler.cli.lab.scale import expected_rows

    def row(*_: object) -> bench.Row:
        return bench.Row("m", "c", "b", 1, 1, 1.0, 0.0, 0, 0, 0.0)

    monkeypatch.setattr(bench, "calibrate", lambda workers: [row(), row()])
    monkeypatch.setattr(bench, "measure", lambda *a, **k: (row(), SimpleNamespace(outcomes={})))
    monkeypatch.setattr(bench, "load_shapes", lambda traces: [])
    empty = SimpleNamespace(names=[], cold=lambda n=None: iter(()), warm=lambda n=None: iter(()))
    monkeypatch.setattr(bench.SeriesBank, "build", classmethod(lambda cls, *a, **k: empty))
    for counts in [(6, 3, 0, 2), (6, 3, 2, 2), (0, 0, 0, 0), (0, 3, 0, 0), (5, 0, 1, 0)]:
        count, fit, prophet, rival = counts
        for backends in [("joblib",), ("joblib", "dask")]:
            seen: list[str] = []
            bench.run(count, fit, prophet, rival, 2, 2, backends, progress=seen.append)
            flags = argparse.Namespace(
                count=count, fit_count=fit, prophet_count=prophet, rival_count=rival
            )
            assert expected_rows(flags, backends, len(bench.RIVALS)) == len(seen), counts


# -- fast start: a command imports only what it uses -----------------------------------------


def test_command_table_matches_what_each_module_registers() -> None:
    import argparse
    import importlib

    from scaler import cli
    from scaler.cli.lab import LAB

    by_module: dict[str, set[str]] = {}
    for name, (module, summary) in [*cli.COMMANDS.items(), *LAB.items()]:
        by_module.setdefault(module, set()).add(name)
        assert summary and len(summary) <= 80
    for module, names in by_module.items():
        sub = argparse.ArgumentParser().add_subparsers()
        registrar = (
            cli.register if module == "scaler.cli" else importlib.import_module(module).register
        )
        registrar(sub)
        assert set(sub.choices) == names, module
    commands = cli.build_parser()._subparsers._group_actions[0]  # type: ignore[union-attr]
    # The benchmarks run as `tiercast lab NAME` and, unlisted, as `tiercast NAME`.
    assert set(commands.choices) == set(cli.COMMANDS) | set(LAB)  # type: ignore[arg-type]
    assert [a.dest for a in commands._choices_actions] == list(cli.COMMANDS)  # type: ignore[attr-defined]
    lab = commands.choices["lab"]._subparsers._group_actions[0]  # type: ignore[index,union-attr]
    assert [a.dest for a in lab._choices_actions] == list(LAB)  # type: ignore[attr-defined]


def test_help_lists_the_product_and_points_to_the_lab(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cli import main
    from scaler.cli.lab import LAB

    with pytest.raises(SystemExit):
        main(["--help"])
    text = capsys.readouterr().out
    assert "simulate" in text and "backtest" in text and "lab " in text
    assert not any(name in text for name in LAB)
    assert text.rstrip().endswith("benchmarks: tiercast lab --help")
    with pytest.raises(SystemExit):
        main(["lab", "--help"])
    text = capsys.readouterr().out
    assert all(name in text for name in LAB)
    for argv in (["bench-mig", "--help"], ["lab", "bench-mig", "--help"]):
        with pytest.raises(SystemExit):
            main(argv)
        assert "--time-limit" in capsys.readouterr().out


@pytest.mark.parametrize(
    "argv",
    [["--version"], ["--help"], ["run", "--help"], ["forecast", "--help"]],
    ids=" ".join,
)
def test_version_and_help_import_no_heavy_library(argv: list[str]) -> None:
    import sys

    from scaler.cli.lab.start import HEAVY

    probe = (
        "import sys\nfrom scaler.cli import main\n"
        "try:\n    main(sys.argv[1:])\nexcept SystemExit:\n    pass\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, *argv], capture_output=True, text=True, cwd=REPO, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "[]", done.stdout[-500:]


def test_flag_values_are_not_taken_for_the_command() -> None:
    from scaler.cli import command_in

    assert command_in(["--log-level", "DEBUG", "run", "--dry-run"]) == "run"
    assert command_in(["--log-level=INFO", "history"]) == "history"
    assert command_in(["--version"]) is None


@pytest.mark.slow
def test_bench_start_prints_ratios_against_bare_python(capsys: pytest.CaptureFixture[str]) -> None:
    from scaler.cli.lab import start as cli_startup

    rows = cli_startup.measure(repeats=1)
    assert rows[0]["ratio"] == 1.0 and len(rows) == len(cli_startup.CASES) + 1
    text = cli_startup.table(rows)
    assert text.count("\n") == len(rows) + 1 and "x python -c pass" in text
    version = next(r for r in rows if r["command"] == "tiercast --version")
    assert version["heavy"] == ""


# -- serve --once exits with its cycle's own status ---------------------------------------


@pytest.mark.slow
def test_serve_once_exits_with_the_status_of_its_cycle(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    from scaler.records import RunStore

    assert main(["serve", "--once", "--dry-run", "--metrics-port", "0"]) == 0
    (ok,) = RunStore(state_dir / "tiercast-records.sqlite").recent(job="cycle")
    assert ok.status == "ok" and ok.exit_code == 0
    # Prometheus down: serve starts, the cycle fails, and --once says so.
    (workdir / "down.yaml").write_text(
        yaml.safe_dump(
            {
                "prometheus": {"url": "http://127.0.0.1:9", "timeout_s": 2, "retries": 0},
                "signals": [{"name": "rps", "query": "sum(rate(x[5m]))"}],
                "workloads": [
                    {
                        "name": "w",
                        "signal": "rps",
                        "gpu_model": "H100-80GB",
                        "units_per_replica": 10,
                    }
                ],
                "pools": [
                    {
                        "name": "p",
                        "tier": "on-demand",
                        "gpu_model": "H100-80GB",
                        "gpus_per_node": 8,
                        "price_per_gpu_hour": 4.0,
                        "current_nodes": 2,
                    }
                ],
                "service": {"records_path": "down.sqlite", "metrics_port": 0},
            }
        )
    )
    assert main(["serve", "--once", "--dry-run", "--config", "down.yaml"]) == 1
    (failed,) = RunStore("down.sqlite").recent(job="cycle")
    assert failed.status == "failed" and failed.exit_code == 1


@pytest.mark.slow
def test_serve_time_offset_plans_each_cycle_as_of_the_shifted_clock(
    workdir: Path, state_dir: Path
) -> None:
    import pandas as pd

    from scaler.records import RunStore

    before = pd.Timestamp.now(tz="UTC").tz_localize(None) - pd.Timedelta(hours=3)
    main(["serve", "--once", "--dry-run", "--metrics-port", "0", "--time-offset", "3h"])
    after = pd.Timestamp.now(tz="UTC").tz_localize(None) - pd.Timedelta(hours=3)
    (run,) = RunStore(state_dir / "tiercast-records.sqlite").recent(job="cycle")
    assert run.plan is not None
    planned_at = pd.Timestamp(run.plan["created_at"]).tz_localize(None)
    assert before - pd.Timedelta(minutes=5) <= planned_at <= after + pd.Timedelta(minutes=5)
    assert main(["serve", "--once", "--time-offset", "soon"]) == 2
