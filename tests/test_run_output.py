"""What ``tiercast run`` and ``serve`` print and log: the demo's dry-run fits a 120-column
screen (short reasons, one line per write, bodies with ``-v``), ``-o wide`` adds the
evidence, ``serve`` logs one INFO line per cycle and takes the global flags after the
command, the deploy overlays set the log level, and a warning never says "held" where the
plan acts on the pool."""

from __future__ import annotations

import logging
import math
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from scaler.cli import build_parser, main
from scaler.cli.run import _call_line, print_cycle
from scaler.wording import NO_OP_FITS, SCALE_DOWN_DEMAND, SCALE_UP_FORECAST, Reason

SCREEN = 120
DEPLOY = Path(__file__).resolve().parents[1] / "deploy"


def screen_lines(text: str, width: int = SCREEN) -> int:
    """Lines ``text`` takes in a terminal ``width`` columns wide (long lines wrap)."""
    return sum(max(1, math.ceil(len(line) / width)) for line in text.splitlines())


# -- short reasons ---------------------------------------------------------------------


def test_a_reason_has_a_short_form_naming_the_quantile_and_the_bound() -> None:
    up = Reason(
        SCALE_UP_FORECAST,
        {"gpus": 57.0, "model": "H100-80GB", "at": "00:15Z", "signals": ["a"], "lead_min": 15,
         "nodes": 1, "cost_per_hour": 11.2, "bound": []},
    )  # fmt: skip
    assert up.short("en", quantile="q0.9") == "q0.9 57 GPUs by 00:15Z, lead 15m: +1 node"
    assert up.short("ru", quantile="q0.9") == "q0.9 57 GPU к 00:15Z, подготовка 15 мин: +1 узл."
    down = Reason(
        SCALE_DOWN_DEMAND,
        {"gpus": 2.93, "model": "m", "until": "00:45Z", "signals": ["a"], "lead_min": 15,
         "stabilization_min": 30, "nodes": 3, "saves_per_hour": 96.0, "bound": ["bridging"]},
    )  # fmt: skip
    assert down.short("en", quantile="q0.9") == (
        "q0.9 <=2.9 GPUs until 00:45Z, lead 15m+30m: -3 nodes; bound bridging"
    )
    assert "переходный период" in down.short("ru", quantile="q0.9")
    # The full text is unchanged (the plan JSON, Events and reports carry it).
    assert up.text("en").startswith("57.0 GPUs of H100-80GB by 00:15Z (a; lead 15m)")
    fits = Reason(NO_OP_FITS, {"gpus": 6.0, "model": "m", "at": "x", "signals": ["a"],
                               "lead_min": 5, "nodes_now": 1, "cost_per_hour": 1.0, "held": True})  # fmt: skip
    assert fits.short("en", quantile="q0.5") == "q0.5 6 GPUs at x, lead 5m: fits; held"


def test_every_table_cell_code_has_a_short_form_in_every_language() -> None:
    """A decision's reason and a signal's near-term rule are table cells: each has a short
    form with the same fields in English and Russian (a new code without one would print
    its whole sentence in the REASON or NEAR TERM column)."""
    import string

    from scaler.wording import CODES, LANGS, SHORT

    cells = [c for c in CODES if c.split(".")[0] in ("scale-up", "scale-down", "no-op", "margin")]
    for lang in LANGS:
        assert set(cells) <= set(SHORT[lang]), (lang, set(cells) - set(SHORT[lang]))

    def fields(text: str) -> set[str]:
        return {name for _, name, _, _ in string.Formatter().parse(text) if name}

    for code, text in SHORT["en"].items():
        assert fields(SHORT["ru"][code]) == fields(text), code


def test_a_write_is_one_line_saying_what_it_changes() -> None:
    scale = {"verb": "PUT", "path": "/apis/x/nodepools/p/scale", "status": "ok",
             "body": {"apiVersion": "autoscaling/v1", "kind": "Scale",
                      "metadata": {"name": "p", "resourceVersion": "7"}, "spec": {"replicas": 1}}}  # fmt: skip
    assert _call_line(scale) == "PUT /apis/x/nodepools/p/scale: spec.replicas=1"
    patch = {"verb": "PATCH", "path": "/apis/x/nodepools/s", "query": {"dryRun": "All"},
             "body": {"metadata": {"resourceVersion": "9"}, "spec": {"limits": {"gpu": "24"}}}}  # fmt: skip
    assert _call_line(patch) == "PATCH /apis/x/nodepools/s?dryRun=All: spec.limits.gpu=24"
    create = {"verb": "POST", "path": "/apis/apps/v1/namespaces/n/deployments",
              "body": {"kind": "Deployment", "metadata": {"name": "d"},
                       "spec": {"replicas": 6, "template": {"spec": {"containers": []}}}}}  # fmt: skip
    assert _call_line(create) == "POST /apis/apps/v1/namespaces/n/deployments: new d, replicas=6"
    relabel = {"verb": "relabel", "pool": "a100", "body": {"node": "n1", "from": "all-disabled",
               "label": {"nvidia.com/mig.config": "mixed"}, "mig_parted_entry": [{"devices": [0]}]}}  # fmt: skip
    assert _call_line(relabel) == "relabel a100: n1 nvidia.com/mig.config=mixed (was all-disabled)"
    many = {"verb": "PATCH", "path": "/x", "body": {"a": 1, "b": 2, "c": 3, "d": 4, "e": 5}}
    assert _call_line(many) == "PATCH /x: a=1, b=2, c=3, +2 more"
    assert _call_line({"verb": "WAIT", "path": "/x", "seconds": 5, "status": "skipped"}) == (
        "WAIT /x: seconds=5"
    )


# -- the demo's dry-run ----------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.usefixtures("warm_demo_models")
def test_the_demo_dry_run_fits_a_120_column_screen_and_wide_adds_the_evidence(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import scaler.cli.run as run

    seen: list[Any] = []

    def keep(result: Any, *args: Any, **kwargs: Any) -> None:
        seen.append((result, args, kwargs))
        print_cycle(result, *args, **kwargs)

    monkeypatch.setattr(run, "print_cycle", keep)
    assert main(["run", "--dry-run"]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert max(len(line) for line in lines) <= SCREEN, max(lines, key=len)
    assert screen_lines(out) <= 40, out
    # One short reason per action, the binding bound named in a word.
    assert "q0.9 57 GPUs by 00:15Z, lead 15m: +1 node" in out
    assert "-3 nodes; bound bridging" in out
    # One line per write (verb, path, what changes); no request body in the table.
    assert "    PUT /apis/karpenter.sh/v1/nodepools/h100-on-demand/scale: spec.replicas=1" in lines
    assert "{" not in out and "-v, or -o json" in out
    # The same cycle in -o wide and with -v: the evidence columns, the bodies.
    result, args, _ = seen[0]
    print_cycle(result, args[0], args[1], "wide", args[3])
    wide = capsys.readouterr().out
    header = next(line for line in wide.splitlines() if line.startswith("POOL"))
    assert header.split()[6:11] == ["SIGNALS", "FORECAST", "MARGIN", "GROWTH", "BOUND"]
    row = next(line for line in wide.splitlines() if line.startswith("h100-on-demand"))
    assert "20% learnt/0% learnt" in row and "none/0.95 auto" in row and "bridging" in row
    assert "learnt on 3.0 d" in wide  # each signal's margin evidence under its table
    print_cycle(result, args[0], args[1], "table", args[3], verbose=True)
    verbose = capsys.readouterr().out
    assert '"spec":{"replicas":1}' in verbose and "StaticCapacity" in verbose


def test_o_wide_is_offered_and_documented_where_the_table_is() -> None:
    parser = build_parser({"run", "plan", "forecast"})
    for command in ("run", "plan"):
        args = parser.parse_args([command, "-o", "wide"])
        assert args.output == "wide"
    with pytest.raises(SystemExit):
        parser.parse_args(["forecast", "-o", "wide"])  # no table with evidence there


@pytest.mark.slow
def test_bash_completion_offers_o_wide(capsys: pytest.CaptureFixture[str]) -> None:
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    from tests.test_operations import _complete

    assert main(["completion", "bash"]) == 0
    script = capsys.readouterr().out
    assert _complete(script, "tiercast run -o ") == ["table", "json", "yaml", "wide"]
    assert _complete(script, "tiercast run --verb") == ["--verbose"]


# -- the service -----------------------------------------------------------------------


def small_config(folder: Path, **extra: Any) -> Path:
    """A one-signal, one-pool config over a week of 5-minute history (fast to plan)."""
    index = pd.date_range("2026-11-20", periods=7 * 288, freq="5min")
    demand = 40 + 5 * np.sin(np.arange(len(index)) * 2 * np.pi / 288)
    pd.DataFrame({"timestamp": index, "value": demand}).to_csv(folder / "gpus.csv", index=False)
    config = {
        "signals": [{"name": "gpus", "file": "gpus.csv"}],
        "workloads": [
            {"name": "serve", "signal": "gpus", "gpu_model": "H100-80GB", "units_per_replica": 1}
        ],
        "pools": [
            {"name": "od", "tier": "on-demand", "gpu_model": "H100-80GB", "gpus_per_node": 8,
             "price_per_gpu_hour": 4.0, "max_nodes": 12, "current_nodes": 2}
        ],
        "forecast": {"method": "seasonal_naive_1d"},
        **extra,
    }  # fmt: skip
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
def test_serve_logs_one_info_line_per_cycle_and_once_prints_the_cycle(
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    config = small_config(workdir)
    argv = ["serve", "--config", str(config), "--once", "--dry-run", "--metrics-port", "0"]
    monkeypatch.setattr(logging.getLogger(), "level", logging.WARNING)  # as `tiercast` starts
    assert main(argv) == 0
    out = capsys.readouterr().out
    lines = [r for r in caplog.records if r.levelno == logging.INFO]
    assert len(lines) == 1, [r.getMessage() for r in lines]
    message = lines[0].getMessage()
    assert lines[0].name == "tiercast.cycle"
    assert "ok in" in message and "(dry-run)" in message
    assert "1 change(s): od 2->" in message and "/h now -> " in message
    assert message.endswith("held: none")
    # --once prints its cycle as `run` does.
    assert "POOL" in out and "od" in out and "cost: " in out
    caplog.clear()
    # --log-level after the command: WARNING keeps the cycle's line out.
    assert main([*argv, "--log-level", "WARNING"]) == 0
    assert not [r for r in caplog.records if r.name == "tiercast.cycle"]


def test_global_flags_are_taken_after_the_command_too() -> None:
    parser = build_parser({"serve", "run", "lab", "bench-scale"})
    assert parser.parse_args(["serve", "--log-level", "INFO"]).log_level == "INFO"
    assert parser.parse_args(["--log-level", "DEBUG", "serve"]).log_level == "DEBUG"
    assert parser.parse_args(["serve"]).log_level is None  # serve's default: its one line
    assert parser.parse_args(["run", "--dry-run", "--log-level", "ERROR"]).log_level == "ERROR"
    assert parser.parse_args(["lab", "bench-scale", "--log-level", "INFO"]).log_level == "INFO"


def test_the_deploy_forms_set_the_log_level() -> None:
    def first(path: str, kind: str) -> dict[str, Any]:
        docs = yaml.safe_load_all((DEPLOY / path).read_text())
        return next(d for d in docs if d and d["kind"] == kind)

    statefulset = first("overlays/service/service-statefulset.yaml", "StatefulSet")
    cronjob = first("base/cronjob.yaml", "CronJob")
    containers = [
        statefulset["spec"]["template"]["spec"]["containers"][0],
        cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0],
    ]
    parser = build_parser({"run", "serve"})
    for container in containers:
        args = parser.parse_args(container["args"])
        assert args.log_level == "INFO" and args.dry_run
        assert container["args"][-1] == "--dry-run"  # deploy/components/acting removes it


# -- words and deeds -------------------------------------------------------------------

EMPTY = b'{"status":"success","data":{"resultType":"matrix","result":[]}}'


def typo_config(folder: Path, url: str, keep_days: int) -> Path:
    """A signal whose query names a metric Prometheus does not have (a typo)."""
    config = {
        "signals": [{"name": "rps", "query": "sum(vllm:num_requets_running)", "step_s": 300}],
        "workloads": [
            {"name": "chat", "signal": "rps", "gpu_model": "A10G-24GB", "units_per_replica": 1}
        ],
        "pools": [
            {"name": "v100-spot", "tier": "spot", "gpu_model": "A10G-24GB", "gpus_per_node": 8,
             "price_per_gpu_hour": 1.0, "max_nodes": 20, "current_nodes": 5}
        ],
        "forecast": {"method": "seasonal_naive_1d"},
        "prometheus": {"url": url, "retries": 0, "lookback_s": 86400,
                       "keep_history_days": keep_days},
        "model_store": {"path": str(folder / "state" / "models")},
        "service": {"records_path": str(folder / "state" / "records.sqlite")},
    }  # fmt: skip
    path = folder / "config.yaml"
    path.write_text(yaml.safe_dump(config))
    return path


@pytest.mark.slow
@pytest.mark.parametrize("warm", [True, False])
def test_a_warning_says_held_only_where_the_plan_holds(
    warm: bool,
    workdir: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    from forecaster.history_store import HistoryStore
    from tests.prometheus_server import StubReply, StubServer

    now = pd.Timestamp("2026-11-27T00:00:00")
    with StubServer(lambda _: StubReply(200, EMPTY)) as stub:
        config = typo_config(workdir, stub.url, 30)
        if warm:  # earlier cycles kept three days of ~100 GPUs of demand
            index = pd.date_range(now - pd.Timedelta(days=3), now, freq="5min", inclusive="left")
            level = 100 + 5 * np.sin(np.arange(len(index)) * 2 * np.pi / 288)
            store = HistoryStore(workdir / "state" / "models" / "history", pd.Timedelta("5min"))
            store.append({"rps": pd.Series(level, index=index)})
        with caplog.at_level(logging.WARNING):
            code = main(["run", "--dry-run", "--config", str(config), "--now", now.isoformat()])
    out = capsys.readouterr().out
    said = " | ".join(r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)
    assert "vllm:num_requets_running" in said  # the query Prometheus had nothing for is named
    row = next(line for line in out.splitlines() if line.startswith("v100-spot"))
    if warm:
        assert code == 0 and "scale-up" in row and "5->13" in row, out
        assert "held" not in said, said
        assert "planned from tiercast's history store up to 2026-11-26T23:55:00Z" in said
        assert "its pools (v100-spot) are planned as usual" in out  # the plan's note
    else:
        assert code == 1 and "scale-up" not in row, out
        assert "its pools (v100-spot) are held (no scale-down)" in said, said


def test_the_review_says_its_horizon_and_why_a_cycle_can_act_otherwise() -> None:
    from scaler.cli.report import with_horizon_note
    from scaler.plans import CapacityPlan
    from scaler.wording import NOTE_REVIEW_HORIZON

    plan = CapacityPlan("2026-11-02T00:00:00Z", 0.9, 7 * 86400, 300, [], [], {}, [], [], {}, {})
    noted = with_horizon_note(plan, 86400)
    (note,) = noted.notes
    assert note.code == NOTE_REVIEW_HORIZON
    assert note.text("en").startswith("this review plans 168 h ahead from the config's node")
    assert "a cycle plans 24 h ahead (policy.horizon_s)" in note.text("en")
    assert "its actions can differ" in note.text("en")
    assert "168" in note.text("ru") and "24" in note.text("ru")
