"""Command line for reports: ``tiercast report`` and the finance part of ``tiercast plan``.

``tiercast report`` runs one dry-run cycle (the same code as ``tiercast run``,
with a recording provider) and writes the capacity review under ``--out``:
``report.html`` (self-contained), ``report.md`` with ``charts/*.png``,
``csv/report-*.csv``, ``report.json`` and the plan as ``plan.json``.

``tiercast plan`` calls :func:`prepare_finance` before planning (so a bad
``--scenario`` or ``--lang`` fails at once) and :func:`finance_dry_run` after
it: the projection by tier and month with low/expected/high bands, the
scenarios side by side and the commitment advice are printed, and with
``--out`` written as ``finance.html``, ``finance.md``, CSV and JSON.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.errors import BadInputError
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import parse_duration
from scaler import finance, reviewing
from scaler.config import Config
from scaler.cycle import CycleResult
from scaler.i18n import DEFAULT_LANG, LANGS, check_lang, t
from scaler.reporting import FORMATS, Report


@dataclass(frozen=True)
class FinanceOptions:
    scenarios: tuple[finance.Scenario, ...]
    lang: str
    out: str | None
    formats: tuple[str, ...]


def add_finance_flags(p: argparse.ArgumentParser) -> None:
    """The finance dry-run options of ``tiercast plan``."""
    g = p.add_argument_group("finance dry-run (see README, 'Reports and the finance dry-run')")
    g.add_argument(
        "--scenario",
        action="append",
        default=[],
        metavar="[NAME:]KEY=VALUE[,...]",
        help="a what-if compared side by side with the baseline; repeat for more. Keys: "
        "growth=20%% (by the end of the horizon) or growth=5%%/month, "
        "workload=MODEL:GPUS[@YYYY-MM-DD], on-demand-price/spot-price/reserved-price=+10%% "
        "or an absolute price per GPU-hour, spot-interruption=0.1 (per hour)",
    )
    _add_lang_flag(g)
    g.add_argument(
        "--out",
        help="folder for the finance report (finance.html, finance.md, CSV, JSON); "
        "default: print only",
    )
    g.add_argument(
        "--format",
        default=",".join(FORMATS),
        help="comma-separated formats to write with --out (default: %(default)s)",
    )
    add_progress_flag(g)


def parse_current_nodes(specs: Sequence[str], config: Config) -> dict[str, int]:
    """``--current-nodes POOL=N`` (repeatable) -> pool -> nodes, checked against the config."""
    out: dict[str, int] = {}
    names = [p.name for p in config.pools]
    for spec in specs:
        pool, eq, value = str(spec).partition("=")
        pool = pool.strip()
        if not eq or pool not in names:
            raise BadInputError(
                f"--current-nodes: {spec!r} does not name a pool; expected POOL=N with POOL one of "
                f"{', '.join(names)}"
            )
        try:
            n = int(value.strip())
        except ValueError:
            n = -1
        if n < 0:
            raise BadInputError(
                f"--current-nodes: {spec!r} has {value.strip()!r} nodes; expected a whole number "
                "0 or more"
            )
        out[pool] = n
    return out


def apply_fleet_flags(config: Config, args: argparse.Namespace) -> Config:
    """Today's fleet from ``--current-nodes``: a review from a history file starts from what runs."""
    nodes = parse_current_nodes(getattr(args, "current_nodes", None) or [], config)
    if not nodes:
        return config
    pools = tuple(
        p.model_copy(update={"current_nodes": nodes[p.name]}) if p.name in nodes else p
        for p in config.pools
    )
    return config.model_copy(update={"pools": pools})


def _add_lang_flag(g: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    g.add_argument(
        "--lang",
        default=DEFAULT_LANG,
        help=f"language of reports and explanations: {', '.join(LANGS)} (default: %(default)s)",
    )


def _parse_formats(text: str) -> tuple[str, ...]:
    parts = tuple(p.strip().lower() for p in str(text).split(",") if p.strip())
    bad = [p for p in parts if p not in FORMATS]
    if bad or not parts:
        raise BadInputError(
            f"--format: {text!r} is not understood; expected a comma-separated subset of "
            f"{','.join(FORMATS)}"
        )
    return parts


def prepare_finance(args: argparse.Namespace) -> FinanceOptions:
    """Validate the finance flags before any forecasting work is done."""
    lang = check_lang(getattr(args, "lang", DEFAULT_LANG))
    scenarios = tuple(finance.parse_scenario(s) for s in getattr(args, "scenario", []) or [])
    if getattr(args, "horizon", None):
        finance.check_horizon(parse_duration(args.horizon))
    return FinanceOptions(
        scenarios=scenarios,
        lang=lang,
        out=getattr(args, "out", None),
        formats=_parse_formats(getattr(args, "format", ",".join(FORMATS))),
    )


def finance_dry_run(
    options: FinanceOptions,
    config: Config,
    result: CycleResult,
    now: pd.Timestamp,
    label: str,
    progress: Progress | None = None,
) -> finance.FinanceProjection:
    """Project, print the summary in the chosen language, and write the files under ``--out``.

    ``progress`` counts the projection's scenarios, the report and the files written.
    """
    from scaler.reporting import build_finance_report, write_report

    bar = progress or Progress(False)
    bar.add_total(2 if options.out else 1)
    lang = options.lang
    horizon = pd.Timedelta(seconds=config.policy.horizon_s)
    projection = finance.project(config, result.forecasts, now, horizon, options.scenarios, bar)
    bar.describe("finance report")
    report = build_finance_report(projection, config, label, lang, charts=options.out is not None)
    bar.update()
    with bar.paused():
        _print_finance(report, projection, config, lang)
    if options.out:
        bar.describe("writing files")
        write_report(report, options.out, options.formats)
        bar.update()
        with bar.paused():
            print(t(lang, "cli_written", path=str(Path(options.out) / "finance.html")))
    return projection


def _print_finance(
    report: Report, projection: finance.FinanceProjection, config: Config, lang: str
) -> None:
    """The finance summary on stdout: monthly tables, scenarios, commitment advice, notes."""
    from scaler.cli import text_table
    from scaler.reporting import format_cell

    tables = {tb.key: tb for s in report.sections for tb in s.tables}
    print()
    print(
        t(
            lang,
            "cli_finance_header",
            start=projection.start.strftime("%Y-%m-%d %H:%M"),
            end=projection.end.strftime("%Y-%m-%d %H:%M"),
            low=f"q{projection.bands.low:g}",
            high=f"q{projection.bands.high:g}",
            currency=config.finance.currency or t(lang, "currency_unnamed"),
        )
    )
    for key, title in (
        ("monthly_by_tier", "cli_monthly"),
        ("monthly_by_model", "cli_monthly_model"),
        ("monthly_by_pool", "cli_monthly_pool"),
        ("scenarios", "cli_scenarios"),
    ):
        tb = tables[key]
        print(t(lang, title))
        cols = [c for c in tb.columns if c.key not in ("hours", "definition")]
        rows = [[c.label for c in cols]]
        rows += [[format_cell(r.get(c.key), c, lang) for c in cols] for r in tb.rows]
        right = {i for i, c in enumerate(cols) if c.digits is not None}
        print("\n".join(text_table(rows, right)))
    print(t(lang, "cli_commitments"))
    for s in report.sections:
        if s.key == "commitments":
            for p in s.paragraphs[1:]:
                print(f"  {p}")
        if s.key == "notes":
            for p in s.paragraphs:
                print(f"  {t(lang, 'cli_note')}: {p}")
    sys.stdout.flush()


def cmd_report(args: argparse.Namespace) -> int:
    from scaler.cli import _write, plan_without_acting
    from scaler.reporting import build_capacity_report, write_report

    lang = check_lang(args.lang)
    formats = _parse_formats(args.format)
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
        bar.update(label="signals")
        records = args.records or config.service.records_path
        recorded = reviewing.load_records(records, now - period, now)
        report = build_capacity_report(
            config,
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
        bar.describe("writing files")
        written = write_report(report, args.out, formats)
        _write(str(Path(args.out) / "plan.json"), result.plan.to_json())
        bar.update()
    for path in written:
        if path.suffix in (".html", ".md", ".json"):
            print(t(lang, "cli_report_written", path=str(path)))
    return 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``tiercast report``."""
    from scaler.cli import _add_input_flags

    p = subparsers.add_parser(
        "report",
        help="write the capacity review: HTML (offline), Markdown, CSV and JSON",
        description="Forecast and plan (never acts), then write the capacity review: history "
        "with forecast bands, backtest accuracy against the baselines, plan against demand, "
        "actions with reasons, cost by tier per day and month, utilization and waste.",
    )
    _add_input_flags(p)
    p.add_argument(
        "--horizon",
        help="planning horizon, e.g. 24h, 7d (default: the config's policy.horizon_s)",
    )
    _add_lang_flag(p)
    p.add_argument(
        "--out",
        "-o",
        default="tiercast-report",
        help="output folder (default: %(default)s)",
    )
    p.add_argument(
        "--format",
        default=",".join(FORMATS),
        help="comma-separated formats (default: %(default)s)",
    )
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
        help="run records (tiercast serve's SQLite file) for the forecast-against-actual section; "
        "default: the config's service.records_path when it exists, else the backtest",
    )
    add_progress_flag(p)
    p.add_argument(
        "--review-period",
        default="7d",
        help="how far back the forecast-against-actual section reads run records "
        "(default: %(default)s)",
    )
    p.set_defaults(func=cmd_report)
