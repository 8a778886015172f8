"""The finance part of ``tiercast plan``, and the report flags it shares with ``tiercast report``.

``tiercast plan`` calls :func:`prepare_finance` before planning (so a bad ``--scenario`` or
``--lang`` fails at once) and :func:`finance_dry_run` after it: the projection by tier and
month with low/expected/high bands, the scenarios side by side and the commitment advice
are printed, and with ``--out-dir`` written as ``finance.html``, ``finance.md``, CSV and JSON.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from forecaster.errors import BadInputError
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import parse_duration
from scaler.cli.common import DeprecatedAlias
from scaler.config import Config
from scaler.reports import finance
from scaler.reports.document import Report
from scaler.reports.i18n import DEFAULT_LANG, LANGS, check_lang, t
from scaler.reports.writing import FORMATS
from scaler.service.cycle import CycleResult


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
    add_lang_flag(g)
    g.add_argument(
        "--out-dir",
        metavar="DIR",
        help="folder for the finance report (finance.html, finance.md, CSV, JSON); "
        "default: print only",
    )
    g.add_argument("--out", dest="out_dir", action=DeprecatedAlias, replacement="--out-dir")
    g.add_argument(
        "--format",
        default=",".join(FORMATS),
        help="comma-separated formats to write with --out-dir (default: %(default)s)",
    )
    add_progress_flag(g)


def add_lang_flag(g: argparse._ArgumentGroup | argparse.ArgumentParser) -> None:
    g.add_argument(
        "--lang",
        default=DEFAULT_LANG,
        help=f"language of reports and explanations: {', '.join(LANGS)} (default: %(default)s)",
    )


def parse_formats(text: str, flag: str = "--format") -> tuple[str, ...]:
    """The report formats of ``text`` (``html,md,csv,json``), or a one-line error naming ``flag``."""
    parts = tuple(p.strip().lower() for p in str(text).split(",") if p.strip())
    bad = [p for p in parts if p not in FORMATS]
    if bad or not parts:
        raise BadInputError(
            f"{flag}: {text!r} is not understood; expected a comma-separated subset of "
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
        out=getattr(args, "out_dir", None),
        formats=parse_formats(getattr(args, "format", ",".join(FORMATS))),
    )


def finance_dry_run(
    options: FinanceOptions,
    config: Config,
    result: CycleResult,
    now: pd.Timestamp,
    label: str,
    progress: Progress | None = None,
) -> finance.FinanceProjection:
    """Project, print the summary in the chosen language, and write the files under ``--out-dir``.

    ``progress`` counts the projection's scenarios, the report and the files written.
    """
    from scaler.reports.finance_report import build_finance_report
    from scaler.reports.writing import write_report

    bar = progress or Progress(False)
    bar.add_total(2 if options.out else 1)
    lang = options.lang
    horizon = pd.Timedelta(seconds=config.policy.horizon_s)
    projection = finance.project(config, result.forecasts, now, horizon, options.scenarios, bar)
    bar.describe("finance report")
    report = build_finance_report(
        projection,
        config,
        label,
        lang,
        charts=options.out is not None,
        plan=result.plan,
        forecasts=result.forecasts,
    )
    bar.update()
    with bar.paused():
        _print_finance(report, projection, config.finance.currency, lang)
    if options.out:
        bar.describe("writing files")
        write_report(report, options.out, options.formats)
        bar.update()
        with bar.paused():
            print(t(lang, "cli_written", path=str(Path(options.out) / "finance.html")))
    return projection


def _print_finance(
    report: Report, projection: finance.FinanceProjection, currency: str, lang: str
) -> None:
    """The finance summary on stdout: monthly tables, scenarios, commitment advice, notes
    (money in ``currency``, the config's ``finance.currency``)."""
    from scaler.cli.common import text_table
    from scaler.reports.document import format_cell

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
            currency=currency or t(lang, "currency_unnamed"),
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
