"""The ``tiercast`` command line.

Exit status: 0 success, 1 runtime failure (a server down, a failed cycle),
2 bad input or config. Every error is one line on stderr that names what was
wrong. Each command (or group of commands) is one thin module of this package that
parses, calls the package that does the work, and prints; ``COMMANDS`` names it, and each
exposes ``register(subparsers)``. What they share is in ``scaler.cli.common``. The
benchmarks are ``tiercast lab`` (:mod:`scaler.cli.lab`), apart from the product's commands.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys
from collections.abc import Collection, Sequence

# Only the module of the command being run is imported (below), so `tiercast --version`
# and `--help` start without pandas, scipy, Prophet or the Kubernetes client.
from forecaster import __version__
from forecaster.errors import TiercastError
from forecaster.secrets import RedactSecrets
from scaler.cli.common import one_line
from scaler.cli.lab import LAB, SUMMARY, register_benchmarks

log = logging.getLogger("tiercast")


# Every subcommand: the module that registers it (``register(subparsers)``) and its line in `tiercast --help`. Only the module of the command
# being run is imported, so each command pays for its own imports alone;
# tests/test_operations.py checks this table against what the modules register.
COMMANDS: dict[str, tuple[str, str]] = {
    "run": (
        "scaler.cli.run",
        "one full cycle: collect, forecast, plan, act (or record with --dry-run)",
    ),
    "plan": ("scaler.cli.plan", "forecast and plan without acting; print the plan"),
    "explain": (
        "scaler.cli.explain",
        "everything behind each decision of the last plan, like kubectl describe",
    ),
    "forecast": (
        "scaler.cli.forecast",
        "forecast a CSV history with quantiles; write timestamp,q... CSV",
    ),
    "backfill": ("scaler.cli.backfill", "load CSV traces into a Prometheus TSDB directory"),
    "history": (
        "scaler.cli.history",
        "list recent runs (status, actions, errors) from the run records",
    ),
    "shadow": (
        "scaler.cli.shadow",
        "the capacity the cluster ran against tiercast's plan: cost, unserved, verdict",
    ),
    "serve": ("scaler.cli.serve", "run the cycle, refit and report on schedules, with /metrics"),
    "report": ("scaler.cli.report", "write the capacity review (HTML, Markdown, CSV, JSON)"),
    "agent": ("scaler.cli.agent", "the node agent: GPU and MIG state through NVML, apply layouts"),
    "inventory": (
        "scaler.cli.inventory",
        "each node as the planner reads it: pool, GPUs, MIG, sharing, held and why",
    ),
    "simulate": ("scaler.cli.simulate", "replay a demand trace: tiercast against the baselines"),
    "backtest": ("scaler.cli.forecasting", "rolling-origin backtest of forecasting methods"),
    "completion": ("scaler.cli.completion", "print a shell completion script (bash or zsh)"),
    "lab": ("scaler.cli.lab", SUMMARY),
}
EPILOG = "benchmarks: tiercast lab --help"
"""The one line of ``tiercast --help`` about the benchmarks (``tiercast NAME`` still runs each)."""


def build_parser(only: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The ``tiercast`` parser: every command, or real parsers for ``only`` alone.

    With ``only``, the other commands are one-line entries for ``--help`` and for
    argparse's "invalid choice" message, and their modules are never imported.
    """
    parser = argparse.ArgumentParser(
        prog="tiercast",
        description="Predictive capacity planner for GPU clusters: forecast demand, plan node tiers and MIG layouts ahead of time.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"tiercast {__version__}")
    parser.add_argument("--log-level", default=None, help=LOG_LEVEL_HELP)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    chosen = [name for name in COMMANDS if only is None or name in only]
    for module in dict.fromkeys(COMMANDS[name][0] for name in chosen):
        if module == "scaler.cli.lab":  # its benchmarks are real parsers only where asked for
            importlib.import_module(module).register(sub, only)
        else:
            importlib.import_module(module).register(sub)
    for name, (_, summary) in COMMANDS.items():
        if name not in sub.choices:
            sub.add_parser(name, help=summary, add_help=False)
    # The benchmarks' top-level spellings: they run as before, unlisted (see EPILOG).
    register_benchmarks(sub, only, listed=False)
    order = list(COMMANDS)
    sub._choices_actions.sort(key=lambda a: order.index(a.dest) if a.dest in order else len(order))
    _global_flags_after(sub)
    return parser


LOG_LEVEL_HELP = "DEBUG, INFO, WARNING (default; serve adds its one INFO line per cycle) or ERROR"
INFO_BY_DEFAULT = {"serve": ("tiercast.cycle",)}
"""Loggers a command shows at INFO when ``--log-level`` is not given (the rest at WARNING):
``serve`` logs one line per cycle (:data:`scaler.service.cycle_job.SUMMARY_LOGGER`)."""


def _global_flags_after(sub: argparse._SubParsersAction) -> None:
    """The global flags are accepted after the command too (``serve --log-level INFO``), as
    kubectl's are; unset there, they leave the value given before it (or the default)."""
    for command in sub.choices.values():
        if "--log-level" not in command._option_string_actions:
            command.add_argument("--log-level", default=argparse.SUPPRESS, help=LOG_LEVEL_HELP)
        for action in command._actions:
            if isinstance(action, argparse._SubParsersAction):
                _global_flags_after(action)


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
    if command == "lab":  # the benchmark named after it is the one to build
        command = command_in(words[words.index("lab") + 1 :]) or command
        wanted = {"lab", command}
    else:
        wanted = {command} if command in COMMANDS or command in LAB else set()
    parser = build_parser(wanted)
    args = parser.parse_args(words)
    shown = INFO_BY_DEFAULT.get(str(command), ()) if args.log_level is None else ()
    for name in {n for names in INFO_BY_DEFAULT.values() for n in names}:
        logging.getLogger(name).setLevel(logging.INFO if name in shown else logging.NOTSET)
    if args.log_level is not None and str(args.log_level).upper() != "DEBUG":
        # The scheduler's own lines (job added, running, done) repeat the cycle's one line.
        logging.getLogger("apscheduler").setLevel(logging.WARNING)
    logging.basicConfig(
        level=getattr(logging, str(args.log_level or "WARNING").upper(), logging.WARNING),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    # Masking is on before the first log line (a retry warning may quote a server's echo).
    for handler in logging.getLogger().handlers:
        if not any(isinstance(f, RedactSecrets) for f in handler.filters):
            handler.addFilter(RedactSecrets())
    from forecaster.library_warnings import summarised_warnings

    try:
        # numpy's, statsmodels' and pandas' warnings: one INFO line at the end, not dozens.
        with summarised_warnings():
            return int(args.func(args) or 0)
    except TiercastError as exc:
        print(one_line(f"tiercast: error: {exc}"), file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("tiercast: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return _reader_left()


def _reader_left() -> int:
    """The reader of standard output left (``tiercast explain | head``): stop quietly.

    Standard output is pointed at the null device so that the interpreter's last flush
    does not raise again; the exit status is the shell's for a command ended by SIGPIPE.
    """
    try:
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, sys.stdout.fileno())
    except (OSError, ValueError):
        pass
    return 141


if __name__ == "__main__":
    sys.exit(main())
