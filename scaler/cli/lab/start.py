"""``tiercast bench-start``: how long commands take to start, as ratios to bare Python.

Each command runs in a fresh process several times; the table gives the median wall
time and its ratio to ``python -c pass`` measured in the same run (these machines are
noisy, so only ratios compare across runs), and which heavy libraries the command
imported. ``--version`` and ``--help`` should import none of them.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence

HEAVY = ("pandas", "scipy", "prophet", "sklearn", "kubernetes", "matplotlib")
"""Libraries whose import costs a start-up a second or more between them."""

CASES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("tiercast --version", ("--version",)),
    ("tiercast --help", ("--help",)),
    ("tiercast run --help", ("run", "--help")),
    ("tiercast history --help", ("history", "--help")),
    ("tiercast run --dry-run (demo cycle)", ("run", "--dry-run", "--plan-out", "/dev/null")),
)

_PROBE = (
    "import sys, runpy\n"
    "sys.argv = ['tiercast', *sys.argv[1:]]\n"
    "from scaler.cli import main\n"
    "try:\n"
    "    code = main(sys.argv[1:])\n"
    "except SystemExit as exc:\n"
    "    code = exc.code or 0\n"
    "heavy = [m for m in {heavy!r} if m in sys.modules]\n"
    "sys.stderr.write('HEAVY=' + ','.join(heavy) + '\\n')\n"
)


def _time(argv: Sequence[str]) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(argv, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - start
    heavy = next((ln[6:] for ln in done.stderr.splitlines() if ln.startswith("HEAVY=")), "")
    return elapsed, heavy


def measure(repeats: int = 5) -> list[dict[str, object]]:
    """Median start time per case, with the bare-Python baseline first."""
    base = statistics.median(_time([sys.executable, "-c", "pass"])[0] for _ in range(repeats))
    rows: list[dict[str, object]] = [
        {"command": "python -c pass (baseline)", "seconds": base, "ratio": 1.0, "heavy": ""}
    ]
    probe = _PROBE.format(heavy=HEAVY)
    for label, args in CASES:
        runs = [_time([sys.executable, "-c", probe, *args]) for _ in range(repeats)]
        seconds = statistics.median(t for t, _ in runs)
        rows.append(
            {"command": label, "seconds": seconds, "ratio": seconds / base, "heavy": runs[0][1]}
        )
    return rows


def table(rows: Sequence[dict[str, object]]) -> str:
    lines = [
        "| command | median seconds | x python -c pass | heavy libraries imported |",
        "| --- | ---: | ---: | --- |",
    ]
    for r in rows:
        lines.append(
            f"| {r['command']} | {float(r['seconds']):.3f} | {float(r['ratio']):.1f}x "  # type: ignore[arg-type]
            f"| {r['heavy'] or 'none'} |"
        )
    return "\n".join(lines)


def cmd_bench_start(args: argparse.Namespace) -> int:
    rows = measure(args.repeats)
    print(table(rows))
    quick = [r for r in rows if r["command"] in ("tiercast --version", "tiercast --help")]
    for r in quick:
        verdict = "met" if float(r["seconds"]) < 0.5 else "NOT met"  # type: ignore[arg-type]
        print(f"- {r['command']}: {float(r['seconds']):.3f} s (target < 0.5 s): {verdict}")  # type: ignore[arg-type]
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench-start",
        help="benchmark command start-up time against bare Python",
        description="Start each command in fresh processes and print the median time, its "
        "ratio to `python -c pass` and the heavy libraries it imported.",
    )
    p.add_argument("--repeats", type=int, default=5, help="runs per command (default 5)")
    p.set_defaults(func=cmd_bench_start)
