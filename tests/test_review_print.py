"""The 90-day review and finance report a reviewer can read and print: no clipped column.

In Debian's headless chromium (the helpers of ``test_report_browser.py``), at a 1280 px
page on screen and with print media emulated (at 1280 px and at the printable width of an
A4 landscape page, the print stylesheet's page), no table cell's right edge is beyond its
table's box or the page, and no chart is wider than the page; the print stylesheet
takes the scroll boxes away, repeats table headers and starts each section on a page.
Fast checks of the charts (legend outside the data, whole days only) come first.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest

from scaler.cli import main
from tests.test_report_browser import PAGE_WIDTH_PX, DevTools, _errors, _open, browser

__all__ = ["browser"]  # the fixture, used by the tests below

A4_LANDSCAPE_PX = int((297 - 2 * 12) / 25.4 * 96)
"""Printable width of an A4 landscape page with the stylesheet's 12 mm margins, in CSS px."""

_CLIPPED = """(() => {
  const page = document.documentElement.clientWidth, out = [];
  for (const w of document.querySelectorAll('.table-wrap')) {
    const box = w.getBoundingClientRect(), limit = Math.min(box.right, page);
    for (const c of w.querySelectorAll('th, td')) {
      const r = c.getBoundingClientRect();
      if (r.right > limit + 1) {
        out.push({table: w.dataset.wrap, cell: c.textContent.slice(0, 40), right: r.right, limit});
        break;
      }
    }
  }
  const images = [...document.images].filter(i => i.getBoundingClientRect().right > page + 1)
    .map(i => i.dataset.chart);
  const sections = [...document.querySelectorAll('section')]
    .map(s => getComputedStyle(s).breakBefore);
  const scrolls = [...document.querySelectorAll('.table-wrap')]
    .filter(w => getComputedStyle(w).overflowX !== 'visible').length;
  return JSON.stringify({clipped: out, images, sections, scrolls, page,
    wide: document.documentElement.scrollWidth});
})()"""


def _layout(tools: DevTools, width: int, media: str) -> dict[str, Any]:
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        width=width,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    tools.call("Emulation.setEmulatedMedia", media=media)
    result = tools.call("Runtime.evaluate", expression=_CLIPPED, returnByValue=True)
    return dict(json.loads(result["result"]["value"]))


def _check_printable(base: str, page: Path) -> dict[str, dict[str, Any]]:
    """Each layout of ``page``: nothing clipped; in print, no scroll box and a page per section."""
    tools, shown = _open(base, page)
    seen = {}
    try:
        assert _errors(tools) == []
        assert shown["tables"] > 0
        for name, width, media in (
            ("screen", PAGE_WIDTH_PX, "screen"),
            ("print", PAGE_WIDTH_PX, "print"),
            ("a4", A4_LANDSCAPE_PX, "print"),
        ):
            layout = _layout(tools, width, media)
            assert layout["clipped"] == [], (name, layout["clipped"])
            assert layout["images"] == [], (name, layout["images"])
            assert layout["wide"] <= width, (name, layout["wide"])
            if media == "print":
                assert layout["scrolls"] == 0, name
                assert layout["sections"][1:] and set(layout["sections"][1:]) == {"page"}
            seen[name] = layout
        pdf = tools.call("Page.printToPDF", landscape=True, printBackground=False)
        assert len(pdf["data"]) > 1000
    finally:
        tools.close()
    return seen


@pytest.mark.slow
@pytest.mark.parametrize("lang", ["en", "ru"])
def test_the_ninety_day_review_prints_and_clips_no_column(
    browser: str, warm_demo_models: list[Path], lang: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["report", "--horizon", "90d", "--backtest-origins", "0", "--lang", lang]
    assert main([*args, "--out-dir", "rep", "-o", "html,json"]) == 0
    capsys.readouterr()
    _check_printable(browser, warm_demo_models[0].parent / "rep" / "report.html")
    exported = json.loads((warm_demo_models[0].parent / "rep" / "report.json").read_text())
    tables = {tb["key"]: tb for s in exported["sections"] for tb in s["tables"]}
    # The commitments table leads with the option and what it saves.
    keys = [c["key"] for c in tables["commitments"]["columns"]]
    assert keys[:7] == [
        "gpu_model",
        "decision",
        "recommended_nodes",
        "term",
        "monthly_saving",
        "monthly_saving_low",
        "monthly_saving_high",
    ]
    # 90 days from Monday 2 November: the last week is partial and says so.
    weeks = tables["cost_weekly"]["rows"]
    assert [r["days"] for r in weeks][-1] == pytest.approx(6.0)
    assert all(r["days"] == pytest.approx(7.0) for r in weeks[:-1])
    partial = "partial: 6.0 of 7 days" if lang == "en" else "неполный: 6,0 из 7 дн."
    assert partial in weeks[-1]["period"] and "partial" not in weeks[0]["period"]
    cost = next(s for s in exported["sections"] if s["key"] == "cost")
    assert ("per week" in cost["paragraphs"][0]) == (lang == "en")


@pytest.mark.slow
def test_the_ninety_day_finance_report_prints_and_clips_no_column(
    browser: str, warm_demo_models: list[Path], capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["plan", "--dry-run", "--horizon", "90d", "--out-dir", "fin", "--format", "html,json"]
    assert main(args) == 0
    capsys.readouterr()
    _check_printable(browser, warm_demo_models[0].parent / "fin" / "finance.html")


# ---------------------------------------------------------------- charts, fast


def test_the_legend_sits_outside_the_data() -> None:
    from scaler.reports.charts import finish_chart, new_figure

    fig, ax = new_figure()
    x = np.arange(50)
    ax.fill_between(x, 0, 100, label="band")
    ax.plot(x, x, label="median")
    chart = finish_chart(fig, ax, "k", "title", "en", 2)
    assert chart.png
    (legend,) = fig.legends
    assert ax.get_legend() is None
    box, data = legend.get_window_extent(), ax.get_window_extent()
    assert not box.overlaps(data), (box, data)


def test_daily_points_are_whole_days_only() -> None:
    from scaler.reports.charts import by_day

    # A forecast cut one step past its last day: a lone midnight sample is not a day.
    grid = pd.date_range("2026-11-02 00:00", "2026-11-05 00:00", freq="5min")
    values = pd.Series(100.0, index=grid)
    values.iloc[-1] = 1.0
    days = by_day(values)
    assert [d.strftime("%m-%d") for d in days.index] == ["11-02", "11-03", "11-04"]
    assert days.to_numpy() == pytest.approx([100.0] * 3)
    # A history that starts in the middle of a day: that day is left out too.
    tail = values["2026-11-02 13:00":"2026-11-04 23:55"]
    assert [d.strftime("%m-%d") for d in by_day(tail, "max").index] == ["11-03", "11-04"]
