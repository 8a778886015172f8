"""``tiercast lab``: the benchmarks, apart from the product's commands.

The lab measures the product (forecasting accuracy on the public traces, batch
forecasting at scale, the MIG layout solver, command start-up); nothing that runs in
a cycle imports it (an import-linter contract in pyproject.toml says so). Each
benchmark is one module of this package with ``register(subparsers)``; ``LAB`` names
them. They run as ``tiercast lab NAME ...`` and, as before, as ``tiercast NAME ...``,
which ``tiercast --help`` no longer lists (its epilog points here).
"""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Collection

LAB: dict[str, tuple[str, str]] = {
    "bench-forecast": (
        "scaler.cli.lab.forecast",
        "the forecasting benchmark on the public traces",
    ),
    "bench-scale": ("scaler.cli.lab.scale", "benchmark batch forecasting of many series"),
    "bench-mig": ("scaler.cli.lab.mig", "benchmark the MIG layout solver against its heuristic"),
    "bench-start": ("scaler.cli.lab.start", "benchmark command start-up time against bare Python"),
    "bench-commit": (
        "scaler.cli.lab.commit",
        "reserved commitments from the forecast's advice against a rule without one",
    ),
    "bench-cycle": (
        "scaler.cli.lab.cycle",
        "where the time of one cold demo cycle goes, by step and in forecasting",
    ),
    "tier-gap": (
        "scaler.cli.lab.tier_gap",
        "the tiered plan against the tiered rule at its margin and at hindsight's",
    ),
}
"""Every benchmark: the module that registers it and its line in ``tiercast lab --help``."""

SUMMARY = "the benchmarks: forecasting accuracy, scale-out, MIG solver, start-up time"
"""``lab``'s line in ``tiercast --help``."""


def register_benchmarks(
    sub: argparse._SubParsersAction, only: Collection[str] | None = None, listed: bool = True
) -> None:
    """Add every benchmark to ``sub``: real parsers for ``only`` (None: all), one-line
    entries for the others (their modules are never imported). ``listed``: False leaves
    them out of ``sub``'s help list (the old top-level spellings)."""
    for name, (module, summary) in LAB.items():
        if only is None or name in only:
            importlib.import_module(module).register(sub)
        else:
            if listed:
                sub.add_parser(name, help=summary, add_help=False)
            else:
                sub.add_parser(name, add_help=False)
    if not listed:
        sub._choices_actions[:] = [a for a in sub._choices_actions if a.dest not in LAB]


def register(subparsers: argparse._SubParsersAction, only: Collection[str] | None = None) -> None:
    """Add ``tiercast lab`` and its benchmarks (real parsers for ``only`` alone, if given)."""
    p = subparsers.add_parser(
        "lab",
        help=SUMMARY,
        description="Benchmarks of tiercast itself, apart from the product's commands. "
        "`tiercast lab NAME --help` describes each; `tiercast NAME` runs it too.",
    )
    sub = p.add_subparsers(dest="benchmark", metavar="BENCHMARK")
    sub.required = True
    register_benchmarks(sub, only)
