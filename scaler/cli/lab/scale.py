"""``tiercast bench-scale``: forecasting thousands of series per cycle, 1 process vs 2 vs Dask.

The measurement itself lives in :mod:`forecaster.benchmarks.scaleout`; this module is the
command line around it: options, progress lines on stderr, the Markdown table and
the verdicts against the scale-out targets on stdout.
"""

from __future__ import annotations

import argparse
import sys
from datetime import date
from pathlib import Path

from forecaster.errors import BadInputError
from forecaster.progress import Progress, add_progress_flag
from scaler.cli.common import DeprecatedAlias


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 0, got {text!r}")
    return value


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "bench-scale",
        help="benchmark batch forecasting of many series: 1 process, 2 processes, Dask",
        description=(
            "Forecast many realistic 14-day, 5-minute series (shapes from the public traces) "
            "cold and warm, with 1 process, N processes and an N-worker Dask LocalCluster; "
            "print series/s, speedup and peak memory as a Markdown table."
        ),
    )
    p.add_argument("--count", type=_count, default=1000, help="series in the full and warm cycles")
    p.add_argument(
        "--fit-count", type=_count, default=100, help="series in the cold default-model rows"
    )
    p.add_argument("--prophet-count", type=_count, default=16, help="series in the Prophet rows")
    p.add_argument(
        "--rival-count",
        type=_count,
        default=16,
        help="series in the rows of statsmodels AutoETS and MSTL and of gbm with each engine (1 process)",
    )
    p.add_argument("--workers", type=int, default=2, help="processes / Dask workers (default 2)")
    p.add_argument("--batch-size", type=int, default=8, help="series per task (default 8)")
    p.add_argument(
        "--backends",
        default="joblib,dask",
        help="backends compared with the 1-process baseline: joblib, dask (default both)",
    )
    p.add_argument("--traces", type=Path, default=None, help="public traces folder")
    p.add_argument(
        "--out-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the table to this file (Markdown)",
    )
    p.add_argument(
        "--out", type=Path, dest="out_file", action=DeprecatedAlias, replacement="--out-file"
    )
    # Kept for one release: the cycle with the series as their fleet is gone, since
    # auto never considers the global model (every series is forecast alone).
    p.add_argument("--no-fleet", action="store_true", help=argparse.SUPPRESS)
    add_progress_flag(p)
    p.set_defaults(func=_run)


def expected_rows(args: argparse.Namespace, backends: tuple[str, ...], rivals: int) -> int:
    """The rows :func:`forecaster.benchmarks.scaleout.run` measures for these options (the bar's total).

    Two calibration rows; the baseline and each backend's cold row of the default model;
    each backend's Prophet row; one row per statsmodels rival; the store-writing cycle
    and each backend's warm row.
    """
    per_backend = 1 + len(backends)
    return (
        2
        + (1 + per_backend if args.fit_count > 0 else 0)
        + (per_backend if args.prophet_count > 0 else 0)
        + (rivals if args.rival_count > 0 else 0)
        + (1 + per_backend if args.count > 0 else 0)
    )


def _run(args: argparse.Namespace) -> int:
    from forecaster.benchmarks import scaleout as bench

    backends = tuple(b.strip() for b in args.backends.split(",") if b.strip())
    unknown = sorted(set(backends) - {"joblib", "dask"})
    if unknown:
        raise BadInputError(
            f"--backends must list joblib and/or dask; got {', '.join(unknown)} in {args.backends!r}"
        )
    if args.workers < 2:
        raise BadInputError(f"--workers must be >= 2 to compare with 1 process; got {args.workers}")
    if args.batch_size < 1:
        raise BadInputError(f"--batch-size must be >= 1; got {args.batch_size}")
    before = bench.load_line()
    print(f"bench-scale {date.today().isoformat()}: {before}", file=sys.stderr)
    total = expected_rows(args, backends, len(bench.RIVALS))
    with Progress.for_args(args, "bench-scale", total, "row") as bar:

        def row_done(line: str) -> None:
            bar.write(line)
            bar.update()

        rows = bench.run(
            count=args.count,
            fit_count=args.fit_count,
            prophet_count=args.prophet_count,
            rival_count=args.rival_count,
            workers=args.workers,
            batch_size=args.batch_size,
            backends=backends,
            traces=args.traces or bench.TRACES,
            progress=row_done,
        )
    lines = [
        bench.format_table(rows),
        "",
        *(f"- {v}" for v in bench.verdicts(rows, args.count)),
        f"- before: {before}; after: {bench.load_line()}",
    ]
    text = "\n".join(lines)
    print(text)
    if args.out_file is not None:
        args.out_file.write_text(text + "\n", encoding="utf-8")
    return 0
