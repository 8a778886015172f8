"""The command line end to end: demo run, CSV input, forecast output, exit codes, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from scaler.cli import main
from tests.conftest import REPO, trace_path

SCHEMA = json.loads((REPO / "scaler" / "plan.schema.json").read_text())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
def test_demo_dry_run_prints_and_writes_a_valid_plan(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = run(["run", "--dry-run"], capsys)
    assert code == 0
    assert "built-in demo fleet" in out and "DECISION" in out
    plan = json.loads((workdir / "tiercast-plan.json").read_text())
    jsonschema.validate(plan, SCHEMA)
    assert {a["pool"] for a in plan["actions"]} == {
        "h100-reserved",
        "h100-on-demand",
        "h100-spot",
        "l40s-on-demand",
        "a100-mig",
    }
    tiers = {p["tier"] for p in plan["pools"]}
    assert {"on-demand", "spot"} <= tiers
    for action in plan["actions"]:
        # Each reason says where its number comes from: the forecast's growth quantile,
        # the newest observation x margin, or the q0.9 forecast (MIG layouts).
        sources = ("forecast growth q", "newest observation x margin", "q0.9")
        assert any(s in action["reason"] for s in sources) and "lead time" in action["reason"]
        if action["decision"] != "no-op":
            assert "/h" in action["reason"]


@pytest.mark.slow
def test_demo_plan_is_deterministic(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(["run", "--dry-run", "--plan-out", "a.json"], capsys)
    run(["run", "--dry-run", "--plan-out", "b.json"], capsys)
    assert (workdir / "a.json").read_text() == (workdir / "b.json").read_text()


def test_run_on_a_public_trace(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_path("servegen/m_small_rps_10min.csv")
    code, out, _ = run(
        ["run", "--dry-run", "--history", str(path), "--units-per-gpu", "20"], capsys
    )
    assert code == 0, out
    plan = json.loads((workdir / "tiercast-plan.json").read_text())
    jsonschema.validate(plan, SCHEMA)
    assert plan["created_at"] == "2000-01-15T00:00:00Z"
    assert plan["actions"][0]["target_nodes"] >= 1


def test_forecast_writes_requested_columns(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = trace_path("servegen/m_small_rps_10min.csv")
    code, _, _ = run(
        [
            "forecast",
            "--history",
            str(path),
            "--horizon",
            "24h",
            "--quantiles",
            "0.1,0.50,0.9",
            "--out",
            "f.csv",
        ],
        capsys,
    )
    assert code == 0
    frame = pd.read_csv(workdir / "f.csv")
    assert list(frame.columns) == ["timestamp", "q0.1", "q0.50", "q0.9"]
    assert len(frame) == 144  # 24 h at the history's 10-minute step
    assert frame["timestamp"].iloc[0] == "2000-01-15T00:00:00"
    assert (frame["q0.1"] <= frame["q0.50"]).all() and (frame["q0.50"] <= frame["q0.9"]).all()


def test_long_format_history(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stamps = pd.date_range("2026-01-01", periods=3 * 288, freq="5min")
    rows = [
        f"{t.isoformat()},{s},{10 + i % 288 / 10}" for s in ("a", "b") for i, t in enumerate(stamps)
    ]
    (workdir / "long.csv").write_text("timestamp,series,value\n" + "\n".join(rows) + "\n")
    code, _out, _ = run(["run", "--dry-run", "--history", "long.csv"], capsys)
    assert code == 0
    plan = json.loads((workdir / "tiercast-plan.json").read_text())
    assert [s["name"] for s in plan["signals"]] == ["a", "b"]


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        ("time,val\n2020-01-01,1\n", "expected columns"),
        ("timestamp,value\nyesterday,1\n", "line 2"),
        (
            "timestamp,value\n2020-01-01T00:00:00,1\n2020-01-01T00:05:00,abc\n",
            "line 3: column 'value' has 'abc'",
        ),
        ("", "empty"),
        ("timestamp,value\n", "no rows"),
    ],
)
def test_malformed_csv_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], content: str, expected: str
) -> None:
    (workdir / "bad.csv").write_text(content)
    code, _, err = run(["run", "--dry-run", "--history", "bad.csv"], capsys)
    assert code == 2
    assert expected in err
    assert len(err.strip().splitlines()) == 1


def test_malformed_config_exit_2(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    (workdir / "c.yaml").write_text("signals: []\nworkloads: []\npools: []\n")
    code, _, err = run(["run", "--dry-run", "--config", "c.yaml"], capsys)
    assert code == 2
    assert err.startswith("tiercast: error: c.yaml: signals")
    assert len(err.strip().splitlines()) == 1


def test_bad_flags_exit_2(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["forecast", "--quantiles", "0.5,1.2"], capsys)
    assert code == 2 and "(0, 1)" in err
    code, _, err = run(["forecast", "--horizon", "soon"], capsys)
    assert code == 2 and "duration" in err
    with pytest.raises(SystemExit) as info:
        main(["nonsense"])
    assert info.value.code == 2


def test_config_with_file_signals(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = trace_path("servegen/m_small_rps_10min.csv")
    (workdir / "c.yaml").write_text(
        f"""
signals: [{{name: rps, unit: requests/s, file: {path}, step_s: 600}}]
workloads: [{{name: llm, signal: rps, gpu_model: H100, units_per_replica: 20}}]
pools:
  - {{name: od, tier: on-demand, gpu_model: H100-80GB, gpus_per_node: 8, price_per_gpu_hour: 4, current_nodes: 3}}
  - {{name: sp, tier: spot, gpu_model: H100-80GB, gpus_per_node: 8, price_per_gpu_hour: 1.4, max_nodes: 2, spot_interruption_rate_per_hour: 0.05}}
"""
    )
    code, out, err = run(["run", "--dry-run", "--config", "c.yaml"], capsys)
    assert code == 0, err
    assert "od" in out and "sp" in out
