"""``tiercast backfill``: load CSV traces into a Prometheus TSDB as a named metric."""

from __future__ import annotations

import argparse
import sys

import pandas as pd

from forecaster.errors import BadInputError
from forecaster.progress import add_progress_flag
from scaler.inputs.backfilling import (
    LARGEST_AUTO_BLOCK_H,
    MAX_SERIES,
    TARGET_BLOCKS,
    check_metric_name,
    parse_labels,
    series_from_files,
    write_blocks,
)


def cmd_backfill(args: argparse.Namespace) -> int:
    from forecaster.progress import Progress

    metric = check_metric_name(args.metric)
    labels = parse_labels(args.label or [])
    if args.max_series < 1:
        raise BadInputError(f"--max-series: {args.max_series} must be at least 1")
    with Progress.for_args(args, "backfill", len(args.files) + 2, "step") as bar:
        bar.describe(f"reading {len(args.files)} file(s)")
        series = series_from_files(
            args.files, labels, args.series_label, args.max_series, tick=bar.tick
        )

        def stage(text: str) -> None:
            bar.update(label=text)

        result = write_blocks(
            metric,
            series,
            args.tsdb,
            promtool=args.promtool,
            max_block_duration=args.block_duration,
            max_series=args.max_series,
            stage=stage,
        )
    first = min(float(s.timestamps_s[0]) for s in result.series if len(s.timestamps_s))
    last = max(float(s.timestamps_s[-1]) for s in result.series if len(s.timestamps_s))
    span = f"{pd.Timestamp(first, unit='s'):%Y-%m-%dT%H:%M:%S}Z to {pd.Timestamp(last, unit='s'):%Y-%m-%dT%H:%M:%S}Z"
    print(
        f"backfilled {result.samples} samples in {len(result.series)} series of {metric} "
        f"({span}) into {result.tsdb}: {result.blocks} new block(s)"
    )
    for s in result.series:
        labels_text = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
        print(f"  {metric}{{{labels_text}}}: {len(s.values)} samples")
    for warning in result.warnings:
        print(f"tiercast: warning: {warning}", file=sys.stderr)
    print(
        f"serve it with: prometheus --storage.tsdb.path={result.tsdb} "
        "--storage.tsdb.retention.time=100y (blocks older than the retention are deleted at start-up)"
    )
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``tiercast backfill`` to the CLI."""
    p = subparsers.add_parser(
        "backfill",
        help="load CSV traces into a Prometheus TSDB directory as a named metric (via promtool)",
        description=(
            "Write CSV traces (timestamp,value or timestamp,series,value) into a Prometheus TSDB "
            "directory as METRIC{labels} through 'promtool tsdb create-blocks-from openmetrics'. "
            "An empty value is a gap; NaN and +/-Inf are kept; duplicate timestamps keep the last row. "
            f"At most --max-series series (default {MAX_SERIES}) in one run; a promtool that "
            "runs over 600 s is stopped and the blocks it began are removed."
        ),
    )
    p.add_argument("files", nargs="+", metavar="CSV", help="trace file(s)")
    p.add_argument("--tsdb", required=True, help="TSDB directory (Prometheus --storage.tsdb.path)")
    p.add_argument("--metric", required=True, help="metric name, e.g. vllm:num_requests_running")
    p.add_argument(
        "--label",
        action="append",
        metavar="NAME=VALUE",
        help="label on every series (repeatable), e.g. --label model=chat",
    )
    p.add_argument(
        "--series-label",
        default="series",
        help="label that tells several series apart: the file stem or the 'series' column "
        "(default: %(default)s; only added when there is more than one series)",
    )
    p.add_argument(
        "--block-duration",
        help="largest block promtool writes (e.g. 24h), when the installed promtool supports "
        "it (default: the smallest of promtool's block ranges, 2h times a power of 3, that "
        f"covers the data in at most {TARGET_BLOCKS} blocks, up to {LARGEST_AUTO_BLOCK_H}h)",
    )
    p.add_argument(
        "--max-series",
        type=int,
        default=MAX_SERIES,
        help="refuse inputs of more series than this (default: %(default)s)",
    )
    p.add_argument("--promtool", help="path of promtool (default: from PATH)")
    add_progress_flag(p)
    p.set_defaults(func=cmd_backfill)
