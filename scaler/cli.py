"""The ``tiercast`` command line.

Exit status: 0 success, 1 runtime failure (a server down, a failed cycle),
2 bad input or config. Every error is one line on stderr that names what was
wrong. Subcommands beyond the core ones live in their feature's module and are
listed in ``_EXTENSIONS``; each exposes ``register(subparsers)``.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import logging
import math
import os
import sys
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecaster import __version__
from forecaster.errors import BadInputError, DataError, TiercastError
from forecaster.secrets import RedactSecrets, redact

if TYPE_CHECKING:
    # Only for annotations: a command imports what it runs, so `tiercast --version`
    # and `--help` start without pandas, scipy, Prophet or the Kubernetes client.
    import pandas as pd

    from forecaster.series import History
    from scaler.config import Config
    from scaler.cycle import CycleResult

log = logging.getLogger("tiercast")

MAX_ERROR_CHARS = 300
"""The final error line is cut to this many characters (an input may be megabytes)."""


def one_line(text: str, limit: int = MAX_ERROR_CHARS) -> str:
    """``text`` redacted, on one line, at most ``limit`` characters (the CLI's final error line)."""
    flat = " ".join(redact(text).split())
    return flat if len(flat) <= limit else flat[: limit - 3] + "..."


IN_CLUSTER_CONFIG = Path("/etc/tiercast/config.yaml")
"""Where deploy/ mounts the config; used when neither --config nor $TIERCAST_CONFIG is set."""

# Every subcommand: the module that registers it (``register(subparsers)``; this module
# for the core ones) and its line in `tiercast --help`. Only the module of the command
# being run is imported, so each command pays for its own imports alone;
# tests/test_operations.py checks this table against what the modules register.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "scaler.cli",
        "one full cycle: collect, forecast, plan, act (or record with --dry-run)",
    ),
    "plan": ("scaler.cli", "forecast and plan without acting; print the plan"),
    "forecast": ("scaler.cli", "forecast a CSV history with quantiles; write timestamp,q... CSV"),
    "backfill": ("scaler.backfilling", "load CSV traces into a Prometheus TSDB directory"),
    "history": (
        "scaler.records",
        "list recent runs (status, actions, errors) from the run records",
    ),
    "serve": ("scaler.service", "run the cycle, refit and report on schedules, with /metrics"),
    "report": ("scaler.cli_report", "write the capacity review (HTML, Markdown, CSV, JSON)"),
    "agent": ("scaler.agent", "the node agent: GPU and MIG state through NVML, apply layouts"),
    "bench-mig": ("scaler.cli_mig", "benchmark the MIG layout solver against its heuristic"),
    "simulate": ("scaler.cli_simulate", "replay a demand trace: tiercast against the baselines"),
    "backtest": ("scaler.cli_forecasting", "rolling-origin backtest of forecasting methods"),
    "bench-forecast": ("scaler.cli_forecasting", "the forecasting benchmark on the public traces"),
    "bench-scale": ("scaler.cli_scale", "benchmark batch forecasting of many series"),
    "completion": ("scaler.cli_completion", "print a shell completion script (bash or zsh)"),
    "bench-start": ("scaler.cli_startup", "benchmark command start-up time against bare Python"),
}


def _config_from_history(history: History, args: argparse.Namespace) -> Config:
    """A one-pool config for a bare CSV: each series is a workload on an on-demand pool."""
    from scaler.config import parse_config

    signals = [{"name": n, "unit": getattr(args, "signal_unit", None) or "1"} for n in history]
    workloads = [
        {
            "name": n,
            "signal": n,
            "gpu_model": args.gpu_model,
            "units_per_replica": args.units_per_gpu,
        }
        for n in history
    ]
    pools = [
        {
            "name": "default-on-demand",
            "tier": "on-demand",
            "gpu_model": args.gpu_model,
            "gpus_per_node": args.gpus_per_node,
            "price_per_gpu_hour": args.price_per_gpu_hour,
            "lead_time_s": 600,
            "max_nodes": 10_000,
        }
    ]
    return parse_config(
        {"signals": signals, "workloads": workloads, "pools": pools}, "command-line defaults"
    )


def _default_now(history: History) -> pd.Timestamp:
    """Just after the newest sample, so a plan on an export starts where the data ends."""
    import pandas as pd

    observed = [y.dropna().index[-1] for y in history.values() if y.notna().any()]
    if not observed:
        raise DataError("history: no series has a finite, non-negative value; nothing to plan from")
    last = max(observed)
    steps = [y.index[1] - y.index[0] for y in history.values() if len(y) > 1]
    return pd.Timestamp(last) + (min(steps) if steps else pd.Timedelta(minutes=5))


def resolve_config_path(args: argparse.Namespace) -> str | None:
    """``--config``, else ``$TIERCAST_CONFIG``, else the in-cluster path when it exists.

    The in-cluster default is skipped for ``--history`` runs, which build their config
    from the flags; with none of the three, commands use the built-in demo.
    """
    given = getattr(args, "config", None) or os.environ.get("TIERCAST_CONFIG")
    if given:
        return str(given)
    if getattr(args, "history", None) is None and IN_CLUSTER_CONFIG.is_file():
        return str(IN_CLUSTER_CONFIG)
    return None


def load_inputs(args: argparse.Namespace) -> tuple[Config, History, pd.Timestamp, str]:
    """Config, history and 'now' from the flags; the demo when nothing is given."""
    import pandas as pd

    from forecaster.series import read_history_csv
    from scaler.config import load_config
    from scaler.cycle import bind_history
    from scaler.demo import demo_inputs

    config_path = resolve_config_path(args)
    history_path = getattr(args, "history", None)
    if config_path is None and history_path is None:
        config, history, now = demo_inputs()
        label = "built-in demo fleet"
    else:
        history = {}
        if history_path is not None:
            history = read_history_csv(history_path)
        config = load_config(config_path) if config_path else _config_from_history(history, args)
        collected_at: pd.Timestamp | None = None
        if not history:
            if any(s.query is not None for s in config.signals):
                # Prometheus windows end at the collection time, and 'now' is that time,
                # so a signal whose newest sample is old reads as stale (no scale-down).
                collected_at = _explicit_now(args) or pd.Timestamp.now(tz="UTC").tz_localize(None)
            history = _history_from_config(
                config, Path(config_path).parent if config_path else Path("."), collected_at
            )
        history = bind_history(config, history, source=str(history_path or config_path))
        now = collected_at if collected_at is not None else _default_now(history)
        label = str(history_path or config_path)
    explicit = _explicit_now(args)
    if explicit is not None:
        now = explicit
    from scaler.cli_report import apply_fleet_flags

    return apply_fleet_flags(config, args), history, now, label


def _explicit_now(args: argparse.Namespace) -> pd.Timestamp | None:
    """``--now`` as a naive UTC timestamp, or None when not given."""
    import pandas as pd

    if not getattr(args, "now", None):
        return None
    try:
        given = pd.Timestamp(args.now)
    except ValueError as exc:
        raise BadInputError(f"--now: {args.now!r} is not an ISO-8601 timestamp") from exc
    return given.tz_localize(None) if given.tzinfo is None else given.tz_convert(None)


def _history_from_config(config: Config, base: Path, now: pd.Timestamp | None = None) -> History:
    """Read each signal's ``file``; signals with a PromQL query need a metric source."""
    from forecaster.series import read_history_csv

    history: History = {}
    for s in config.signals:
        if s.file is not None:
            path = Path(s.file) if Path(s.file).is_absolute() else base / s.file
            data = read_history_csv(path)
            key = s.series or (s.name if s.name in data else next(iter(data)))
            if key not in data:
                raise BadInputError(f"signal {s.name!r}: file {str(path)!r} has no series {key!r}")
            history[s.name] = data[key].rename(s.name)
        elif s.query is not None:
            history.update(_collect_prometheus(config, s.name, now))
        else:
            raise BadInputError(
                f"signal {s.name!r} has neither 'file' nor 'query'; give one, or pass --history"
            )
    return history


def _collect_prometheus(config: Config, signal: str, now: pd.Timestamp | None = None) -> History:
    # Imported here: the Prometheus client is only needed by configs that query it.
    from scaler.collecting import collect_signal

    return dict(collect_signal(config, signal, now=now))


def _write(path: str, text: str) -> None:
    p = Path(path)
    if p.parent and not p.parent.exists():
        p.parent.mkdir(parents=True, exist_ok=True)
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    tmp.replace(p)


OUTPUT_FORMATS = ("table", "json", "yaml")


def cycle_document(result: CycleResult) -> dict:
    """The plan and what became of each action, as ``-o json|yaml`` prints it."""
    return {
        "plan": json.loads(result.plan.to_json()),
        "dry_run": result.dry_run,
        "results": [
            {
                "pool": r.action.pool,
                "decision": r.action.decision,
                "target_nodes": r.action.target_nodes,
                "outcome": r.outcome,
                "message": r.message,
                "calls": r.calls,
            }
            for r in result.results
        ],
    }


def format_document(document: object, output: str) -> str:
    """``document`` as JSON or YAML text (kubectl's ``-o``)."""
    if output == "yaml":
        import yaml

        return yaml.safe_dump(document, sort_keys=False, allow_unicode=True)
    return json.dumps(document, indent=2, sort_keys=False) + "\n"


def print_document(document: object, output: str) -> None:
    """``document`` on stdout as JSON or YAML (kubectl's ``-o``)."""
    sys.stdout.write(format_document(document, output))


def text_table(rows: list[list[str]], right: set[int]) -> list[str]:
    """Aligned lines, indented two spaces: ``rows[0]`` is the header; columns in ``right``
    are right-aligned (numbers)."""
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return [
        "  "
        + "  ".join(
            c.rjust(w) if i in right else c.ljust(w)
            for i, (c, w) in enumerate(zip(r, widths, strict=True))
        ).rstrip()
        for r in rows
    ]


def _print_cycle(result: CycleResult, label: str, out: str | None, output: str = "table") -> None:
    from scaler.plans import actions_table

    if output != "table":
        print_document(cycle_document(result), output)
        if out:
            print(f"plan written to {out}", file=sys.stderr)
        return
    plan = result.plan
    mode = "dry-run" if result.dry_run else "live"
    print(f"tiercast {__version__} | {label} | now {plan.created_at} | {mode}")
    print(
        f"forecast: quantile q{plan.quantile:g}, horizon {plan.horizon_s / 3600:g} h, step {plan.step_s} s"
    )
    for s in plan.signals:
        flag = " STALE" if s.stale else ""
        print(
            f"  {s.name:<16} {s.estimator:<22} last {s.last_value:,.2f} {s.unit} at {s.last_timestamp}; peak q{plan.quantile:g} {s.peak_at_quantile:,.2f}{flag}"
        )
    print()
    print(actions_table(plan))
    print()
    for note in plan.notes:
        print(f"note: {note}")
    c = plan.cost
    print(
        f"cost: {c['per_hour_current']:.2f}/h now -> {c['per_hour_now']:.2f}/h planned; "
        f"{c['horizon_total']:.2f} over the horizon; expected unserved "
        f"{plan.risk['expected_unserved_gpu_hours']:.2f} GPU-h"
    )
    for r in result.results:
        print(
            f"{r.outcome}: {r.action.pool} {r.action.decision} -> {r.action.target_nodes} {r.message}"
        )
        for call in r.calls:
            if call.get("verb") != "GET":
                print(f"    {_format_call(call)}")
    if out:
        print(f"plan written to {out}")


def cmd_run(args: argparse.Namespace) -> int:
    """One cycle through the same job function ``serve`` schedules (exit codes: scaler.service)."""
    from scaler.service import Inputs, run_once

    def load() -> Inputs:
        config, history, now, label = load_inputs(args)
        return Inputs(config, history, now, label)

    return run_once(
        args, load, lambda result, label: _print_cycle(result, label, args.plan_out, args.output)
    )


def _format_call(call: dict) -> str:
    """One API call as ``VERB path?query body``; reads are left out of the printed list."""
    where = call.get("path") or call.get("pool", "")
    if call.get("query"):
        where += "?" + "&".join(f"{k}={v}" for k, v in call["query"].items())
    extra = {k: v for k, v in call.items() if k not in ("verb", "path", "pool", "query", "status")}
    text = f"{call['verb']} {where}"
    if "body" in extra:
        text += " " + json.dumps(extra.pop("body"), separators=(",", ":"), sort_keys=True)
    if extra:
        text += " " + " ".join(f"{k}={v}" for k, v in extra.items())
    return text


def plan_without_acting(
    args: argparse.Namespace,
) -> tuple[Config, History, pd.Timestamp, str, CycleResult]:
    """Load the inputs, apply ``--horizon``, and plan against the configured inventory.

    ``plan`` and ``report`` share this: both forecast and plan exactly as ``run`` does,
    with a recording provider, so they can never change the cluster.
    """
    from forecaster.series import parse_duration
    from scaler.actuators import RecordingProvider
    from scaler.cycle import run_cycle

    config, history, now, label = load_inputs(args)
    if getattr(args, "horizon", None):
        horizon_s = int(parse_duration(args.horizon).total_seconds())
        config = config.model_copy(
            update={"policy": config.policy.model_copy(update={"horizon_s": horizon_s})}
        )
    inventory = {
        p.name: p.current_nodes if p.current_nodes is not None else p.min_nodes
        for p in config.pools
    }
    result = run_cycle(config, history, RecordingProvider(inventory), now, dry_run=True)
    return config, history, now, label, result


def cmd_plan(args: argparse.Namespace) -> int:
    from forecaster.progress import Progress
    from scaler.cli_report import finance_dry_run, prepare_finance

    finance_options = prepare_finance(args)
    # One unit for the plan; the finance projection adds its scenarios and files.
    with Progress.for_args(args, "plan", total=1) as bar:
        bar.describe("forecast and plan")
        config, _, now, label, result = plan_without_acting(args)
        _write(args.plan_out, result.plan.to_json())
        bar.update(label="finance projection")
        with bar.paused():
            _print_cycle(result, label, args.plan_out, args.output)
        if args.output == "table":
            finance_dry_run(finance_options, config, result, now, label, bar)
        else:
            # stdout carries the document alone, so it can be piped to jq or yq.
            with contextlib.redirect_stdout(sys.stderr):
                finance_dry_run(finance_options, config, result, now, label, bar)
    return 0


def select_series(history: History, name: str | None) -> pd.Series:
    """The ``--series`` named ``name``, or the file's only series when ``name`` is None."""
    if name is not None:
        if name not in history:
            raise BadInputError(
                f"--series: {name!r} is not in the file; it has {', '.join(sorted(history))}"
            )
        return history[name]
    if len(history) == 1:
        return next(iter(history.values()))
    raise BadInputError(
        f"--history has {len(history)} series ({', '.join(sorted(history))}); pick one with --series"
    )


def parse_quantiles(text: str) -> list[tuple[float, str]]:
    from forecaster.estimators import check_quantiles

    parts = [p.strip() for p in text.split(",") if p.strip()]
    out = []
    for p in parts:
        try:
            out.append((float(p), p))
        except ValueError:
            raise BadInputError(
                f"--quantiles: {p!r} is not a number; expected e.g. 0.1,0.5,0.9"
            ) from None
    check_quantiles([q for q, _ in out], "--quantiles")
    return out


FORECAST_FORMATS = ("csv", "table", "json", "yaml")
"""What ``tiercast forecast -o`` writes: the CSV of old (default), or as ``run`` does."""


def cmd_forecast(args: argparse.Namespace) -> int:
    from forecaster.artifacts import load_signing_key
    from forecaster.estimators import quantile_column
    from forecaster.forecasting import forecast_series
    from forecaster.progress import Progress
    from forecaster.series import parse_duration, read_history_csv
    from forecaster.store import ModelStore
    from scaler.demo import demo_inputs

    if args.history is None:
        _, history, _ = demo_inputs()
    else:
        history = read_history_csv(args.history)
    if args.series:
        history = {args.series: select_series(history, args.series)}
    quantiles = parse_quantiles(args.quantiles)
    horizon = parse_duration(args.horizon)
    # A store path makes repeated forecasts of the same series reuse the selected model.
    store = (
        ModelStore(args.model_store, signing_key=load_signing_key(None))
        if getattr(args, "model_store", None)
        else None
    )
    forecasts = []
    with Progress.for_args(args, "forecast", len(history), "series") as bar:
        for name, y in history.items():
            bar.describe(name)
            fc = forecast_series(
                y.rename(name), horizon, [q for q, _ in quantiles], args.method, store
            )
            frame = fc.frame.rename(
                columns={quantile_column(q): f"q{text}" for q, text in quantiles}
            )[[f"q{text}" for _, text in quantiles]]
            forecasts.append((name, fc, frame))
            bar.update()
            bar.write(f"{name}: {fc.estimator} ({fc.reason}); {len(frame)} steps of {fc.step}")
    text = forecast_text(forecasts, args.output)
    if args.output_file in (None, "-"):
        sys.stdout.write(text)
    else:
        _write(args.output_file, text)
        print(f"forecast written to {args.output_file}", file=sys.stderr)
    return 0


def forecast_text(forecasts: list[tuple[str, Any, pd.DataFrame]], output: str) -> str:
    """The forecasts (name, forecast, frame of its q-columns) as ``output`` shows them.

    ``csv``: ``timestamp[,series],q...`` (a ``series`` column when there are several);
    ``table``: the same, aligned, per series; ``json``/``yaml``: one document with each
    series' estimator, reason, step and points.
    """
    import pandas as pd

    from scaler.plans import iso

    if output in ("json", "yaml"):
        document = {
            "forecasts": [
                {
                    "series": name,
                    "estimator": fc.estimator,
                    "reason": fc.reason,
                    "step_s": int(fc.step.total_seconds()),
                    "points": [
                        {
                            "timestamp": iso(ts),
                            # Strict JSON: a non-finite value (never expected) is null.
                            **{
                                c: float(v) if math.isfinite(v) else None
                                for c, v in zip(frame.columns, row, strict=True)
                            },
                        }
                        for ts, row in zip(frame.index, frame.to_numpy(dtype=float), strict=True)
                    ],
                }
                for name, fc, frame in forecasts
            ]
        }
        return format_document(document, output)
    if output == "table":
        blocks = []
        for name, fc, frame in forecasts:
            rows = [["timestamp", *frame.columns]]
            rows += [
                [iso(ts).rstrip("Z"), *(f"{float(v):,.6g}" for v in row)]
                for ts, row in zip(frame.index, frame.to_numpy(), strict=True)
            ]
            head = f"{name}: {fc.estimator}, {len(frame)} steps of {fc.step}"
            blocks.append("\n".join([head, *text_table(rows, set(range(1, len(rows[0]))))]))
        return "\n\n".join(blocks) + "\n"
    frames = []
    for name, _, frame in forecasts:
        frame = frame.copy()
        frame.index = [iso(t).rstrip("Z") for t in frame.index]
        frame.index.name = "timestamp"
        if len(forecasts) > 1:
            frame.insert(0, "series", name)
        frames.append(frame)
    return pd.concat(frames).to_csv(float_format="%.6g")


def add_fleet_flags(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--current-nodes`` for ``plan``, ``report`` and ``run`` inputs."""
    p.add_argument(
        "--current-nodes",
        action="append",
        default=[],
        metavar="POOL=N",
        help="nodes running now in POOL (repeatable); overrides the config's current_nodes, "
        "e.g. default-on-demand=4 with --history (default: the config's, else min_nodes)",
    )


def _add_input_flags(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--config",
        "-c",
        help="YAML config (see data/example-config.yaml); default: $TIERCAST_CONFIG, then "
        f"{IN_CLUSTER_CONFIG} when present, else the built-in demo",
    )
    p.add_argument(
        "--history",
        help="CSV history (timestamp,value or timestamp,series,value) instead of the config's sources",
    )
    p.add_argument(
        "--now", help="plan as of this time (ISO-8601, UTC); default: just after the newest sample"
    )
    p.add_argument(
        "--plan-out",
        default="tiercast-plan.json",
        help="where to write the plan JSON (default: %(default)s)",
    )
    add_fleet_flags(p)
    g = p.add_argument_group("for --history without --config")
    g.add_argument(
        "--signal-unit",
        default="1",
        help="unit of the history's values, shown in reports, e.g. requests/s (default: %(default)s)",
    )
    g.add_argument(
        "--units-per-gpu",
        type=float,
        default=1.0,
        help="signal units one GPU serves (default 1: the values are GPUs)",
    )
    g.add_argument(
        "--gpu-model",
        default="H100-80GB",
        help="GPU model of the default pool (default: %(default)s)",
    )
    g.add_argument(
        "--gpus-per-node",
        type=int,
        default=8,
        help="GPUs per node of the default pool (default: %(default)s)",
    )
    g.add_argument(
        "--price-per-gpu-hour",
        type=float,
        default=4.0,
        help="price of the default pool (default: %(default)s)",
    )


def _add_output_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "-o",
        "--output",
        choices=OUTPUT_FORMATS,
        default="table",
        help="what stdout shows: the human table (default), or the plan and action "
        "outcomes as json or yaml (other messages go to stderr)",
    )


def register(sub: argparse._SubParsersAction, only: Collection[str] | None = None) -> None:
    """Add the core commands ``run``, ``plan`` and ``forecast`` (or those of ``only``)."""
    if only is None or "run" in only:
        _add_run(sub)
    if only is None or "plan" in only:
        _add_plan(sub)
    if only is None or "forecast" in only:
        _add_forecast(sub)


def _add_run(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="one full cycle: collect, forecast, plan, act (or record with --dry-run)",
        description="Run one plan-and-act cycle. With no --config it runs the built-in demo fleet.",
    )
    _add_input_flags(p)
    _add_output_flag(p)
    p.add_argument(
        "--dry-run", action="store_true", help="record the actions instead of applying them"
    )
    k = p.add_argument_group(
        "Kubernetes (pools whose provider kind is cluster-api, karpenter or placeholder)"
    )
    k.add_argument(
        "--kubeconfig",
        help="kubeconfig file; default: in-cluster service account, else ~/.kube/config",
    )
    k.add_argument("--context", help="kubeconfig context; default: the current context")
    k.add_argument(
        "--server-dry-run",
        action="store_true",
        help="send the writes with dryRun=All: the API server validates them, nothing persists (implies --dry-run)",
    )
    p.set_defaults(func=cmd_run)


def _add_plan(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "plan",
        help="forecast and plan without acting; print the plan",
        description="Forecast and plan; never acts. Finance uses it with --horizon for projections.",
    )
    _add_input_flags(p)
    _add_output_flag(p)
    p.add_argument(
        "--dry-run", action="store_true", help="accepted for symmetry with 'run'; plan never acts"
    )
    p.add_argument(
        "--horizon",
        help="planning horizon, e.g. 24h, 7d, 90d (default: the config's policy.horizon_s)",
    )
    from scaler.cli_report import add_finance_flags

    add_finance_flags(p)
    p.set_defaults(func=cmd_plan)


def _add_forecast(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forecast",
        help="forecast a CSV history with quantiles; write timestamp,q... CSV",
        description="Forecast each series of a CSV one horizon ahead at its own step.",
    )
    p.add_argument("--history", help="CSV history; default: the demo history")
    p.add_argument("--series", help="only this series of a long-format file")
    p.add_argument(
        "--horizon", default="24h", help="how far ahead, e.g. 6h, 24h, 7d (default: %(default)s)"
    )
    p.add_argument(
        "--quantiles",
        default="0.1,0.5,0.9",
        help="comma-separated quantiles (default: %(default)s)",
    )
    p.add_argument(
        "--method", default="auto", help="estimator name or 'auto' (default: %(default)s)"
    )
    p.add_argument(
        "-o",
        "--output",
        action=_ForecastOutput,
        default="csv",
        metavar="{csv,table,json,yaml}",
        help="the format: CSV timestamp[,series],q... (default), an aligned table per "
        "series, or json or yaml with each series' estimator and points",
    )
    p.add_argument(
        "--output-file",
        "--out",
        dest="output_file",
        metavar="FILE",
        help="write there instead of standard output ('-' is standard output)",
    )
    p.add_argument(
        "--model-store",
        help="folder of stored models to reuse and update (e.g. models); default: none",
    )
    from forecaster.progress import add_progress_flag

    add_progress_flag(p)
    p.set_defaults(func=cmd_forecast)


class _ForecastOutput(argparse.Action):
    """``-o FORMAT``; the former ``-o FILE`` (a path ending in .csv, or with a folder) is
    still written, with a warning, and anything else is refused naming ``--output-file``."""

    completions = FORECAST_FORMATS
    """What shell completion offers after ``-o`` (argparse ``choices`` would refuse a file)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        value = str(values)
        if value in FORECAST_FORMATS:
            namespace.output = value
        elif value.lower().endswith(".csv") or "/" in value or os.sep in value:
            print(
                f"tiercast: warning: 'forecast -o FILE' is deprecated; use --output-file "
                f"{value} (-o now picks the format: {', '.join(FORECAST_FORMATS)})",
                file=sys.stderr,
            )
            namespace.output = "csv"
            namespace.output_file = namespace.output_file or value
        else:
            parser.error(
                f"argument -o/--output: {value!r} is not a format; expected one of "
                f"{', '.join(FORECAST_FORMATS)} (write a file with --output-file FILE)"
            )


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``tiercast`` parser: every command, or real parsers for ``only`` alone.

    With ``only``, the other commands are one-line entries for ``--help`` and for
    argparse's "invalid choice" message, and their modules are never imported.
    """
    parser = argparse.ArgumentParser(
        prog="tiercast",
        description="Predictive capacity planner for GPU clusters: forecast demand, plan node tiers and MIG layouts ahead of time.",
    )
    parser.add_argument("--version", action="version", version=f"tiercast {__version__}")
    parser.add_argument(
        "--log-level", default="WARNING", help="DEBUG, INFO, WARNING (default) or ERROR"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = [name for name in COMMANDS if only is None or name in only]
    for module in dict.fromkeys(COMMANDS[name][0] for name in chosen):
        if module == "scaler.cli":
            register(sub, chosen)
        else:
            importlib.import_module(module).register(sub)
    for name, (_, summary) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=summary, add_help=False)
    order = list(COMMANDS)
    sub._choices_actions.sort(key=lambda a: order.index(a.dest) if a.dest in order else len(order))
    return parser


def command_in(argv: Sequence[str]) -> str | None:
    """The subcommand named in ``argv`` (the first word that is no flag or flag value)."""
    tokens = iter(argv)
    for token in tokens:
        if token == "--log-level":
            next(tokens, None)
        elif not token.startswith("-"):
            return token
    return None


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    command = command_in(words)
    parser = build_parser({command} if command in COMMANDS else set())
    args = parser.parse_args(words)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level).upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Masking is on before the first log line (a retry warning may quote a server's echo).
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
    try:
        return int(args.func(args) or 0)
    except TiercastError as exc:
        print(one_line(f"tiercast: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tiercast: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
