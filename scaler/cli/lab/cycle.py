"""``tiercast lab bench-cycle``: where the time of one cold demo cycle goes.

Each run is a fresh process (no model store, no per-process backtest rows: a cold
cycle, as the first ``tiercast run --dry-run`` on a new machine) that runs the built-in
demo's cycle in dry-run into a temporary state directory while a thread samples the
main thread's stack every few milliseconds. The *cycle* is the samples with
:func:`scaler.service.cycle.run_cycle` on the stack (start-up, reading the config and
writing the records are outside it); of those, a sample counts towards the step on its
stack (collect, forecast, plan_tiers, plan_mig_layouts, plan_sharing, act), towards
*forecasting* when any frame of the ``forecaster`` package is on it (wherever the cycle
called it from), and towards *margin learning* when the near-term rule's backtests are
on it (``scaler/planning/margins.py``, ``scaler/planning/growth.py``). Shares are of
sampled wall time, so they compare across machines and loads where seconds do not; CPU
seconds are the process's and its children's.

``--tree PATH`` runs the same probe on another checkout of the project (a worktree of
an older commit) in the same run, the runs interleaved, so a before and an after share
one machine and one load; the probe classifies by file and function names, and prints
``-`` for a step an older tree does not have.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

STEPS = ("collect", "forecast", "plan_tiers", "plan_mig_layouts", "plan_sharing", "act")
"""The steps of ``run_cycle``, in order."""

_PROBE = r"""
import contextlib, io, json, os, sys, threading, time
from scaler.cli import main
steps = set({steps!r})
counts = {{"samples": 0, "cycle": 0, "forecasting": 0, "margins": 0, "margins_forecasting": 0}}
main_id = threading.get_ident()
done = threading.Event()
def sample():
    while not done.is_set():
        frame = sys._current_frames().get(main_id)
        step, cycle, fc, margins = None, False, False, False
        while frame is not None:
            code = frame.f_code
            name = code.co_filename.replace(os.sep, "/")
            fc = fc or "/forecaster/" in name
            margins = margins or name.endswith(
                ("scaler/planning/margins.py", "scaler/planning/growth.py")
            )
            if name.endswith("scaler/service/cycle.py"):
                cycle = cycle or code.co_name == "run_cycle"
                step = code.co_name if code.co_name in steps else step
            frame = frame.f_back
        counts["samples"] += 1
        if cycle:
            counts["cycle"] += 1
            if step:
                counts[step] = counts.get(step, 0) + 1
            counts["forecasting"] += fc
            counts["margins"] += margins
            counts["margins_forecasting"] += margins and fc
        time.sleep({interval})
thread = threading.Thread(target=sample, daemon=True)
wall = time.perf_counter()
thread.start()
with contextlib.redirect_stdout(io.StringIO()):
    code = main(["run", "--dry-run", "--state-dir", sys.argv[1], "--plan-out", os.devnull])
done.set()
thread.join()
counts["wall_s"] = time.perf_counter() - wall
counts["exit"] = code
sys.stderr.write("PROBE=" + json.dumps(counts) + "\n")
"""


def probe(tree: Path, interval: float = 0.005) -> dict[str, float]:
    """One cold demo cycle of the checkout at ``tree`` in a fresh process: its sample counts."""
    code = _PROBE.format(steps=STEPS, interval=interval)
    env = {**os.environ, "PYTHONPATH": str(tree)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    with tempfile.TemporaryDirectory(prefix="tiercast-bench-cycle-") as state:
        done = subprocess.run(
            [sys.executable, "-c", code, state],
            cwd=tree,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
    line = next((ln for ln in done.stderr.splitlines() if ln.startswith("PROBE=")), None)
    if line is None:
        tail = done.stderr.strip().splitlines()[-1:] or ["no output"]
        raise RuntimeError(f"the cycle probe in {tree} failed: {tail[0]}")
    counts: dict[str, float] = json.loads(line[len("PROBE=") :])
    if counts.get("exit") != 0:
        raise RuntimeError(f"the demo cycle in {tree} exited {counts.get('exit')}")
    counts["cpu_s"] = cpu
    return counts


def shares(counts: dict[str, float]) -> dict[str, float]:
    """The cycle's share of the sampled time; each step's, forecasting's and margin
    learning's share of the cycle's."""
    n = max(counts["cycle"], 1)
    out = {k: counts.get(k, 0) / n for k in STEPS}
    out["cycle"] = counts["cycle"] / max(counts["samples"], 1)
    out["forecasting"] = counts["forecasting"] / n
    out["margins"] = counts["margins"] / n
    out["margins_forecasting"] = counts["margins_forecasting"] / n
    out["other_forecasting"] = out["forecasting"] - out["margins_forecasting"]
    return out


def measure(trees: Sequence[tuple[str, Path]], repeats: int) -> list[dict[str, object]]:
    """Per tree: median wall and CPU seconds and median shares over ``repeats`` cold cycles,
    the trees' runs interleaved so that a change of load falls on each alike."""
    runs: dict[str, list[dict[str, float]]] = {label: [] for label, _ in trees}
    for _ in range(repeats):
        for label, tree in trees:
            runs[label].append(probe(tree))
    rows: list[dict[str, object]] = []
    for label, tree in trees:
        got = runs[label]
        row: dict[str, object] = {"tree": label, "path": str(tree)}
        row["wall_s"] = statistics.median(c["wall_s"] for c in got)
        row["cpu_s"] = statistics.median(c["cpu_s"] for c in got)
        per = [shares(c) for c in got]
        for key in per[0]:
            row[key] = statistics.median(p[key] for p in per)
        row["has_steps"] = any(c.get(s, 0) for c in got for s in STEPS)
        rows.append(row)
    return rows


def table(rows: Sequence[dict[str, object]]) -> str:
    """The markdown table: seconds, the ratio to the first tree, and the shares."""
    base = float(rows[0]["cpu_s"])  # type: ignore[arg-type]
    head = ["tree", "wall s", "CPU s", "CPU x first", "cycle", "forecasting"]
    head += ["margin learning", "its forecasting", "other forecasting", *STEPS]
    lines = ["| " + " | ".join(head) + " |", "|" + " --- |" * len(head)]
    for r in rows:

        def pct(key: str, row: dict[str, object] = r) -> str:
            if key in STEPS and not row["has_steps"]:
                return "-"
            return f"{100 * float(row[key]):.0f}%"  # type: ignore[arg-type]

        cells = [
            str(r["tree"]),
            f"{float(r['wall_s']):.1f}",  # type: ignore[arg-type]
            f"{float(r['cpu_s']):.1f}",  # type: ignore[arg-type]
            f"{float(r['cpu_s']) / base:.2f}",  # type: ignore[arg-type]
            pct("cycle"),
            pct("forecasting"),
            pct("margins"),
            pct("margins_forecasting"),
            pct("other_forecasting"),
            *(pct(s) for s in STEPS),
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def cmd_bench_cycle(args: argparse.Namespace) -> int:
    here = Path(__file__).resolve().parents[3]
    trees = [("this checkout", here)]
    for extra in args.tree:
        path = Path(extra).resolve()
        if not (path / "scaler" / "cli" / "__init__.py").is_file():
            print(f"tiercast: error: --tree {extra}: not a checkout of tiercast", file=sys.stderr)
            return 2
        trees.append((extra, path))
    print(table(measure(trees, args.repeats)))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench-cycle",
        help="where the time of one cold demo cycle goes, by step and in forecasting",
        description="Run the built-in demo's dry-run cycle cold in fresh processes, sample "
        "its stack, and print the wall and CPU seconds, the share of forecasting and of "
        "margin learning, and each step's share; --tree adds an older checkout to the "
        "same run.",
    )
    p.add_argument("--repeats", type=int, default=3, help="cold cycles per tree (default 3)")
    p.add_argument(
        "--tree",
        action="append",
        default=[],
        metavar="PATH",
        help="another checkout of tiercast to measure in the same run (repeatable)",
    )
    p.set_defaults(func=cmd_bench_cycle)
