"""Run the whole fuzz corpus against the ``tiercast`` command and count the outcomes.

Independent of tiercast's code: it only runs the command (default ``tiercast``; give
``--command "python -m scaler.cli"`` from a checkout) in a fresh folder per case, with
a time limit, and judges exit code, stderr and the plan file (``tests/fuzz_corpus.py``).
Prints one line per case that is not clean, then the counts::

    python tests/fuzz_cli.py --random 100 --timeout 60
    tried 188 clean 188 traceback 0 wrong-success 0 hang 0

Exits 1 when any traceback, wrong success or hang is found.
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from fuzz_corpus import (
    Case,
    hand_config_cases,
    hand_history_cases,
    hand_input_cases,
    hand_output_cases,
    judge,
    left_in,
    place_files,
    random_config_cases,
    serve_prometheus,
    special_output_cases,
    state_cases,
    stray_files,
    suspect_input_cases,
)


def run_case(case: Case, command: list[str], timeout_s: float) -> tuple[str, str, float]:
    if case.prometheus is None:
        return _run_case(case, command, timeout_s, None)
    with serve_prometheus(case.prometheus) as url:
        return _run_case(case, command, timeout_s, url)


def _run_case(
    case: Case, command: list[str], timeout_s: float, url: str | None
) -> tuple[str, str, float]:
    with tempfile.TemporaryDirectory(prefix="tiercast-fuzz-") as tmp:
        # The case's folder, and beside it a state directory of its own (never the user's).
        folder = Path(tmp) / "work"
        folder.mkdir()
        state = Path(tmp) / "state"
        place_files(case, folder, url)
        began = time.monotonic()
        try:
            done = subprocess.run(
                [*command, *case.argv],
                cwd=folder,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=timeout_s,
                env={
                    **{k: v for k, v in os.environ.items() if k != "TIERCAST_STATE_DIR"},
                    "TIERCAST_LOG_FORMAT": "text",
                    "XDG_STATE_HOME": str(state),
                },
            )
            code: int | None = done.returncode
            stderr = done.stderr
        except subprocess.TimeoutExpired as exc:
            code, stderr = None, str(exc.stderr or "")
        seconds = time.monotonic() - began
        plan = folder / "plan.json"
        plan_text = plan.read_text(errors="replace") if plan.is_file() else None
        left = left_in(folder)
        verdict = judge(case, code, stderr, plan_text, left)
        last = stderr.strip().splitlines()[-1][:200] if stderr.strip() else ""
        stray = stray_files(case, left)
        if stray:
            last = f"left in the working folder: {', '.join(stray[:5])}"
        return verdict, f"exit {code} in {seconds:.1f} s: {last}", seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--command", default="tiercast", help="how to run tiercast")
    parser.add_argument("--random", type=int, default=100, help="random config mutations")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds per case")
    parser.add_argument("--skip-slow", action="store_true", help="leave out the slow cases")
    parser.add_argument("-v", "--verbose", action="store_true", help="print every case")
    parser.add_argument(
        "--leave-out", metavar="PREFIX", help="leave out the cases named PREFIX... (PREFIX,PREFIX)"
    )
    parser.add_argument(
        "--only", metavar="PREFIX", help="only the cases named PREFIX... (several: PREFIX,PREFIX)"
    )
    args = parser.parse_args(argv)
    command = shlex.split(args.command)
    cases = [*hand_config_cases(), *hand_history_cases(), *hand_output_cases()]
    cases += [*hand_input_cases(), *state_cases(), *suspect_input_cases()]
    cases += special_output_cases()
    cases += list(random_config_cases(args.random, args.seed))
    if args.leave_out:
        cases = [c for c in cases if not c.name.startswith(tuple(args.leave_out.split(",")))]
    if args.only:
        cases = [c for c in cases if c.name.startswith(tuple(args.only.split(",")))]
    if args.skip_slow:
        cases = [c for c in cases if not c.slow]
    counts: Counter[str] = Counter()
    for case in cases:
        verdict, detail, _ = run_case(case, command, args.timeout)
        counts[verdict] += 1
        if verdict != "clean" or args.verbose:
            print(f"{verdict:13} {case.name}: {detail}", flush=True)
    print(
        f"tried {len(cases)} clean {counts['clean']} traceback {counts['traceback']} "
        f"wrong-success {counts['wrong-success']} hang {counts['hang']}"
    )
    return 1 if counts["traceback"] or counts["wrong-success"] or counts["hang"] else 0


if __name__ == "__main__":
    sys.exit(main())
