"""Before and after on the forecasting benchmark (forecaster/benchmarks/compare.py): the
halves' means, and a paired bootstrap whose interval is of the change itself."""

from __future__ import annotations

import json
import math
from dataclasses import asdict
from pathlib import Path

import pytest

from forecaster.benchmarks.accuracy import BenchRow
from forecaster.benchmarks.compare import compare, load_rows, main
from forecaster.errors import BadInputError
from tests.bench_rows import bench_rows

DATES = [f"2000-01-{d:02d}" for d in range(1, 8)]


def _rows(group: str, series: str, mine: list[float], naive: list[float]) -> list[BenchRow]:
    methods = {"tiercast auto": mine, "seasonal_naive_1d": naive}
    return bench_rows(series, methods, group, DATES[: len(mine)])


HARD = [50.0, 50.0, 50.0, 50.0, 50.0, 50.0, 200.0]
"""One hard day: it moves either file's level a lot, the paired change hardly at all."""


def _files() -> tuple[list[BenchRow], list[BenchRow]]:
    naive = [100.0] * 6 + [400.0]
    before = _rows("g1", "a", HARD, naive) + _rows("g2", "b", [80.0] * 7, [100.0] * 7)
    # g1: every day 10% better; g2: unchanged.
    after = _rows("g1", "a", [e * 0.9 for e in HARD], naive) + _rows(
        "g2", "b", [80.0] * 7, [100.0] * 7
    )
    return before, after


def test_the_halves_and_the_paired_interval_of_each_change() -> None:
    before, after = _files()
    changes = {c.name: c for c in compare(before, after, choose=["g1"], draws=500)}
    g1 = changes["g1"]
    assert g1.before == pytest.approx(500 / 1000) and g1.after == pytest.approx(0.45)
    # Paired: every draw has g1 10% lower, whatever days it picks, so the interval is
    # tight around the change although the level of either file moves with the hard day.
    assert g1.change == pytest.approx(-0.05)
    assert g1.low < 0 and g1.high < 0 and g1.high - g1.low < 0.02
    assert changes["g2"].change == 0 and changes["g2"].low == changes["g2"].high == 0
    assert changes["choosing half"].change == pytest.approx(-0.05)
    assert changes["confirming half"].change == 0
    assert changes["all groups"].after == pytest.approx((0.45 + 0.8) / 2)


def test_files_of_other_test_days_are_refused_in_one_line() -> None:
    before, after = _files()
    for r in after:
        if r.series == "a":
            r.day_dates = [f"2001-01-{d:02d}" for d in range(1, 8)]
    with pytest.raises(BadInputError, match="group 'g1': the two files hold other series"):
        compare(before, after)


def test_the_command_reads_two_json_files_and_names_a_bad_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before, after = _files()
    paths = []
    for name, rows in (("before", before), ("after", after)):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"accuracy": [asdict(r) for r in rows]}), encoding="utf-8")
        paths.append(str(path))
    assert len(load_rows(paths[0])) == 4
    assert main([*paths, "--choose", "g1", "--draws", "200"]) == 0
    table = capsys.readouterr().out
    assert "| g1 | 0.5000 | 0.4500 | -0.0500 |" in table and "| confirming half |" in table
    bad = tmp_path / "bad.json"
    bad.write_text("{not json", encoding="utf-8")
    assert main([str(bad), paths[1]]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"error: {bad}: not a bench-forecast --json file") and "\n" not in err


def test_files_without_per_day_errors_compare_without_an_interval() -> None:
    before, after = _files()
    for r in before + after:
        r.day_errors, r.day_counts, r.day_dates = [], [], []
    changes = {c.name: c for c in compare(before, after, choose=["g1"], draws=200)}
    assert changes["g1"].change == pytest.approx(-0.05)
    assert math.isnan(changes["g1"].low) and math.isnan(changes["all groups"].high)
