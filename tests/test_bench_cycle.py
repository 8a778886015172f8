"""``tiercast lab bench-cycle``: the shares it prints are of the sampled cycle, and it
measures a real cold demo cycle."""

from __future__ import annotations

from pathlib import Path

import pytest

from scaler.cli import main
from scaler.cli.lab import cycle


def _counts(**kw: float) -> dict[str, float]:
    base = {"samples": 100.0, "cycle": 80.0, "forecasting": 60.0, "margins": 40.0}
    base.update(margins_forecasting=30.0, forecast=64.0, plan_tiers=16.0, wall_s=2.0)
    base.update(cpu_s=3.0)
    base.update(kw)
    return base


def test_shares_are_of_the_cycle_and_split_forecasting_by_where_it_was_called() -> None:
    got = cycle.shares(_counts())
    assert got["cycle"] == pytest.approx(0.8)
    assert got["forecasting"] == pytest.approx(0.75)
    assert got["margins_forecasting"] == pytest.approx(0.375)
    assert got["other_forecasting"] == pytest.approx(0.375)
    assert got["forecast"] + got["plan_tiers"] == pytest.approx(1.0)
    assert got["act"] == 0.0


def test_table_gives_cpu_as_a_ratio_to_the_first_tree_and_dashes_for_missing_steps() -> None:
    rows = []
    for label, cpu, steps in (("new", 3.0, True), ("old", 6.0, False)):
        row: dict[str, object] = {"tree": label, "wall_s": 2.0, "cpu_s": cpu, "has_steps": steps}
        row.update(cycle.shares(_counts(cpu_s=cpu)))
        rows.append(row)
    lines = cycle.table(rows).splitlines()
    assert len(lines) == 4
    new, old = (ln.split(" | ") for ln in lines[2:])
    assert new[3] == "1.00" and old[3] == "2.00"
    assert new[4:6] == ["80%", "75%"]
    assert "-" in old and "-" not in new


def test_a_tree_that_is_not_a_checkout_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["lab", "bench-cycle", "--tree", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "not a checkout of tiercast" in err and err.count("\n") == 1


@pytest.mark.slow
def test_probe_samples_a_real_cold_demo_cycle() -> None:
    counts = cycle.probe(Path(cycle.__file__).resolve().parents[3])
    got = cycle.shares(counts)
    assert counts["samples"] > 100 and counts["cpu_s"] > 1.0
    assert 0.5 < got["cycle"] <= 1.0
    assert sum(got[s] for s in cycle.STEPS) == pytest.approx(1.0)
    # The demo forecasts every signal cold: most of its cycle is in the forecaster.
    assert got["forecasting"] > 0.3
    assert got["margins_forecasting"] <= got["margins"]
