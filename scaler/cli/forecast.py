"""``tiercast forecast``: forecast each series of a CSV one horizon ahead, with quantiles,
as CSV, an aligned table, JSON or YAML.
"""

from __future__ import annotations

import argparse
import logging
import math
import os
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from scaler.cli.common import (
    DeprecatedAlias,
    deprecation_notice,
    format_document,
    parse_quantiles,
    select_series,
    text_table,
    write_file,
)

if TYPE_CHECKING:
    import pandas as pd


FORECAST_FORMATS = ("csv", "table", "json", "yaml")
"""What ``tiercast forecast -o`` writes: the CSV of old (default), or as ``run`` does."""


def cmd_forecast(args: argparse.Namespace) -> int:
    from forecaster.artifacts import load_signing_key
    from forecaster.estimators import quantile_column
    from forecaster.forecasting import forecast_series
    from forecaster.global_model import fleet_context, fleet_of_history
    from forecaster.progress import Progress
    from forecaster.series import parse_duration, read_history_csv
    from forecaster.store import ModelStore
    from scaler.inputs.demo import demo_inputs

    if args.history is None:
        _, history, _ = demo_inputs()
    else:
        history = read_history_csv(args.history)
    # The series of the file are each other's fleet for the global model (as in a
    # cycle), also when --series forecasts one of them.
    fleet = fleet_of_history(history)
    if args.series:
        history = {args.series: select_series(history, args.series)}
    quantiles = parse_quantiles(args.quantiles)
    horizon = parse_duration(args.horizon)
    if args.output_file not in (None, "-"):
        from forecaster.files import check_output

        check_output(args.output_file, "--out-file")  # a folder: refused before forecasting
    # A store path makes repeated forecasts of the same series reuse the selected model.
    store = (
        ModelStore(args.model_store, signing_key=load_signing_key(None))
        if getattr(args, "model_store", None)
        else None
    )
    forecasts = []
    with (
        Progress.for_args(args, "forecast", len(history), "series") as bar,
        fleet_context(fleet),
    ):
        for name, y in history.items():
            bar.describe(name)
            fc = forecast_series(
                y.rename(name), horizon, [q for q, _ in quantiles], args.method, store
            )
            frame = fc.frame.rename(
                columns={quantile_column(q): f"q{text}" for q, text in quantiles}
            )[[f"q{text}" for _, text in quantiles]]
            forecasts.append((name, fc, frame))
            bar.update()
            # One short line per series (its progress); why that model: --log-level INFO.
            bar.write(f"{name}: {fc.estimator}; {len(frame)} steps of {fc.step}")
            logging.getLogger(__name__).info("%s: %s (%s)", name, fc.estimator, fc.reason)
    text = forecast_text(forecasts, args.output)
    if args.output_file in (None, "-"):
        sys.stdout.write(text)
    else:
        write_file(args.output_file, text, "--out-file")
        print(f"forecast written to {args.output_file}", file=sys.stderr)
    return 0


def forecast_text(forecasts: list[tuple[str, Any, pd.DataFrame]], output: str) -> str:
    """The forecasts (name, forecast, frame of its q-columns) as ``output`` shows them.

    ``csv``: ``timestamp[,series],q...`` (a ``series`` column when there are several);
    ``table``: the same, aligned, per series; ``json``/``yaml``: one document with each
    series' estimator, reason, step and points.
    """
    import pandas as pd

    from scaler.plans import iso

    if output in ("json", "yaml"):
        document = {
            "forecasts": [
                {
                    "series": name,
                    "estimator": fc.estimator,
                    "reason": fc.reason,
                    "step_s": int(fc.step.total_seconds()),
                    "points": [
                        {
                            "timestamp": iso(ts),
                            # Strict JSON: a non-finite value (never expected) is null.
                            **{
                                c: float(v) if math.isfinite(v) else None
                                for c, v in zip(frame.columns, row, strict=True)
                            },
                        }
                        for ts, row in zip(frame.index, frame.to_numpy(dtype=float), strict=True)
                    ],
                }
                for name, fc, frame in forecasts
            ]
        }
        return format_document(document, output)
    if output == "table":
        blocks = []
        for name, fc, frame in forecasts:
            rows = [["timestamp", *frame.columns]]
            rows += [
                [iso(ts).rstrip("Z"), *(f"{float(v):,.6g}" for v in row)]
                for ts, row in zip(frame.index, frame.to_numpy(), strict=True)
            ]
            head = f"{name}: {fc.estimator}, {len(frame)} steps of {fc.step}"
            blocks.append("\n".join([head, *text_table(rows, set(range(1, len(rows[0]))))]))
        return "\n\n".join(blocks) + "\n"
    from scaler.reports.csvjson import csv_safe

    frames = []
    for name, _, frame in forecasts:
        frame = frame.copy()
        frame.index = [iso(t).rstrip("Z") for t in frame.index]
        frame.index.name = "timestamp"
        if len(forecasts) > 1:
            # A series named like a formula is text in a spreadsheet, never run.
            frame.insert(0, "series", csv_safe(str(name)))
        frames.append(frame)
    return pd.concat(frames).to_csv(float_format="%.6g")


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "forecast",
        help="forecast a CSV history with quantiles; write timestamp,q... CSV",
        description="Forecast each series of a CSV one horizon ahead at its own step.",
    )
    p.add_argument("--history", help="CSV history; default: the demo history")
    p.add_argument("--series", help="only this series of a long-format file")
    p.add_argument(
        "--horizon", default="24h", help="how far ahead, e.g. 6h, 24h, 7d (default: %(default)s)"
    )
    p.add_argument(
        "--quantiles",
        default="0.1,0.5,0.9",
        help="comma-separated quantiles (default: %(default)s)",
    )
    p.add_argument(
        "--method", default="auto", help="estimator name or 'auto' (default: %(default)s)"
    )
    p.add_argument(
        "-o",
        "--output",
        action=_ForecastOutput,
        default="csv",
        metavar="{csv,table,json,yaml}",
        help="the format: CSV timestamp[,series],q... (default), an aligned table per "
        "series, or json or yaml with each series' estimator and points",
    )
    p.add_argument(
        "--out-file",
        "--output-file",
        dest="output_file",
        metavar="FILE",
        help="write there instead of standard output ('-' is standard output)",
    )
    p.add_argument("--out", dest="output_file", action=DeprecatedAlias, replacement="--out-file")
    p.add_argument(
        "--model-store",
        help="folder of stored models to reuse and update (e.g. models); default: none",
    )
    from forecaster.progress import add_progress_flag

    add_progress_flag(p)
    p.set_defaults(func=cmd_forecast)


class _ForecastOutput(argparse.Action):
    """``-o FORMAT``; the former ``-o FILE`` (a path ending in .csv, or with a folder) is
    still written, with a one-line notice, and anything else is refused naming ``--out-file``."""

    completions = FORECAST_FORMATS
    """What shell completion offers after ``-o`` (argparse ``choices`` would refuse a file)."""

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: str | Sequence[Any] | None,
        option_string: str | None = None,
    ) -> None:
        value = str(values)
        if value in FORECAST_FORMATS:
            namespace.output = value
        elif value.lower().endswith(".csv") or "/" in value or os.sep in value:
            deprecation_notice(
                "'forecast -o FILE'",
                f"--out-file {value} (-o now picks the format: {', '.join(FORECAST_FORMATS)})",
            )
            namespace.output = "csv"
            namespace.output_file = namespace.output_file or value
        else:
            parser.error(
                f"argument -o/--output: {value!r} is not a format; expected one of "
                f"{', '.join(FORECAST_FORMATS)} (write a file with --out-file FILE)"
            )
