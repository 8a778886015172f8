"""``tiercast simulate --pooled``: a fleet of workloads replayed whole, in dedicated shared
sets and pooled (scaler.replay.pooled, docs/replay.md#pooled-fleets)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from forecaster.errors import BadInputError
from scaler.cli import main
from scaler.replay.pooled import PooledSetup, pooled_replay

TRACES = Path(__file__).resolve().parents[2] / "shared" / "data" / "traces" / "helios_earth"


def _fleet(n: int = 3, days: int = 9, seed: int = 0) -> dict[str, pd.Series]:
    idx = pd.date_range("2026-01-01", periods=days * 288, freq="5min")
    rng = np.random.default_rng(seed)
    day = np.sin(np.arange(len(idx)) * 2 * np.pi / 288)
    return {
        f"w{i}": pd.Series(np.maximum(0, 6 + 3 * day + rng.normal(0, 1, len(idx))), idx)
        for i in range(n)
    }


@pytest.mark.slow
def test_pooling_never_provisions_more_than_dedicated_sets_nor_those_more_than_whole() -> None:
    result = pooled_replay(_fleet(), PooledSetup(mode="mps", memory_gb=16, test_days=2))
    s = result.scores
    assert result.replicas_per_gpu == 5
    assert s["pooled"].gpu_hours <= s["dedicated"].gpu_hours <= s["whole"].gpu_hours
    hours, money = result.saving()
    assert hours >= 0 and money == pytest.approx(hours * 4.0, abs=0.05)
    for score in s.values():
        assert 0.0 <= score.unserved_share < 0.05


def test_a_single_series_is_refused_with_one_line() -> None:
    with pytest.raises(BadInputError, match="two or more series"):
        pooled_replay(dict(list(_fleet().items())[:1]), PooledSetup())


@pytest.mark.slow
def test_the_command_prints_the_three_arrangements_and_the_saving(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [
        pd.DataFrame({"timestamp": y.index, "series": name, "value": y.to_numpy()})
        for name, y in _fleet(days=8).items()
    ]
    pd.concat(rows).to_csv(workdir / "fleet.csv", index=False)
    assert main(["simulate", "--history", "fleet.csv", "--pooled", "time-slicing"]) == 0
    out = capsys.readouterr().out
    assert "tiercast simulate --pooled time-slicing | fleet.csv | 3 series" in out
    for arrangement in ("whole", "dedicated", "pooled"):
        assert f"\n{arrangement} " in out
    assert "pooling 3 workloads (w0, w1, w2) by time-slicing, 5 replicas per GPU: saves" in out


@pytest.mark.skipif(not TRACES.is_dir(), reason="the dev traces (../shared/data/traces) are absent")
@pytest.mark.slow
def test_three_helios_tenants_pool_for_fewer_gpus() -> None:
    history = {
        vc: pd.read_csv(
            TRACES / f"helios_earth_{vc}_gpus_running_5min.csv",
            index_col="timestamp",
            parse_dates=True,
        )["value"].iloc[-9 * 288 :]
        for vc in ("vc6YE", "vc8Sj", "vcLJZ")
    }
    result = pooled_replay(history, PooledSetup(mode="mps", memory_gb=16, test_days=2))
    assert result.scores["pooled"].gpu_hours < result.scores["dedicated"].gpu_hours


@pytest.mark.slow
def test_several_files_each_of_one_series_are_one_pooled_fleet(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, y in _fleet(days=8).items():
        pd.DataFrame({"timestamp": y.index, "value": y.to_numpy()}).to_csv(
            workdir / f"{name}.csv", index=False
        )
    argv = ["simulate", "--history", "w0.csv,w1.csv, w2.csv", "--pooled", "mps"]
    assert main(argv) == 0
    assert "pooling 3 workloads (w0, w1, w2) by mps" in capsys.readouterr().out
    twice = ["simulate", "--history", "w0.csv,w0.csv", "--pooled", "mps"]
    assert main(twice) == 2
    err = capsys.readouterr().err.strip()
    assert "series 'w0' is given twice" in err and len(err.splitlines()) == 1
