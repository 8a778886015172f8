"""The HTML reports in a real browser: Debian's chromium, headless, driven over DevTools.

Checks what a reader would notice: the page loads without console errors (a
Content Security Policy violation would be one), every chart is a decoded image
of the size the JSON export records, and the key figures on the page say the same
as the JSON. A full-page screenshot is kept in the test's temporary folder, or in the
folder ``$TIERCAST_TEST_ARTIFACTS`` names (one the caller made: never the checkout).
Skipped, with the reason, only when no chromium binary can be found.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaler.cli import main
from scaler.reports.i18n import fmt_number

websocket = pytest.importorskip("websocket", reason="websocket-client is not installed")

PAGE_WIDTH_PX = 1280
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--remote-allow-origins=*",
    "--remote-debugging-port=0",
    "--window-size=1100,900",
)


def _chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    pytest.skip(
        "chromium not found on PATH; install it with 'apt-get install -y --no-install-recommends chromium' "
        "(.ci/test.sh does)"
    )


class DevTools:
    """A minimal DevTools protocol client: commands by id, events collected as they arrive."""

    def __init__(self, url: str) -> None:
        self.ws = websocket.create_connection(url, timeout=30, suppress_origin=True)
        self.next_id = 0
        self.events: list[dict[str, Any]] = []

    def call(self, method: str, **params: Any) -> dict[str, Any]:
        self.next_id += 1
        my_id = self.next_id
        self.ws.send(json.dumps({"id": my_id, "method": method, "params": params}))
        while True:
            msg = json.loads(self.ws.recv())
            if msg.get("id") == my_id:
                if "error" in msg:
                    raise AssertionError(f"{method} failed: {msg['error']}")
                return dict(msg.get("result", {}))
            if "method" in msg:
                self.events.append(msg)

    def wait_for(self, event: str, timeout_s: float = 30.0) -> None:
        deadline = time.monotonic() + timeout_s
        if any(e["method"] == event for e in self.events):
            return
        while time.monotonic() < deadline:
            msg = json.loads(self.ws.recv())
            if "method" in msg:
                self.events.append(msg)
                if msg["method"] == event:
                    return
        raise AssertionError(f"no {event} within {timeout_s} s")

    def close(self) -> None:
        self.ws.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[str]:
    """A headless chromium; yields the DevTools HTTP base URL."""
    binary = _chromium()
    profile = tempfile.mkdtemp(prefix="tiercast-chromium-")
    proc = subprocess.Popen(
        [binary, *FLAGS, f"--user-data-dir={profile}", "about:blank"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        port_file = Path(profile) / "DevToolsActivePort"
        deadline = time.monotonic() + 60
        while not port_file.is_file() or not port_file.read_text().strip():
            if proc.poll() is not None or time.monotonic() > deadline:
                pytest.fail(f"chromium did not start (exit {proc.poll()})")
            time.sleep(0.1)
        port = port_file.read_text().split()[0]
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(profile, ignore_errors=True)


def _open(base: str, page: Path) -> tuple[DevTools, dict[str, Any]]:
    """Load ``page`` in a fresh tab; return the client and what the page shows."""
    req = urllib.request.Request(f"{base}/json/new?about:blank", method="PUT")
    with urllib.request.urlopen(req, timeout=30) as resp:
        target = json.loads(resp.read())
    tools = DevTools(target["webSocketDebuggerUrl"])
    tools.call("Page.enable")
    tools.call("Runtime.enable")
    tools.call("Log.enable")
    # A laptop's page width: every table must fit it or scroll inside its own box.
    tools.call(
        "Emulation.setDeviceMetricsOverride",
        width=PAGE_WIDTH_PX,
        height=900,
        deviceScaleFactor=1,
        mobile=False,
    )
    tools.call("Page.navigate", url=page.resolve().as_uri())
    tools.wait_for("Page.loadEventFired")
    script = """JSON.stringify({
      images: [...document.images].map(i => ({key: i.dataset.chart, complete: i.complete,
        w: i.naturalWidth, h: i.naturalHeight})),
      figures: [...document.querySelectorAll('[data-key]')].map(e => ({key: e.dataset.key,
        value: e.dataset.value, text: e.textContent})),
      title: document.title, lang: document.documentElement.lang,
      tables: document.querySelectorAll('table').length,
      pageWidth: document.documentElement.scrollWidth, viewport: window.innerWidth,
      fits: [...document.querySelectorAll('.table-wrap')].map(w => {
        const t = w.querySelector('table'), box = w.getBoundingClientRect();
        return {key: w.dataset.wrap, scrolls: getComputedStyle(w).overflowX === 'auto',
          inside: t.getBoundingClientRect().left >= box.left - 1 && box.right <= innerWidth + 1,
          fits: w.scrollWidth <= w.clientWidth + 1};
      }),
      sections: [...document.querySelectorAll('section')].map(e => ({id: e.id,
        images: [...e.querySelectorAll('img')].map(i => i.dataset.chart),
        tables: [...e.querySelectorAll('table')].map(t => t.dataset.table)})),
      links: [...document.querySelectorAll('#summary a')].map(a => ({href: a.getAttribute('href'),
        text: a.textContent, target: !!document.querySelector(a.getAttribute('href'))}))})"""
    result = tools.call("Runtime.evaluate", expression=script, returnByValue=True)
    return tools, json.loads(result["result"]["value"])


def _errors(tools: DevTools) -> list[str]:
    out = []
    for e in tools.events:
        p = e.get("params", {})
        if e["method"] == "Runtime.exceptionThrown":
            out.append(json.dumps(p.get("exceptionDetails", {}))[:300])
        elif e["method"] == "Runtime.consoleAPICalled" and p.get("type") in ("error", "assert"):
            out.append(json.dumps(p.get("args", []))[:300])
        elif e["method"] == "Log.entryAdded" and p.get("entry", {}).get("level") == "error":
            out.append(str(p["entry"].get("text"))[:300])
    return out


def _check_page(base: str, folder: Path, kind: str, screenshot: str) -> dict[str, Any]:
    exported = json.loads((folder / f"{kind}.json").read_text(encoding="utf-8"))
    tools, page = _open(base, folder / f"{kind}.html")
    try:
        assert _errors(tools) == []
        charts = [c for s in exported["sections"] for c in s["charts"]]
        assert charts, "the report has no charts"
        assert sorted(i["key"] for i in page["images"]) == sorted(c["key"] for c in charts)
        sizes = {c["key"]: (c["width"], c["height"]) for c in charts}
        for img in page["images"]:
            assert img["complete"], img
            assert (img["w"], img["h"]) == sizes[img["key"]], img
        shown = {f["key"]: f for f in page["figures"]}
        assert set(shown) == set(exported["key_figures"])
        for f in exported["figures"]:
            assert float(shown[f["key"]]["value"]) == pytest.approx(f["value"], abs=1e-9)
            assert shown[f["key"]]["text"] == f["text"]
            # The text is the value written in the report's language, not another number.
            assert fmt_number(f["value"], exported["lang"], f["digits"]) in f["text"]
        assert page["lang"] == exported["lang"] and page["title"] == exported["title"]
        # Nothing is clipped at 1280 px: the page does not overflow sideways, and a table
        # wider than the page scrolls inside its own box rather than being cut off.
        assert page["viewport"] == PAGE_WIDTH_PX and page["pageWidth"] <= PAGE_WIDTH_PX
        assert len(page["fits"]) == page["tables"]
        for box in page["fits"]:
            assert box["inside"] and (box["fits"] or box["scrolls"]), box
        # Sections in the exported order, each with its own charts and tables; the summary
        # comes first and every recommendation links to a section on the page.
        assert [x["id"] for x in page["sections"]] == [x["key"] for x in exported["sections"]]
        for shown_sec, sec in zip(page["sections"], exported["sections"], strict=True):
            assert shown_sec["images"] == [c["key"] for c in sec["charts"]]
            assert shown_sec["tables"] == [tb["key"] for tb in sec["tables"]]
        assert page["sections"][0]["id"] == "summary"
        summary = exported["sections"][0]["items"]
        assert 1 <= len(page["links"]) == len(summary) <= 5
        for link, item in zip(page["links"], summary, strict=True):
            assert link["target"] and link["href"] == "#" + item["link"]
            assert link["text"] == item["text"]
        first = page["links"][0]["href"]
        clicked = tools.call(
            "Runtime.evaluate",
            expression="document.querySelector('#summary a').click(); location.hash",
            returnByValue=True,
        )
        assert clicked["result"]["value"] == first
        shot = tools.call("Page.captureScreenshot", format="png", captureBeyondViewport=True)
        keep = Path(os.environ.get("TIERCAST_TEST_ARTIFACTS") or folder)
        (keep / screenshot).write_bytes(base64.b64decode(shot["data"]))
    finally:
        tools.close()
    return exported


@pytest.mark.slow
def test_capacity_report_renders_in_chromium(
    browser: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["report", "--out", "rep", "--backtest-origins", "1", "--format", "html,json"]) == 0
    capsys.readouterr()
    exported = _check_page(browser, workdir / "rep", "report", "report-screenshot.png")
    plan = json.loads((workdir / "rep" / "plan.json").read_text())
    assert exported["key_figures"]["cost_per_hour_planned"] == plan["cost"]["per_hour_now"]
    assert exported["key_figures"]["cost_horizon_total"] == plan["cost"]["horizon_total"]
    sections = {x["key"]: x for x in exported["sections"]}
    # Forecast against actual: a chart per signal and per GPU model; commitment advice.
    assert len(sections["hindsight"]["charts"]) == len(plan["signals"]) + len(
        {p["gpu_model"] for p in plan["pools"]}
    )
    assert {tb["key"] for tb in sections["hindsight"]["tables"]} == {
        "hindsight_accuracy",
        "hindsight_pools",
        "hindsight_tiers",
    }
    assert sections["commitments"]["paragraphs"][1:]
    assert any(i["link"] == "commitments" for i in sections["summary"]["items"])


@pytest.mark.slow
def test_russian_finance_report_renders_in_chromium(
    browser: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(
        [
            "plan",
            "--horizon",
            "30d",
            "--scenario",
            "рост:growth=20%",
            "--lang",
            "ru",
            "--out",
            "fin",
            "--format",
            "html,json",
        ]
    )
    capsys.readouterr()
    assert code == 0
    exported = _check_page(browser, workdir / "fin", "finance", "finance-ru-screenshot.png")
    assert exported["lang"] == "ru"
    totals = exported["data"]["finance"]["scenarios"][0]["totals"]
    assert exported["key_figures"]["cost_expected"] == totals["expected"]["cost"]
    summary = exported["sections"][0]
    assert summary["key"] == "summary"
    assert {i["link"] for i in summary["items"]} >= {"commitments", "scenarios"}


@pytest.mark.slow
def test_ninety_day_finance_report_clips_no_table_at_1280_px(
    browser: str, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The 90-day finance run of docs/reports-and-finance.md: the widest monthly tables
    # (three or four calendar months in every band) and the idle GPU-hours per workload.
    code = main(
        ["plan", "--dry-run", "--horizon", "90d", "--out-dir", "fin", "--format", "html,json"]
    )
    capsys.readouterr()
    assert code == 0
    exported = _check_page(browser, workdir / "fin", "finance", "finance-90d-screenshot.png")
    sections = {s["key"]: s for s in exported["sections"]}
    (table,) = sections["workload_costs"]["tables"]
    assert {r["workload"] for r in table["rows"]} >= {"chat", "embed"}
    tables = {tb["key"]: tb for tb in sections["projection"]["tables"]}
    assert len({r["period"] for r in tables["monthly_by_tier"]["rows"]}) >= 3
