"""`tiercast backfill` and `tiercast run` against the real test Prometheus."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from scaler.cli import main
from tests.prometheus_server import (
    RPS_METRIC,
    PrometheusServer,
    needs_trace,
    prometheus,  # noqa: F401  (the session fixture)
)

M_SMALL = "servegen/m_small_rps_10min.csv"
LAST_SAMPLE = "2000-01-14T23:50:00"  # the newest row of m_small_rps_10min.csv


def blocks_samples(tsdb: Path) -> int:
    """Samples in a TSDB directory, as ``promtool tsdb list`` counts them."""
    out = subprocess.run(
        ["promtool", "tsdb", "list", str(tsdb)], capture_output=True, text=True, check=True
    ).stdout
    return sum(int(line.split()[4]) for line in out.splitlines()[1:] if line.strip())


def test_backfill_command_writes_blocks_promtool_can_read(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "a.csv").write_text(
        "timestamp,value\n2021-05-01T00:00:00,1\n2021-05-01T00:01:00,\n2021-05-01T00:02:00,3\n"
    )
    (workdir / "b.csv").write_text(
        "timestamp,series,value\n2021-05-01T00:00:00,x,5\n2021-05-01T00:00:00,x,6\n"
    )
    code = main(
        [
            "backfill",
            "a.csv",
            "b.csv",
            "--tsdb",
            "tsdb",
            "--metric",
            "vllm:num_requests_running",
            "--label",
            "model_name=chat",
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    assert "backfilled 3 samples in 2 series of vllm:num_requests_running" in out
    assert 'vllm:num_requests_running{model_name="chat",series="a"}: 2 samples' in out
    assert blocks_samples(workdir / "tsdb") == 3


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--metric", "bad-name"], "--metric: 'bad-name' is not a Prometheus metric name"),
        (["--metric", "m", "--label", "nolabel"], "--label: 'nolabel' is not NAME=VALUE"),
        (["--metric", "m", "--label", "__x=1"], "--label: '__x' is not a Prometheus label name"),
    ],
)
def test_backfill_bad_input_is_one_line_and_exit_2(
    argv: list[str], message: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (workdir / "a.csv").write_text("timestamp,value\n2021-05-01T00:00:00,1\n")
    code = main(["backfill", "a.csv", "--tsdb", "tsdb", *argv])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and message in err


def write_config(path: Path, server: PrometheusServer, current_nodes: int) -> Path:
    config = {
        "signals": [
            {
                "name": "m_small_rps",
                "unit": "requests/s",
                "query": f'sum({RPS_METRIC}{{model="m-small"}})',
                "step_s": 600,
            }
        ],
        "workloads": [
            {
                "name": "m-small",
                "signal": "m_small_rps",
                "gpu_model": "H100",
                "units_per_replica": 50,
            }
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 4.0,
                "current_nodes": current_nodes,
                "max_nodes": 40,
            }
        ],
        "policy": {"max_step_nodes": 40, "staleness_limit_s": 1800},
        "prometheus": {"url": server.url, "retries": 0},
    }
    path.write_text(yaml.safe_dump(config))
    return path


def run_plan(workdir: Path, cfg: Path, now: str, exit_code: int = 0) -> dict:
    code = main(["run", "--dry-run", "--config", str(cfg), "--now", now, "--plan-out", "p.json"])
    assert code == exit_code
    return json.loads((workdir / "p.json").read_text())


@pytest.mark.slow
def test_run_plans_from_prometheus_history(
    prometheus: PrometheusServer,  # noqa: F811
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    needs_trace(prometheus, M_SMALL)
    cfg = write_config(workdir / "cfg.yaml", prometheus, current_nodes=1)
    plan = run_plan(workdir, cfg, "2000-01-15T00:00:00")
    out = capsys.readouterr().out
    [signal] = plan["signals"]
    assert signal["last_timestamp"] == LAST_SAMPLE + "Z"
    assert signal["last_value"] == pytest.approx(976.795)
    assert not signal["stale"]
    # About 1,000 requests/s at 50 per GPU is about 20 GPUs: more than the one node running.
    [action] = plan["actions"]
    assert action["decision"] == "scale-up" and action["target_nodes"] >= 3
    assert "m_small_rps" in out and "STALE" not in out


@pytest.mark.slow
def test_stale_prometheus_signal_holds_the_pool(
    prometheus: PrometheusServer,  # noqa: F811
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    needs_trace(prometheus, M_SMALL)
    cfg = write_config(workdir / "cfg.yaml", prometheus, current_nodes=30)
    # Fresh data: 30 nodes are far more than needed, so the planner releases some.
    fresh = run_plan(workdir, cfg, "2000-01-15T00:00:00")
    assert fresh["actions"][0]["decision"] == "scale-down"
    # Two hours after the newest sample (limit 30 min): stale, so nothing is released,
    # and the run exits 1 ("held") so that a CronJob alert fires.
    stale = run_plan(workdir, cfg, "2000-01-15T02:00:00", exit_code=1)
    out, err = capsys.readouterr()
    assert "cycle held" in err and "'m_small_rps' is stale" in err
    assert stale["signals"][0]["stale"]
    assert stale["actions"][0]["decision"] == "no-op"
    assert stale["actions"][0]["target_nodes"] == 30
    assert (
        any("stale" in (n["text"] if isinstance(n, dict) else n) for n in stale["notes"])
        and "STALE" in out
    )


def test_query_with_no_data_holds_the_pool_and_says_why(
    prometheus: PrometheusServer,  # noqa: F811
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    config = yaml.safe_load(write_config(workdir / "cfg.yaml", prometheus, 30).read_text())
    config["signals"][0]["query"] = 'sum(no_such_metric{job="gone"})'
    (workdir / "cfg.yaml").write_text(yaml.safe_dump(config))
    plan = run_plan(workdir, workdir / "cfg.yaml", "2000-01-15T00:00:00", exit_code=1)
    err = capsys.readouterr().err
    assert plan["actions"][0]["decision"] == "no-op" and plan["actions"][0]["target_nodes"] == 30
    assert any(
        "no data for signal 'm_small_rps'" in (n["text"] if isinstance(n, dict) else n)
        for n in plan["notes"]
    )
    assert "cycle held" in err
