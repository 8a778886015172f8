"""``tiercast lab bench-commit``: what each commitment costs, the rules that pick them, and
the command's refusals."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.benchmarks.accuracy import BenchSeries
from scaler.cli import main
from scaler.cli.lab import commit
from scaler.replay.protocol import ReplaySetup

SETUP = ReplaySetup()


def test_a_flat_load_above_the_spot_market_is_committed_and_a_load_under_it_is_not() -> None:
    fleet = commit.fleet_for(SETUP, 0)
    # 10 nodes' worth all the time: spot ($1.40) takes its 5 nodes, reserved ($2.40) is
    # cheaper than on-demand ($4.00) for the rest, so the rest is committed.
    full = commit.costs_of(fleet, np.full(24 * 14, 80.0))
    assert commit.cheapest(full) >= 5
    # 2 nodes' worth: spot holds it all, cheaper than any commitment.
    small = commit.costs_of(fleet, np.full(24 * 14, 16.0))
    assert commit.cheapest(small) == 0
    assert all(small[0] < cost for n, cost in small.items() if n > 0)


def test_the_decision_rules_read_every_band() -> None:
    fleet = commit.fleet_for(SETUP, 0)
    hours = 24 * 28
    # The median stays at 2 nodes; the high band runs at 10 nodes, the low at 0.
    demand = {
        "low": np.zeros(hours),
        "expected": np.full(hours, 16.0),
        "high": np.full(hours, 80.0),
    }
    options = commit.commitment_options(fleet, fleet.pools[0], demand)
    got = commit.decide(options)
    assert got["expected"] == 0
    # Committing nothing risks the high band's on-demand hours, committing them all the low
    # band's idle ones: minimax regret takes a middle.
    assert 0 < got["minimax"] < commit.cheapest(commit.costs_of(fleet, demand["high"]))
    # Weighted 0.3/0.4/0.3, a node committed saves $1.60/GPU-h of on-demand in the high
    # band only, and costs $1.00 over spot in the expected band and $2.40 idle in the low:
    # nothing is committed.
    weighted = {
        o.nodes: sum(w * o.cost[b] for b, w in commit.SWANSON.items())
        for o in options
        if o.term == ""
    }
    assert got["swanson"] == commit.cheapest(weighted) == 0


def _series(days: int = 42) -> BenchSeries:
    idx = pd.date_range("2024-01-01", periods=days * 96, freq="15min")
    hour = idx.hour.to_numpy() + idx.minute.to_numpy() / 60
    rng = np.random.default_rng(3)
    values = 50 + 30 * np.sin(2 * np.pi * hour / 24) + rng.normal(0, 3, len(idx))
    return BenchSeries("synthetic/load.csv", "synthetic", pd.Series(values, index=idx))


@pytest.mark.slow
def test_hindsight_is_the_cheapest_of_every_commitment(tmp_path: Path) -> None:
    s = _series()
    origin = s.y.index[-1] - commit.HORIZON
    got = commit.score_origin(s, origin, SETUP, pd.Timedelta(days=60), tmp_path)
    assert got is not None
    assert set(got.nodes) == {"rule", "advice", "expected", "minimax", "swanson", "hindsight"}
    assert all(got.cost["hindsight"] <= c + 1e-6 for c in got.cost.values())
    # A steady daily cycle: the history's last 14 days and the weeks after it agree.
    assert got.cost["rule"] == pytest.approx(got.cost["hindsight"], rel=0.01)
    table = commit.table([got], choose=["synthetic"])
    assert "mean, choose" in table and "mean, confirm" not in table


def test_it_skips_without_the_traces_and_refuses_a_bad_history(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "bench-commit", "--traces", str(tmp_path / "absent")]) == 0
    assert "skipped: no traces folder" in capsys.readouterr().err
    assert main(["lab", "bench-commit", "--traces", str(tmp_path), "--max-history", "soon"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--max-history 'soon'" in err[0]
