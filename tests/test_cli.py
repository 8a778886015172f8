"""The command line end to end: demo run, CSV input, forecast output, exit codes, determinism."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pandas as pd
import pytest

from scaler import wording
from scaler.cli import main
from tests.conftest import REPO, trace_path

SCHEMA = json.loads((REPO / "scaler" / "plan.schema.json").read_text())


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    code = main(argv)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_demo_dry_run_prints_and_writes_a_valid_plan(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    code, out, _ = run(["run", "--dry-run"], capsys)
    assert code == 0
    assert "built-in demo fleet" in out and "DECISION" in out
    plan = json.loads((state_dir / "tiercast-plan.json").read_text())
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
        # Each pool reason names its signals and refers to their margins (stated once, in
        # risk.margins); a MIG layout's refers to its GPU model's MIG demand.
        reason = action["reason"]
        assert reason["refs"] and all(
            r.startswith(("risk.margins.", "risk.binding.", "mig.models.")) for r in reason["refs"]
        )
        assert len(reason["text"]) <= 160 and reason["code"] in wording.CODES
        if action["decision"] != "no-op" and action["kind"] == "nodes":
            assert "/h" in reason["text"]


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_demo_plan_is_deterministic(workdir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run(["run", "--dry-run", "--plan-out", "a.json"], capsys)
    run(["run", "--dry-run", "--plan-out", "b.json"], capsys)
    assert (workdir / "a.json").read_text() == (workdir / "b.json").read_text()


@pytest.mark.slow
def test_run_on_a_public_trace(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    path = trace_path("servegen/m_small_rps_10min.csv")
    code, out, _ = run(
        ["run", "--dry-run", "--history", str(path), "--units-per-gpu", "20"], capsys
    )
    assert code == 0, out
    plan = json.loads((state_dir / "tiercast-plan.json").read_text())
    jsonschema.validate(plan, SCHEMA)
    assert plan["created_at"] == "2000-01-15T00:00:00Z"
    assert plan["actions"][0]["target_nodes"] >= 1


@pytest.mark.slow
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
            "--out-file",
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


def test_long_format_history(
    workdir: Path, capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    stamps = pd.date_range("2026-01-01", periods=3 * 288, freq="5min")
    rows = [
        f"{t.isoformat()},{s},{10 + i % 288 / 10}" for s in ("a", "b") for i, t in enumerate(stamps)
    ]
    (workdir / "long.csv").write_text("timestamp,series,value\n" + "\n".join(rows) + "\n")
    code, _out, _ = run(["run", "--dry-run", "--history", "long.csv"], capsys)
    assert code == 0
    plan = json.loads((state_dir / "tiercast-plan.json").read_text())
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


@pytest.mark.slow
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


# -- regressions of #31: one line, exit 2, for settings the cycle cannot run with ---------


def _small_config(workdir: Path, **sections: dict) -> str:
    """A file-signal config (5-minute history, fresh at its end) with ``sections`` merged in."""
    from tests.fuzz_corpus import history_csv

    (workdir / "rps.csv").write_bytes(history_csv(days=3, step_s=300))
    data: dict = {
        "signals": [{"name": "rps", "file": "rps.csv", "step_s": 300}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "H100", "units_per_replica": 10.0}
        ],
        "pools": [
            {
                "name": "h100",
                "tier": "on-demand",
                "gpu_model": "H100",
                "gpus_per_node": 8,
                "price_per_gpu_hour": 2.0,
                "current_nodes": 2,
                "max_nodes": 20,
            }
        ],
        "forecast": {"method": "seasonal_naive_1d"},
    }
    for name, values in sections.items():
        data[name] = {**data.get(name, {}), **values}
    (workdir / "c.yaml").write_text(json.dumps(data))
    return "c.yaml"


@pytest.mark.parametrize(
    ("forecast", "named"),
    [
        ({"quantiles": [0.5, 1.5]}, "forecast.quantiles: 1.5 is not strictly between 0 and 1"),
        ({"quantiles": [0.0, 0.5]}, "forecast.quantiles: 0.0"),
        ({"method": "nope"}, "forecast.method: unknown estimator 'nope'"),
        ({"method": "seasonal_naive_1d(nope=1)"}, "forecast.method:"),
    ],
)
@pytest.mark.parametrize("command", ["run", "plan", "serve"])
def test_a_bad_forecast_setting_is_one_line_and_exit_2(
    workdir: Path, capsys: pytest.CaptureFixture[str], forecast: dict, named: str, command: str
) -> None:
    """It was: exit 1, "no data for signal 'rps'; holding", the setting never named."""
    config = _small_config(workdir, forecast=forecast)
    flags = {"run": ["--dry-run"], "plan": [], "serve": ["--once", "--dry-run"]}[command]
    argv = [command, "--config", config, *flags]
    code, out, err = run(argv, capsys)
    assert code == 2, err
    assert err.count("\n") == 1 and named in err and "no data" not in err
    assert out == ""


def test_a_model_store_path_that_is_a_file_warns_once_and_refits(
    workdir: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """The store is a cache: without it a cycle refits, which costs time, never capacity.
    Failing or holding the cycle instead would stop scaling up ahead of demand over a
    misplaced cache path, so it is one warning and a normal plan (and a config error would
    take down a running service over a volume that a restart may fix)."""
    (workdir / "not-a-folder").write_text("x")
    config = _small_config(workdir, model_store={"path": "not-a-folder"})
    for _ in range(2):  # the second cycle refits again: nothing was stored
        code, out, err = run(["run", "--dry-run", "--config", config], capsys)
        assert code == 0, err
        assert "plan written to" in out
    warnings = [r for r in caplog.records if "not-a-folder" in r.getMessage()]
    assert len(warnings) == 1 and "not a folder" in warnings[0].getMessage()
    assert "refitted every cycle" in warnings[0].getMessage()
    assert (workdir / "not-a-folder").read_text() == "x"


def test_an_all_nan_history_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    """Through the config (the job's own failure log line used to repeat the final line)."""
    config = _small_config(workdir)
    stamps = pd.date_range("2026-11-01", periods=96, freq="5min")
    (workdir / "rps.csv").write_text(
        "timestamp,value\n" + "".join(f"{t.isoformat()},nan\n" for t in stamps)
    )
    import logging

    logging.getLogger().addHandler(handler := logging.StreamHandler())  # as main's basicConfig
    try:
        for argv in (["run", "--dry-run", "--config", config], ["plan", "--config", config]):
            code, _, err = run(argv, capsys)
            assert code == 2
            assert err.strip().splitlines() == [
                "tiercast: error: history: no series has a finite, non-negative value; "
                "nothing to plan from"
            ]
    finally:
        logging.getLogger().removeHandler(handler)
    assert not [r for r in caplog.records if r.levelno >= logging.ERROR]


def test_a_history_file_too_fine_to_forecast_is_one_line(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """It was held as "no data for signal" (exit 1); a file stays what it is, so it is named."""
    stamps = [pd.Timestamp("2026-11-01") + pd.Timedelta(seconds=i) for i in range(100)]
    stamps.append(pd.Timestamp("2026-11-08"))
    (workdir / "fine.csv").write_text(
        "timestamp,value\n" + "".join(f"{t.isoformat()},{i % 7}\n" for i, t in enumerate(stamps))
    )
    code, out, err = run(["run", "--dry-run", "--history", "fine.csv"], capsys)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "604801 points" in err and "at most 500000" in err


class _ClosedPipe:
    """Standard output whose reader has gone, as under ``tiercast ... | head``."""

    def write(self, text: str) -> int:
        raise BrokenPipeError(32, "Broken pipe")

    def flush(self) -> None:
        raise BrokenPipeError(32, "Broken pipe")

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation("no file descriptor")


def test_a_reader_that_leaves_ends_the_command_quietly(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdout", _ClosedPipe())
    assert main(["completion", "bash"]) == 141
    assert capsys.readouterr().err == ""
