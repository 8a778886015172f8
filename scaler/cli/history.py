"""``tiercast history``: the run records, newest first, or one run's full plan."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from forecaster.errors import BadInputError
from forecaster.secrets import redact
from scaler.records import RunStore, history_table


def cmd_history(args: argparse.Namespace) -> int:
    path = args.records
    keep = 30
    if path is None:
        from scaler.config import ServiceConfig, load_config
        from scaler.inputs.loading import resolve_config_path, service_with_state_paths

        config_path = resolve_config_path(args)
        # No config: the records `run` writes by default, in the state directory.
        service = load_config(config_path).service if config_path else ServiceConfig()
        service = service_with_state_paths(service, args)
        path, keep = service.records_path, service.records_keep_days
    store = RunStore(path, keep_days=keep)
    if args.run:
        print(json.dumps(store.full_plan(args.run), indent=2))
        return 0
    if args.limit < 1:
        raise BadInputError(f"--limit: {args.limit} is not a positive number of runs")
    records = store.recent(limit=args.limit, job=args.job)
    if store.skipped:
        shown = ", ".join(str(seq) for seq in store.skipped[:10])
        more = "" if len(store.skipped) <= 10 else f" and {len(store.skipped) - 10} more"
        print(
            f"tiercast: warning: skipped {len(store.skipped)} corrupt run record(s) in "
            f"{str(path)!r} (rows {shown}{more})",
            file=sys.stderr,
        )
    output = "json" if args.json else args.output
    if output == "table":
        print(history_table(records))
    else:
        from scaler.cli.common import print_document

        rows = [r.to_dict() for r in records]
        for row in rows:
            row["error"] = redact(row["error"]) if row["error"] is not None else None
            row["notes"] = [redact(str(n)) for n in row["notes"]]
        print_document(rows, output)
    return 0


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "history",
        help="list recent runs (status, actions, errors) from the run records",
        description="Print the run records written by 'run' and 'serve', newest first.",
    )
    p.add_argument("--config", "-c", help="YAML config; its service.records_path is read")
    p.add_argument(
        "--records",
        help="SQLite run-record file (default: service.records_path of --config, else "
        "tiercast-records.sqlite in the state directory)",
    )
    from scaler.cli.common import add_state_flag

    add_state_flag(p)
    p.add_argument("--limit", "-n", type=int, default=20, help="runs to show (default 20)")
    p.add_argument("--job", choices=("cycle", "refit", "report"), help="only this job")
    p.add_argument(
        "-o",
        "--output",
        choices=("table", "json", "yaml"),
        default="table",
        help="table (default), or the records as json or yaml",
    )
    p.add_argument("--json", action="store_true", help="the same as -o json (kept for scripts)")
    p.add_argument("--run", help="print the full plan JSON of this run id")
    p.set_defaults(func=cmd_history)
