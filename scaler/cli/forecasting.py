"""``tiercast backtest``: how far to trust the forecasts on a user's own history.

``backtest`` runs rolling-origin cross-validation of one or more estimators on a
CSV history and prints a table (and optionally JSON): MASE, scaled pinball loss
and coverage per quantile, interval coverage, fit seconds. The fixed benchmark on
the public traces is ``tiercast lab bench-forecast`` (:mod:`scaler.cli.lab.forecast`).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pandas as pd

from forecaster.backtesting import backtest, daily_origins, parse_max_history, protocol_origins
from forecaster.errors import BadInputError
from forecaster.estimators import make, quantile_column
from forecaster.global_model import fleet_context_at
from forecaster.progress import Progress, add_progress_flag
from forecaster.series import History, infer_step, parse_duration, read_history_csv, regularize
from scaler.cli.common import parse_quantiles, select_series


def _clean(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def cmd_backtest(args: argparse.Namespace) -> int:
    history = read_history_csv(args.history)
    # The file's series are each other's fleet (as `tiercast forecast` gives them), also
    # when --series backtests one of them.
    fleet = list(history.items()) if not args.no_fleet and len(history) > 1 else []
    if args.series:
        history = {args.series: select_series(history, args.series)}
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    for method in methods:
        make(method)  # unknown names fail here, in one line, before any work
    quantiles = [q for q, _ in parse_quantiles(args.quantiles)]
    horizon = parse_duration(args.horizon)
    results: list[dict[str, Any]] = []
    header = f"{'series':<28} {'method':<22} {'MASE':>7}"
    for q in quantiles:
        header += f" {'pin ' + quantile_column(q):>10} {'cov ' + quantile_column(q):>10}"
    header += f" {'interval':>9} {'origins':>7} {'fit s':>7}"
    print(header)
    with Progress.for_args(args, "backtest", unit="fit") as bar:
        _backtest_rows(args, history, methods, quantiles, horizon, bar, results, fleet)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2), encoding="utf-8")
        print(f"backtest written to {args.json}", file=sys.stderr)
    return 0


def _backtest_rows(
    args: argparse.Namespace,
    history: History,
    methods: list[str],
    quantiles: list[float],
    horizon: pd.Timedelta,
    bar: Progress,
    results: list[dict[str, Any]],
    fleet: list[tuple[str, pd.Series]],
) -> None:
    """Backtest every method on every series; print a line each, append its result.

    ``fleet`` (name, series) is the global model's fleet, cut at every origin (so that no
    fit sees a sibling's values from after it); empty: none."""
    step_of = parse_duration(args.resample) if args.resample else None
    siblings = [regularize(raw, step_of).rename(name) for name, raw in fleet]
    context = partial(fleet_context_at, siblings, args.max_history) if siblings else None
    for name, raw in history.items():
        y = regularize(raw, step_of).rename(name)
        step = infer_step(y)
        steps = max(1, math.ceil(horizon / step))
        if args.origins:
            origins = sorted(daily_origins(y, args.origins, steps))
        else:
            origins = protocol_origins(y)
        origins = [o for o in origins if y[y.index < o].notna().sum() >= 2]
        if not origins:
            raise BadInputError(f"series {name!r}: no backtest origin with history before it")
        bar.add_total(len(origins) * len(methods))
        for method in methods:
            bar.describe(f"{name} {method}")
            bt = backtest(
                partial(make, method),
                y,
                origins,
                steps,
                quantiles,
                label=method,
                tick=bar.tick,
                max_history=args.max_history,
                context=context,
            )
            scores = bt.scores()
            line = f"{name[:28]:<28} {method[:22]:<22} {scores['mase']:>7.3f}"
            for q in quantiles:
                col = quantile_column(q)
                line += f" {scores['pinball_' + col]:>10.3f} {scores['coverage_' + col]:>10.3f}"
            line += f" {scores.get('interval_coverage', float('nan')):>9.3f}"
            line += f" {len(origins):>7d} {bt.fit_seconds:>7.2f}"
            bar.write(line, sys.stdout)
            days = bt.per_origin()
            for day in days if args.per_origin else ():
                text = f"  {day['origin'][:16]:<26} {'origin':<22} {day['mase']:>7.3f}"
                for q in quantiles:
                    text += f" {'':>10} {day['coverage_' + quantile_column(q)]:>10.3f}"
                bar.write(text + f"  bias {day['bias']:+.3f}", sys.stdout)
            results.append(
                {
                    "series": name,
                    "method": method,
                    "step_s": step.total_seconds(),
                    "horizon_steps": steps,
                    "origins": [o.isoformat() for o in origins],
                    "scores": {k: _clean(v) for k, v in scores.items()},
                    "per_origin": [{k: _clean(v) for k, v in d.items()} for d in days],
                    "notes": bt.notes[:20],
                }
            )


def register(sub: argparse._SubParsersAction) -> None:
    """Add ``tiercast backtest``."""
    _add_backtest(sub)


def _add_backtest(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "backtest",
        help="rolling-origin backtest of estimators on a CSV history; table and JSON",
        description=(
            "Refit each method at every origin on the data before it and score the next "
            "horizon: MASE and pinball loss scaled by the in-sample one-day seasonal naive "
            "MAE, coverage per quantile. Default origins: every 00:00 in the last 7 days "
            "(4 for series of 14 days or less)."
        ),
    )
    p.add_argument("--history", required=True, help="CSV history (timestamp,value or long format)")
    p.add_argument("--series", help="only this series of a long-format file")
    p.add_argument(
        "--methods",
        default="auto,seasonal_naive_1d,seasonal_naive_7d",
        help="comma-separated estimator names (default: %(default)s)",
    )
    p.add_argument("--horizon", default="24h", help="forecast horizon (default: %(default)s)")
    p.add_argument(
        "--quantiles", default="0.1,0.5,0.9", help="quantiles to score (default: %(default)s)"
    )
    p.add_argument(
        "--origins",
        type=int,
        help="instead of the protocol's origins: this many origins one day apart, ending a horizon before the end",
    )
    p.add_argument("--resample", help="resample to this step first (mean), e.g. 15m")
    p.add_argument(
        "--max-history",
        type=parse_max_history,
        help="train at every origin on only this much history before it, e.g. 15d "
        "(a metrics store's retention; default: all of it)",
    )
    p.add_argument(
        "--per-origin",
        action="store_true",
        help="also print each origin's MASE, coverage per quantile and bias (mean actual "
        "minus median over the mean actual); the JSON always has them",
    )
    p.add_argument(
        "--no-fleet",
        action="store_true",
        help="do not give the file's series to each other as the global model's fleet "
        "(by default they are, cut at every origin, as tiercast forecast gives them)",
    )
    p.add_argument("--json", help="also write the results as JSON here")
    add_progress_flag(p)
    p.set_defaults(func=cmd_backtest)
