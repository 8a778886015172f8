"""The figures of docs/benchmarks.md, "A leading signal": why the Helios pair's leading
signal does not pay at 10 minutes, from its training period, and the near-term rule alone
chosen on the training period and scored on the test week; with ``--combined``, the rule
not built (the leading share on top of the forecast's growth quantile) on the training
period, against growth alone and against the same rule with the leading measure moved in
time (about a minute: it walks the forecaster forward over the training period's last week).

    python docs/leading_signal_check.py ../shared/data/traces/helios_earth [--combined]
"""

from __future__ import annotations

import math
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from scaler.planning.growth import LEVELS, growth_factors, walk_forward
from scaler.planning.leading import SHARES, Arrival, arrivals, arrived_share, realised_rise
from scaler.planning.margins import MARGIN_GRID, replay_rule

DAY = 288
"""5-minute steps a day."""
RULE = {"granule": 8.0, "replica": 1.0}
"""The replay's 8-GPU nodes, one GPU a replica."""


def _read(folder: Path, what: str) -> np.ndarray:
    path = folder / f"helios_earth_16vc_gpus_{what}_5min.csv"
    return pd.read_csv(path, parse_dates=[0], index_col=0)["value"].to_numpy(dtype=float)


def why(y: np.ndarray, x: np.ndarray, scored: int) -> None:
    """What waits, how much of it arrives within the lead time, and whether jumps are announced."""
    excess, rise = Arrival("excess").values(y, x), Arrival("rise", 1).values(y, x)
    print(
        f"queued at {100 * (excess[scored:] > 0).mean():.0f}% of the scored steps, "
        f"median {np.median(excess[scored:]):.0f} GPUs"
    )
    for lead in (2, 4, 8):
        r = realised_rise(y, lead)
        print(
            f"  within {5 * lead} min: {100 * (arrived_share(r, excess, scored) or 0):.0f}% of "
            f"the excess, {100 * (arrived_share(r, rise, scored) or 0):.0f}% of the 5-minute rise"
        )
    dy = np.diff(y)
    jumps = np.where(dy[scored:] >= 8)[0] + scored
    same = np.mean([x[j + 1] - x[j] >= 8 for j in jumps])
    print(
        f"{len(jumps)} jumps of 8+ GPUs; the leading series rose in the same step at {100 * same:.0f}%"
    )


def rule_check(y_all: np.ndarray, x_all: np.ndarray, test: int, scored: int) -> None:
    """The near-term rule alone: "no change" and the best leading candidate chosen on the
    training period's scored span, then scored on the test week."""
    y, x = y_all[:test], x_all[:test]
    for lead, hold in ((2, 7), (4, 9), (8, 13)):
        ru, _ = replay_rule(y, lead, hold, np.array([0.2]), scored_from=scored, **RULE)
        target = min(0.005, float(ru[0]))
        fu, fc = replay_rule(y, lead, hold, MARGIN_GRID, scored_from=scored, **RULE)
        kf = int(np.argmax(fu <= target + 1e-12))
        best = None
        for a in arrivals(pd.Timedelta(minutes=5)):
            for share in SHARES:
                boost = share * a.values(y, x)
                u, c = replay_rule(
                    y, lead, hold, MARGIN_GRID, scored_from=scored, boost=boost, **RULE
                )
                ok = np.where(u <= target + 1e-12)[0]
                if ok.size and (best is None or c[ok[0]] < best[0]):
                    best = (float(c[ok[0]]), a, share, int(ok[0]))
        assert best is not None
        cost, a, share, k = best
        tu, tc = replay_rule(y_all, lead, hold, MARGIN_GRID[[kf]], scored_from=test, **RULE)
        boost = share * a.values(y_all, x_all)
        lu, lc = replay_rule(
            y_all, lead, hold, MARGIN_GRID[[k]], scored_from=test, boost=boost, **RULE
        )
        print(
            f"lead {5 * lead} min, training: no change {fc[kf]:.3f}x, best leading "
            f"{a.kind} {a.window_steps} x {share:g} margin {MARGIN_GRID[k]:g} {cost:.3f}x "
            f"({100 * (cost / fc[kf] - 1):+.1f}%) | test: no change {tc[0]:.3f}x "
            f"{100 * tu[0]:.3f}% unserved, leading {lc[0]:.3f}x {100 * lu[0]:.3f}% unserved"
        )


def _least_cost(
    y: np.ndarray, lead: int, hold: int, scored: int, target: float, factor: Any, boost: Any
) -> float:
    """The least cost over MARGIN_GRID meeting ``target`` (inf when none does)."""
    u, c = replay_rule(y, lead, hold, MARGIN_GRID, factor, scored_from=scored, boost=boost, **RULE)
    ok = c[u <= target + 1e-12]
    return float(ok.min()) if ok.size else math.inf


def combined_check(folder: Path) -> None:
    """Growth quantile x newest value + share x leading measure, on the training period's
    scored span (the growth backtest's last 7 days, hourly forecasts of ``auto`` from 28 days),
    against the growth rule alone, the leading rule alone, and the combined rule with the
    leading measure moved by 1/4, 2/4 and 3/4 of the history (the placebo test the product's
    leading rule must pass)."""
    index = pd.read_csv(folder / "helios_earth_16vc_gpus_running_5min.csv", parse_dates=[0])
    grid = pd.DatetimeIndex(index.iloc[:, 0])
    y, x = _read(folder, "running"), _read(folder, "demanded")
    test = len(y) - 7 * DAY
    y, x, grid = y[:test], x[:test], grid[:test]
    backtest = walk_forward(
        "auto", pd.Timedelta(days=7), pd.Timedelta(hours=1), pd.Timedelta(days=28)
    )
    for lead, hold in ((4, 9), (8, 13)):
        bt = backtest(y, grid, lead)
        assert bt is not None
        scored = int(bt.positions.min())
        ru, _ = replay_rule(y, lead, hold, np.array([0.2]), scored_from=scored, **RULE)
        target = min(0.005, float(ru[0]))
        factors = []
        for level in LEVELS:
            f = np.ones(len(y))
            f[bt.positions] = growth_factors(bt, bt.calibrate(level))
            factors.append(f)
        best = dict.fromkeys(("growth", "leading", "combined", "placebo"), math.inf)
        for f in factors:
            best["growth"] = min(
                best["growth"], _least_cost(y, lead, hold, scored, target, f, None)
            )
        for a in arrivals(pd.Timedelta(minutes=5)):
            measure = a.values(y, x)
            moved = [np.roll(measure, k * len(y) // 4) for k in (1, 2, 3)]
            for share in SHARES:
                cost = _least_cost(y, lead, hold, scored, target, None, share * measure)
                best["leading"] = min(best["leading"], cost)
                for f in factors:
                    for key, boosts in (("combined", [measure]), ("placebo", moved)):
                        for b in boosts:
                            cost = _least_cost(y, lead, hold, scored, target, f, share * b)
                            best[key] = min(best[key], cost)
        print(
            f"lead {5 * lead} min, training period: growth {best['growth']:.4f}x, leading "
            f"{best['leading']:.4f}x, growth + leading {best['combined']:.4f}x, the same with the "
            f"leading measure moved in time {best['placebo']:.4f}x"
        )


def main(folder: str, combined: bool = False) -> None:
    if combined:
        combined_check(Path(folder))
        return
    y, x = _read(Path(folder), "running"), _read(Path(folder), "demanded")
    test = len(y) - 7 * DAY
    scored = test - 7 * DAY
    why(y[:test], x[:test], scored)
    rule_check(y, x, test, scored)


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--combined"]
    main(args[0] if args else "../shared/data/traces/helios_earth", "--combined" in sys.argv)
