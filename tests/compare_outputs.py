"""Check that a refactor changed no output: run the same commands on a base commit and on
the working tree, and compare every file they write, byte for byte.

Usage (from the repository root)::

    python tests/compare_outputs.py --base b16ca79            # the quick set, a few minutes
    python tests/compare_outputs.py --base b16ca79 --full     # plus the whole dev replay suite

The base commit is unpacked with ``git archive`` into a temporary folder (nothing in the
checkout is written); each side runs in a fresh process with its own tree first on
``sys.path`` and its own temporary working folder. The outputs compared: the demo plan
(table and JSON), the capacity review and the finance dry-run (every report file, charts
included), ``simulate`` on one trace and on a suite, ``bench-forecast`` on one group,
``forecast`` and ``backtest``. Timings are the only thing masked (fit seconds and wall
times, which no refactor can keep). Exit status 0 when every file is identical.

Not a pytest module: it runs for minutes and compares two trees, so it is run by hand
before a refactor lands (docs/testing.md).
"""

from __future__ import annotations

import argparse
import difflib
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
TRACES = REPO.parent / "shared" / "data" / "traces"

# Seconds printed by benchmarks and progress lines, and log lines' clock: the things a
# refactor cannot keep. Fit times are printed in "fit s" columns and "*seconds" JSON keys.
TIMING = re.compile(r"\b\d+(?:\.\d+)?\s?(?:s|ms|min)\b(?!\w)")
LOG_CLOCK = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3} ", re.M)
JSON_SECONDS = re.compile(r'("[a-z_]*seconds[a-z_]*": )[-\d.e+]+')
# A log line names its module: where a refactor moved a function, the name moves with it.
LOGGER = re.compile(r"^(<clock> \w+ )[\w.]+(?=: )", re.M)

RUNNER = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "import scaler\n"
    "assert scaler.__file__.startswith(sys.argv[1]), scaler.__file__\n"
    "from scaler.cli import main\n"
    "sys.exit(main(sys.argv[2:]))\n"
)

QUICK_SUITE = """name: compare
tuned_on: [servegen]
series:
  - {path: servegen/m_small_rps_10min.csv, units_per_gpu: 20, group: servegen}
  - {path: helios_earth/helios_earth_vcpDC_gpus_running_5min.csv, units_per_gpu: 1, group: helios_earth}
"""


def commands(full: bool) -> list[tuple[str, list[str]]]:
    """The commands run on each side, by name; each writes under its own folder."""
    cmds: list[tuple[str, list[str]]] = [
        ("run-table", ["run", "--dry-run", "--plan-out", "plan.json"]),
        ("run-json", ["run", "--dry-run", "-o", "json", "--plan-out", ""]),
        ("report", ["report", "--out", "report", "--format", "html,md,csv,json"]),
        ("report-ru", ["report", "--out", "report-ru", "--lang", "ru", "--format", "md,json"]),
        (
            "finance",
            ["plan", "--horizon", "90d", "--out", "finance", "--format", "html,md,csv,json"],
        ),
        ("plan-yaml", ["plan", "-o", "yaml"]),
    ]
    if TRACES.is_dir():
        vcpdc = str(TRACES / "helios_earth" / "helios_earth_vcpDC_gpus_running_5min.csv")
        cmds += [
            (
                "simulate",
                ["simulate", "--history", vcpdc, "--tiers", "--timeline-out", "timeline.csv"],
            ),
            (
                "suite",
                [
                    "simulate",
                    "--suite",
                    str(TRACES),
                    "--suite-file",
                    "SUITE",
                    "--tiers",
                    "--timeline-out",
                    "",
                    "--chart-out",
                    "",
                ],
            ),
            (
                "bench-forecast",
                [
                    "bench-forecast",
                    "--traces",
                    str(TRACES),
                    "--groups",
                    "nasa_ipsc",
                    "--skip-prophet",
                    "--no-cache",
                    "--speed-count",
                    "0",
                    "--per-series",
                ],
            ),
            (
                "forecast",
                ["forecast", "--history", vcpdc, "--horizon", "6h", "-o", "json"],
            ),
            (
                "backtest",
                [
                    "backtest",
                    "--history",
                    vcpdc,
                    "--origins",
                    "2",
                    "--json",
                    "backtest.json",
                    "--methods",
                    "seasonal_naive_1d,seasonal_naive_7d",
                ],
            ),
        ]
        if full:
            cmds.append(
                (
                    "suite-full",
                    [
                        "simulate",
                        "--suite",
                        str(TRACES),
                        "--tiers",
                        "--jobs",
                        "2",
                        "--timeline-out",
                        "",
                        "--chart-out",
                        "",
                    ],
                )
            )
    else:
        print(f"note: {TRACES} is absent; the trace commands are skipped", file=sys.stderr)
    return cmds


def run_side(tree: Path, out: Path, full: bool) -> None:
    """Run every command with ``tree`` first on sys.path, each in ``out/NAME``."""
    suite = out / "quick-suite.yaml"
    out.mkdir(parents=True, exist_ok=True)
    suite.write_text(QUICK_SUITE)
    for name, argv in commands(full):
        work = out / name
        work.mkdir()
        argv = [str(suite) if a == "SUITE" else a for a in argv]
        proc = subprocess.run(
            [sys.executable, "-c", RUNNER, str(tree), *argv],
            cwd=work,
            capture_output=True,
            text=True,
            env={"PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(out), "TZ": "UTC"},
        )
        (work / "stdout.txt").write_text(proc.stdout)
        (work / "stderr.txt").write_text(proc.stderr)
        (work / "exit-status.txt").write_text(f"{proc.returncode}\n")
        print(f"  {tree.name:>8} {name:<15} exit {proc.returncode}", flush=True)


def masked_tables(text: str) -> str:
    """Timing columns masked: Markdown table columns whose header names seconds, and the
    last column of a plain table whose header ends in ``fit s``."""
    out, timing_cols, plain_fit = [], set(), False
    for line in text.split("\n"):
        if line.startswith("|"):
            cells = line.split("|")
            if not timing_cols and "second" in line:
                timing_cols = {i for i, c in enumerate(cells) if "second" in c}
            elif timing_cols and not set(line) <= set("|-: "):
                line = "|".join("<t>" if i in timing_cols else c for i, c in enumerate(cells))
        else:
            timing_cols = set()
            if line.rstrip().endswith("fit s"):
                plain_fit = True
            elif plain_fit and line.strip():
                line = re.sub(r"\S+\s*$", "<t>", line)
            else:
                plain_fit = False
        out.append(line)
    return "\n".join(out)


def masked(path: Path) -> bytes:
    """The file's bytes with timings masked: log clocks and logger names on stderr, fit
    seconds in benchmark and backtest tables and JSON. The commands use the spellings
    both trees know, so a deprecation notice on stderr is left out too."""
    data = path.read_bytes()
    if path.name == "stderr.txt":
        kept = "".join(
            line
            for line in data.decode().splitlines(keepends=True)
            if " is deprecated; use " not in line
        )
        text = LOGGER.sub(r"\1<logger>", LOG_CLOCK.sub("<clock> ", kept))
        return TIMING.sub("<t>", text).encode()
    if path.parent.name in {"bench-forecast", "backtest"}:
        return masked_tables(JSON_SECONDS.sub(r"\1<t>", data.decode())).encode()
    return data


def compare(base: Path, head: Path) -> int:
    """Print one line per file; return the number of files that differ."""
    names = sorted(
        {p.relative_to(base) for p in base.rglob("*") if p.is_file()}
        | {p.relative_to(head) for p in head.rglob("*") if p.is_file()}
    )
    skip = {"tiercast-records.sqlite"}  # SQLite pages carry wall-clock run times
    differ = 0
    for rel in names:
        if rel.name in skip or "models" in rel.parts or ".cache" in rel.parts:
            continue
        a, b = base / rel, head / rel
        if not a.exists() or not b.exists():
            print(f"MISSING  {rel} (only in {'head' if b.exists() else 'base'})")
            differ += 1
        elif masked(a) != masked(b):
            differ += 1
            print(f"DIFFERS  {rel}")
            if rel.suffix in {".txt", ".md", ".csv", ".json", ".yaml", ".html"}:
                lines = difflib.unified_diff(
                    masked(a).decode(errors="replace").splitlines(),
                    masked(b).decode(errors="replace").splitlines(),
                    "base",
                    "head",
                    lineterm="",
                    n=1,
                )
                for line in list(lines)[:20]:
                    print(f"    {line[:200]}")
        else:
            print(f"same     {rel}")
    return differ


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", required=True, help="the commit to compare against")
    parser.add_argument("--full", action="store_true", help="also the whole dev replay suite")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="tiercast-compare-") as tmp:
        root = Path(tmp)
        base_tree = root / "base"
        base_tree.mkdir()
        archive = subprocess.run(
            ["git", "-C", str(REPO), "archive", args.base], capture_output=True, check=True
        )
        subprocess.run(["tar", "-x", "-C", str(base_tree)], input=archive.stdout, check=True)
        for tree, out in ((base_tree, root / "out-base"), (REPO, root / "out-head")):
            run_side(tree, out, args.full)
        differ = compare(root / "out-base", root / "out-head")
    print(f"{differ} file(s) differ between {args.base} and the working tree")
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
