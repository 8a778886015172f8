"""``tiercast explain [POOL]``: everything behind each decision of the last plan, read from
the plan file a cycle wrote (the state directory's, or ``--plan FILE``), as ``kubectl
describe`` shows an object; its ``--help`` and shell completion."""

from __future__ import annotations

import json
import os
import shutil
import stat
import sys
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import build_parser, main

MARGIN = {
    "source": "learned",
    "margin": 0.2,
    "unserved_share": 0.002111,
    "smaller_unserved_share": 0.00232,
    "budget": 0.005,
    "history_days": 3.003,
    "within_budget": True,
    "forecast_shape": False,
    "cost_ratio": 1.329721,
    "reactive_cost_ratio": 1.329721,
    "reactive_unserved_share": 0.002111,
    "capped": False,
    "target": 0.002111,
    "near_term": "newest observation x margin",
    "growth_cost_ratio": 1.344858,
    "flat_cost_ratio": 1.329721,
    "growth_error": {"forecast": 0.059087, "no_growth": 0.058009},
}
GROWTH = {
    **MARGIN,
    "margin": 0.025,
    "forecast_shape": True,
    "near_term": "forecast growth q0.8 (auto)",
    "growth_cost_ratio": 1.24269,
    "flat_cost_ratio": 1.290773,
    "growth": {"level": 0.8, "method": "auto", "samples": 861, "overall_correction": 1.064152},
}


def hand_made_plan() -> dict[str, Any]:
    """The parts of a plan ``explain`` reads: two pools, one bound, two signals."""
    reason = {
        "code": "scale-down.demand-stays-under",
        "params": {"model": "H100-80GB", "bound": ["bridging"], "gpus": 57.0,
                   "until": "00:45Z", "signals": ["chat_rps", "code_rps"], "lead_min": 15,
                   "stabilization_min": 30, "nodes": 3, "saves_per_hour": 96.0},
        "refs": ["risk.margins.chat_rps", "risk.margins.code_rps", "risk.binding.od"],
    }  # fmt: skip
    pool = {"tier": "on-demand", "gpu_model": "H100-80GB", "gpus_per_node": 8,
            "price_per_gpu_hour": 4.0, "lead_time_s": 600}  # fmt: skip
    return {
        "created_at": "2026-11-02T00:00:00Z",
        "quantile": 0.9,
        "horizon_s": 86400,
        "step_s": 300,
        "timeline": ["2026-11-02T00:00:00Z", "2026-11-02T00:05:00Z"],
        "signals": [
            {
                "name": n,
                "unit": "requests/s",
                "estimator": "seasonal_naive_7d",
                "reason": "auto: lowest backtest MASE",
                "last_timestamp": "2026-11-01T23:55:00Z",
                "last_value": 220.07,
                "stale": False,
                "peak_at_quantile": 905.44,
            }
            for n in ("chat_rps", "code_rps")
        ],
        "demand_gpus": {"H100-80GB": [49.0, 57.5]},
        "pools": [
            {
                "pool": "od",
                **pool,
                "current_nodes": 4,
                "target_nodes": [1, 3],
                "binding": ["bridging"],
            },
            {
                "pool": "spot",
                **pool,
                "tier": "spot",
                "current_nodes": 2,
                "target_nodes": [2, 2],
                "binding": [],
            },
        ],
        "actions": [
            {
                "pool": "od",
                "decision": "scale-down",
                "current_nodes": 4,
                "target_nodes": 1,
                "at": "2026-11-02T00:00:00Z",
                "needed_at": "2026-11-02T00:10:00Z",
                "cost_delta_per_hour": -96.0,
                "reason": reason,
                "kind": "nodes",
                "details": {},
            },
        ],
        "risk": {
            "binding": {"od": ["bridging"]},
            "held_models": {},
            "shortfall": [
                {
                    "gpu_model": "H100-80GB",
                    "first_at": "2026-11-02T12:00:00Z",
                    "max_gpus_short": 3.5,
                    "because": ["max_nodes"],
                }
            ],
            "near_need_gpus": {"H100-80GB": 49.0},
            "observed_gpus": {"H100-80GB": 57.0},
            "margins": {"chat_rps": MARGIN, "code_rps": GROWTH},
        },
        "notes": ["od: a note naming the pool"],
    }


@pytest.fixture
def plan_file(state_dir: Path) -> Path:
    """The hand-made plan where ``run`` writes it: the state directory's plan file."""
    state_dir.mkdir(parents=True, exist_ok=True)
    path = state_dir / "tiercast-plan.json"
    path.write_text(json.dumps(hand_made_plan()))
    return path


def test_explain_prints_the_margin_growth_and_bound_behind_each_decision(
    plan_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", "od"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert "Name:           od" in lines and "Name:           spot" not in lines
    assert any(line.startswith("Bound:          bridging: kept above") for line in lines)
    assert "  scale-down: 4 -> 1 nodes, at 00:00Z, needed 00:10Z, -96.00/h" in lines
    # The whole reason, its code and the evidence it points at.
    assert "57.0 GPUs of H100-80GB or less until 00:45Z" in out
    assert "scale-down.demand-stays-under (evidence: risk.margins.chat_rps" in out
    # Each signal: the margin it learnt and from what, and the growth calibration.
    assert (
        "20% learnt on 3.0 d of history: 0.21% of demand unserved, within the budget 0.50%" in out
    )
    assert "not used: newest observation x margin; backtest cost 1.345x demand with growth" in out
    assert "growth 0.8 (auto) from 861 origins, overall correction 1.064" in out
    assert "near-term need 49.0 GPUs; observed 57.0 GPUs; peak q0.9 57.5 GPUs at" in out
    assert "  od: a note naming the pool" in lines
    assert (
        "Shortfall:      up to 3.5 GPUs short from 2026-11-02T12:00:00Z; bound: max_nodes" in lines
    )
    # No pool named: every pool.
    assert main(["explain"]) == 0
    assert "Name:           spot" in capsys.readouterr().out.splitlines()


def test_explain_reads_plan_file_and_says_what_is_wrong_in_one_line(
    plan_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    other = tmp_path / "elsewhere.json"
    shutil.move(plan_file, other)
    assert main(["explain"]) == 2
    err = capsys.readouterr().err
    assert "no plan at" in err and "tiercast run --dry-run" in err and len(err.splitlines()) == 1
    assert main(["explain", "--plan", str(other), "spot"]) == 0
    assert "Name:           spot" in capsys.readouterr().out
    assert main(["explain", "--plan", str(other), "nope"]) == 2
    err = capsys.readouterr().err
    assert "pool 'nope' is not in the plan; it has od, spot" in err
    other.write_text("{not json")
    assert main(["explain", "--plan", str(other)]) == 2
    assert "is not JSON" in capsys.readouterr().err


@pytest.mark.slow
def test_explain_has_help_and_completes_the_last_plans_pools(
    plan_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parser = build_parser({"explain"})
    (sub,) = [a for a in parser._actions if a.dest == "command"]
    text = sub.choices["explain"].format_help()
    assert "kubectl describe" in text or "Describe the last plan" in text
    assert "--plan FILE" in text and "POOL" in text
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    from scaler.cli.completion import bash_script
    from tests.test_operations import _complete

    script = bash_script(parser)
    assert "explain" in _complete(script, "tiercast expl")
    assert "--plan" in _complete(script, "tiercast explain --pl")
    # POOL completes from the last plan, through `tiercast explain --list-pools`.
    shim = tmp_path / "bin" / "tiercast"
    shim.parent.mkdir()
    shim.write_text(f'#!/bin/sh\nexec {sys.executable} -m scaler.cli "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{shim.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("PYTHONPATH", str(Path(__file__).resolve().parents[1]))
    assert _complete(script, "tiercast explain s") == ["spot"]
    assert sorted(_complete(script, "tiercast explain ")) == ["od", "spot"]
