"""``tiercast report``: the capacity review.

``tiercast report`` runs one dry-run cycle (the same code as ``tiercast run``,
with a recording provider) and writes the capacity review under ``--out-dir``:
``report.html`` (self-contained), ``report.md`` with ``charts/*.png``,
``csv/report-*.csv``, ``report.json`` and the plan as ``plan.json``; ``-o`` picks which
formats, as ``-o`` picks the format in every command.

"""

from __future__ import annotations

import argparse
import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from forecaster.errors import BadInputError
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import parse_duration
from scaler.cli.common import DeprecatedAlias, deprecation_notice, flag_error
from scaler.cli.finance import add_lang_flag, parse_formats
from scaler.reports import reviewing
from scaler.reports.i18n import check_lang, t
from scaler.reports.writing import FORMATS
from scaler.wording import render

if TYPE_CHECKING:
    from scaler.plans import CapacityPlan

DEFAULT_REPORT_DIR = "tiercast-report"
"""Where ``tiercast report`` writes when ``--out-dir`` is not given."""


def cmd_report(args: argparse.Namespace) -> int:
    from scaler.cli.common import write_file
    from scaler.cli.plan import plan_without_acting
    from scaler.reports.capacity import build_capacity_report
    from scaler.reports.writing import write_report

    lang = check_lang(args.lang)
    formats = parse_formats(args.output, "-o/--output")
    out_dir = args.out_dir or DEFAULT_REPORT_DIR
    window = parse_duration(args.history_window)
    if args.backtest_origins < 0:
        raise BadInputError(
            f"--backtest-origins: {args.backtest_origins} is negative; expected 0 (off) or more"
        )
    period = parse_duration(args.review_period)
    if args.records and not Path(args.records).is_file():
        raise BadInputError(
            f"--records: {args.records!r} does not exist; expected a run-record file"
        )
    # Two units here (the plan, the files); the report adds its sections and backtests.
    with Progress.for_args(args, "report", total=2) as bar:
        bar.describe("forecast and plan")
        config, history, now, label, result = plan_without_acting(args)
        result.plan = with_horizon_note(result.plan, config.policy.horizon_s)
        bar.update(label="signals")
        records = args.records or config.service.records_path
        recorded = reviewing.load_records(records, now - period, now)
        # The review shows the config as planned: lead_time_s: auto resolved to seconds.
        report = build_capacity_report(
            result.config or config,
            history,
            result.plan,
            result.forecasts,
            label,
            lang,
            history_window=window,
            backtest_origins=args.backtest_origins,
            recorded=recorded,
            progress=bar,
        )
        # What the cluster ran against the plans, from the cycles' records (tiercast shadow).
        from scaler.reports.shadow import records_scorecard, review_section

        shadow = records_scorecard(records, now - period, now)
        report.sections.append(review_section(shadow, lang))
        bar.describe("writing files")
        written = write_report(report, out_dir, formats)
        write_file(str(Path(out_dir) / "plan.json"), result.plan.to_json(), "--out-dir")
        bar.update()
    for path in written:
        if path.suffix in (".html", ".md", ".json"):
            print(t(lang, "cli_report_written", path=str(path)))
    print(render(result.plan.notes[-1], lang))
    return 0


def with_horizon_note(plan: CapacityPlan, cycle_horizon_s: int) -> CapacityPlan:
    """``plan`` with the review's note on its horizon (``--horizon``, else the config's) and
    why a cycle's actions can differ from the review's (its horizon, live nodes, holds)."""
    from scaler.wording import NOTE_REVIEW_HORIZON, Reason

    note = Reason(
        NOTE_REVIEW_HORIZON,
        {"review_h": plan.horizon_s / 3600, "cycle_h": cycle_horizon_s / 3600},
    )
    return dataclasses.replace(plan, notes=[*plan.notes, note])


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``tiercast report``."""
    from scaler.cli.common import add_input_flags

    p = subparsers.add_parser(
        "report",
        help="write the capacity review: HTML (offline), Markdown, CSV and JSON",
        description="Forecast and plan (never acts), then write the capacity review: history "
        "with forecast bands, backtest accuracy against the baselines, plan against demand, "
        "actions with reasons, cost by tier per day and month, utilization and waste.",
    )
    add_input_flags(p)
    p.add_argument(
        "--horizon",
        help="planning horizon, e.g. 24h, 7d (default: the config's policy.horizon_s)",
    )
    add_lang_flag(p)
    p.add_argument(
        "-o",
        "--output",
        action=_ReportOutput,
        default=",".join(FORMATS),
        metavar="FORMATS",
        help="comma-separated formats to write, of %(default)s (default: all)",
    )
    p.add_argument(
        "--out-dir",
        metavar="DIR",
        help=f"output folder (default: {DEFAULT_REPORT_DIR})",
    )
    p.add_argument("--out", dest="out_dir", action=DeprecatedAlias, replacement="--out-dir")
    p.add_argument("--format", dest="output", action=DeprecatedAlias, replacement="-o/--output")
    p.add_argument(
        "--history-window",
        default="7d",
        help="history shown before the forecast in each chart (default: %(default)s)",
    )
    p.add_argument(
        "--backtest-origins",
        type=int,
        default=3,
        help="daily origins of the accuracy backtest; 0 turns it off (default: %(default)s)",
    )
    p.add_argument(
        "--records",
        help="run records (tiercast serve's SQLite file) for the forecast-against-actual section "
        "and the node starts of lead_time_s: auto pools; default: the config's "
        "service.records_path when it exists, else the backtest (and each auto pool's fallback)",
    )
    add_progress_flag(p)
    p.add_argument(
        "--review-period",
        default="7d",
        help="how far back the forecast-against-actual section reads run records "
        "(default: %(default)s)",
    )
    p.set_defaults(func=cmd_report)


class _ReportOutput(argparse.Action):
    """``-o FORMATS``; the former ``-o DIR`` (a path with a folder in it) is still the output
    folder, with a one-line notice, and anything else is refused naming ``--out-dir``."""

    completions = FORMATS
    """What shell completion offers after ``-o`` (one format; more are comma-separated)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        value = str(values)
        parts = [p.strip().lower() for p in value.split(",") if p.strip()]
        if parts and all(p in FORMATS for p in parts):
            namespace.output = value
        elif "/" in value or os.sep in value:
            deprecation_notice(
                "'report -o DIR'",
                f"--out-dir {value} (-o now picks the formats: {','.join(FORMATS)})",
            )
            namespace.out_dir = namespace.out_dir or value
        else:
            flag_error(
                f"argument -o/--output: {value!r} is not a format; expected a comma-separated "
                f"subset of {','.join(FORMATS)} (the output folder is --out-dir DIR)"
            )
