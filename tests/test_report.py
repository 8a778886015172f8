"""Capacity review reports: files, numbers against the plan, languages, writers.

The browser checks of the HTML are in ``test_report_browser.py``.
"""

from __future__ import annotations

import csv
import json
import re
import string
from pathlib import Path

import pytest
from PIL import Image

from forecaster.errors import BadInputError
from forecaster.progress import Progress
from scaler.cli import main
from scaler.reports.capacity import REPORT_STEPS
from scaler.reports.charts import CHART_SIZE_PX
from scaler.reports.document import Column, KeyFigure, Report, Section, Table
from scaler.reports.html import render_html
from scaler.reports.i18n import STRINGS, check_lang, fmt_number, month_label, t
from scaler.reports.markdown import render_markdown
from scaler.reports.writing import write_report
from tests.conftest import trace_path


def _fields(text: str) -> set[str]:
    return {f for _, f, _, _ in string.Formatter().parse(text) if f}


def test_every_string_exists_in_every_language_with_the_same_placeholders() -> None:
    en = STRINGS["en"]
    for lang, table in STRINGS.items():
        assert set(table) == set(en), f"{lang}: {sorted(set(en) ^ set(table))}"
        for key, text in table.items():
            assert _fields(text) == _fields(en[key]), f"{lang}.{key}"
            assert text.strip(), f"{lang}.{key} is empty"
    # Russian strings are Russian: no English sentence left untranslated.
    same = [k for k in en if en[k] == STRINGS["ru"][k] and re.search(r"[a-z]{4,} [a-z]{4,}", en[k])]
    assert same == []


def test_numbers_and_months_per_language() -> None:
    assert fmt_number(1234567.891, "en") == "1,234,567.89"
    assert fmt_number(1234567.891, "ru") == "1\u00a0234\u00a0567,89"
    assert fmt_number(-0.001, "en") == "0.00"
    assert fmt_number(float("nan"), "ru") == "–"
    assert fmt_number(42, "en", 0) == "42"
    assert month_label("2027-02", "en") == "Feb 2027"
    assert month_label("2027-02", "ru") == "фев 2027"
    assert check_lang(" RU ") == "ru"
    with pytest.raises(BadInputError, match="expected one of en, ru"):
        check_lang("de")
    assert t("ru", "title_report") == "Обзор мощностей GPU"


def _tiny_report(lang: str) -> Report:
    table = Table(
        "t",
        "T | pipes",
        [Column("name", "Name"), Column("x", "X", 1), Column("share", "Share", 0, percent=True)],
        [{"name": "a|b", "x": 1234.56, "share": 0.25}, {"name": "<script>", "x": None, "share": 1}],
    )
    return Report(
        kind="report",
        lang=lang,
        title="Title <&>",
        subtitle="sub",
        created_at="2027-01-01T00:00:00Z",
        figures=[KeyFigure("k", "K", 1234.5, "/h")],
        sections=[Section("s", "S", ["para"], [table], [])],
    )


def test_writers_escape_and_format() -> None:
    page = render_html(_tiny_report("ru"))
    assert "<script>" not in page and "&lt;script&gt;" in page
    assert 'data-key="k" data-value="1234.5"' in page
    assert "1\u00a0234,50 /h" in page and "1\u00a0234,6" in page and "25%" in page
    assert "default-src 'none'" in page  # nothing may load from outside the file
    md = render_markdown(_tiny_report("en"))
    assert "| a\\|b | 1,234.6 | 25% |" in md and "| <script> | – | 100% |" in md


def test_write_report_rejects_unknown_formats(tmp_path: Path) -> None:
    with pytest.raises(BadInputError, match="pdf"):
        write_report(_tiny_report("en"), tmp_path, ["html", "pdf"])


def _counted_bars(monkeypatch: pytest.MonkeyPatch) -> list[Progress]:
    """Every bar a command opens, off (nothing drawn) but counting."""
    bars: list[Progress] = []

    def for_args(cls: type, args: object, desc: str, total: int = 0, unit: str = "") -> Progress:
        bars.append(Progress(False, desc, total))
        return bars[-1]

    monkeypatch.setattr(Progress, "for_args", classmethod(for_args))
    return bars


@pytest.mark.slow
def test_demo_report_files_and_numbers(
    workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    bars = _counted_bars(monkeypatch)
    assert main(["report", "--out", "rep", "--backtest-origins", "1"]) == 0
    out = capsys.readouterr().out
    # The progress bar counted every unit it announced: the plan, the report's steps,
    # each backtest origin and each commitment scenario, the files.
    (bar,) = bars
    assert bar.n == bar.total > 2 + REPORT_STEPS
    assert "rep/report.html" in out
    rep = workdir / "rep"
    data = json.loads((rep / "report.json").read_text(encoding="utf-8"))
    plan = json.loads((rep / "plan.json").read_text())
    figures = data["key_figures"]
    assert figures["cost_per_hour_current"] == plan["cost"]["per_hour_current"]
    assert figures["cost_per_hour_planned"] == plan["cost"]["per_hour_now"]
    assert figures["expected_unserved_gpu_hours"] == plan["risk"]["expected_unserved_gpu_hours"]
    assert figures["changes"] == sum(a["decision"] != "no-op" for a in plan["actions"])
    sections = {s["key"]: s for s in data["sections"]}
    assert {"signals", "accuracy", "capacity", "actions", "cost", "utilization"} <= set(sections)
    # One chart per signal and per GPU model, the cost chart, and per MIG model its instances
    # and their use against the GPUs' compute; all the documented size.
    charts = [c for s in data["sections"] for c in s["charts"]]
    mig_models = plan["mig"].get("models", {})
    models = {p["gpu_model"] for p in plan["pools"]}
    hindsight = next(s for s in data["sections"] if s["key"] == "hindsight")
    # Forecast against actual (from the backtest here: no run records): one chart per
    # signal and per GPU model with demand.
    assert len(hindsight["charts"]) == len(plan["signals"]) + len(models)
    assert len(charts) == (2 * len(plan["signals"]) + 2 * len(models) + 1 + 2 * len(mig_models))
    for c in charts:
        with Image.open(rep / c["file"]) as img:
            assert img.size == CHART_SIZE_PX == (c["width"], c["height"])
    # The daily cost table adds up to the plan's cost over the horizon.
    daily = next(tb for tb in sections["cost"]["tables"] if tb["key"] == "cost_daily")
    assert sum(r["total"] for r in daily["rows"]) == pytest.approx(
        plan["cost"]["horizon_total"], abs=0.05
    )
    # Backtest rows compare the estimator in use with a seasonal-naive baseline.
    acc = sections["accuracy"]["tables"][0]["rows"]
    assert {r["estimator"] for r in acc} >= {"seasonal_naive_1d"}
    assert all(r["mase"] is None or r["mase"] >= 0 for r in acc)
    # MIG: one row per profile with demand, capacity and the instance-hour cost.
    cap_tables = {tb["key"]: tb for tb in sections["capacity"]["tables"]}
    for model, m in mig_models.items():
        rows = [r for r in cap_tables["mig_profiles"]["rows"] if r["gpu_model"] == model]
        assert {r["profile"]: r["capacity"] for r in rows} == m["capacity_instances"]
        for r in rows:
            assert r["cost_instance_hour"] == pytest.approx(
                r["gpu_share"]
                * min(p["price_per_gpu_hour"] for p in plan["pools"] if p["pool"] in m["pools"])
            )
    # One story: the MIG layouts cover exactly the nodes the tier plan targets now.
    targets = {p["pool"]: p["target_nodes"][0] for p in plan["pools"]}
    mig_rows = cap_tables["mig_pools"]["rows"]
    assert {r["pool"] for r in mig_rows} == {p for m in mig_models.values() for p in m["pools"]}
    for r in mig_rows:
        assert r["mig_nodes"] == r["target_now"] == targets[r["pool"]]
    # The summary heads the page; each item links to a section of this report.
    assert data["sections"][0]["key"] == "summary"
    links = {i["link"] for i in data["sections"][0]["items"]}
    assert links and links <= set(sections)
    # Actions: one row per plan action, with its reason.
    actions = sections["actions"]["tables"][0]["rows"]
    assert [r["reason"] for r in actions] == [a["reason"]["text"] for a in plan["actions"]]
    # CSV and Markdown carry the same tables.
    with (rep / "csv" / "report-cost_daily.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    assert [float(r["total"]) for r in rows] == pytest.approx([r["total"] for r in daily["rows"]])
    md = (rep / "report.md").read_text(encoding="utf-8")
    for c in charts:
        assert f"({c['file']})" in md
    assert md.count("\n## ") == len(data["sections"])


@pytest.mark.slow
@pytest.mark.traces
def test_russian_report_on_a_public_trace(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    trace = trace_path("servegen/m_small_rps_10min.csv")
    code = main(
        [
            "report",
            "--history",
            str(trace),
            "--units-per-gpu",
            "2",
            "--lang",
            "ru",
            "--out",
            "rep",
            "--backtest-origins",
            "2",
            "--format",
            "html,md,json",
        ]
    )
    assert code == 0
    assert "отчёт записан" in capsys.readouterr().out
    data = json.loads((workdir / "rep" / "report.json").read_text(encoding="utf-8"))
    assert data["lang"] == "ru" and data["title"] == STRINGS["ru"]["title_report"]
    titles = {s["key"]: s["title"] for s in data["sections"]}
    for key, title in titles.items():
        assert re.search("[а-яА-Я]", title), (key, title)
    labels = [c["label"] for s in data["sections"] for tb in s["tables"] for c in tb["columns"]]
    english = [x for x in labels if x not in ("MASE",) and not re.search("[а-яА-Я]", x)]
    assert english == []
    acc = next(s for s in data["sections"] if s["key"] == "accuracy")["tables"][0]["rows"]
    assert {r["origins"] for r in acc} == {2}
    # The reasons are rendered in Russian from their codes.
    actions = next(s for s in data["sections"] if s["key"] == "actions")["tables"][0]["rows"]
    assert all(re.search("[а-яА-Я]", r["reason"]) for r in actions)
    page = (workdir / "rep" / "report.html").read_text(encoding="utf-8")
    # History, capacity, cost, and forecast against actual for the signal and the model.
    assert '<html lang="ru">' in page and page.count("data:image/png;base64,") == 5
    with Image.open(workdir / "rep" / "charts" / "cost-by-tier.png") as img:
        assert img.size == CHART_SIZE_PX


def _small_history(path: Path) -> Path:
    import numpy as np
    import pandas as pd

    index = pd.date_range("2027-01-01", periods=3 * 144, freq="10min")
    values = 40 + 20 * np.sin(np.arange(len(index)) * 2 * np.pi / 144)
    pd.DataFrame({"timestamp": index.strftime("%Y-%m-%dT%H:%M:%SZ"), "value": values}).to_csv(
        path, index=False
    )
    return path


@pytest.mark.slow
def test_history_review_starts_from_todays_fleet(
    workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    csv_path = _small_history(workdir / "rps.csv")
    common = ["report", "--history", str(csv_path), "--backtest-origins", "0", "-o", "json"]
    assert main([*common, "--out-dir", "empty"]) == 0
    assert (
        main(
            [
                *common,
                "--out-dir",
                "fleet",
                "--current-nodes",
                "default-on-demand=3",
                "--signal-unit",
                "requests/s",
            ]
        )
        == 0
    )
    capsys.readouterr()
    empty = json.loads((workdir / "empty" / "report.json").read_text(encoding="utf-8"))
    fleet = json.loads((workdir / "fleet" / "report.json").read_text(encoding="utf-8"))
    assert empty["key_figures"]["cost_per_hour_current"] == 0
    # 3 nodes x 8 GPUs x 4.00 per GPU-hour (the --history defaults).
    assert fleet["key_figures"]["cost_per_hour_current"] == pytest.approx(96.0)
    signals = next(s for s in fleet["sections"] if s["key"] == "signals")["tables"][0]["rows"]
    assert {r["unit"] for r in signals} == {"requests/s"}
    # How much history each forecast rested on.
    assert all(r["history_days"] > 0 for r in signals)
    assert main([*common, "--out-dir", "bad", "--current-nodes", "gpu-pool=2"]) == 2
    err = capsys.readouterr().err
    assert "--current-nodes" in err and "default-on-demand" in err
    assert len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_tier_and_mig_sections_that_disagree_are_called_out() -> None:
    import argparse
    import dataclasses

    from scaler.cli.plan import plan_without_acting
    from scaler.reports.capacity import build_capacity_report
    from scaler.reports.mig_review import mig_pool_rows

    args = argparse.Namespace(config=None, history=None, now=None, horizon="6h", current_nodes=[])
    config, history, _, label, result = plan_without_acting(args)
    plan = result.plan
    [row] = mig_pool_rows(plan)
    assert row["mig_nodes"] == row["target_now"]
    # A plan whose tier part was changed after the MIG layouts were planned.
    pools = [
        dataclasses.replace(p, target_nodes=[n + 1 for n in p.target_nodes])
        if p.pool == row["pool"]
        else p
        for p in plan.pools
    ]
    bad = dataclasses.replace(plan, pools=pools)
    report = build_capacity_report(
        config, history, bad, result.forecasts, label, backtest_origins=0
    )
    cap = next(s for s in report.sections if s.key == "capacity")
    assert any("do not come from the same plan" in p for p in cap.paragraphs)
    good = build_capacity_report(config, history, plan, result.forecasts, label, backtest_origins=0)
    cap = next(s for s in good.sections if s.key == "capacity")
    assert not any("do not come from the same plan" in p for p in cap.paragraphs)


@pytest.mark.slow
def test_russian_reasons_keep_every_number_and_the_sentence_of_their_kind() -> None:
    import argparse

    from scaler.cli.plan import plan_without_acting
    from scaler.reports.capacity import build_capacity_report
    from scaler.reports.i18n import numbers_in

    args = argparse.Namespace(config=None, history=None, now=None, horizon="6h", current_nodes=[])
    config, history, _, label, result = plan_without_acting(args)
    rows = {}
    for lang in ("en", "ru"):
        report = build_capacity_report(
            config, history, result.plan, result.forecasts, label, lang, backtest_origins=0
        )
        act = next(s for s in report.sections if s.key == "actions")
        rows[lang] = act.tables[0].rows
    kinds = [a.kind for a in result.plan.actions]
    assert "mig-layout" in kinds and "nodes" in kinds
    for en, ru, action in zip(rows["en"], rows["ru"], result.plan.actions, strict=True):
        assert numbers_in(ru["reason"], "ru") == numbers_in(en["reason"], "en"), (en, ru)
        assert re.search("[а-яА-Я]", ru["reason"]), ru["reason"]
        # The sentence of the action's own kind, not the node-count one for every row.
        if action.kind == "mig-layout":
            assert "разметк" in ru["reason"] or "вывод" in ru["reason"], ru["reason"]
        else:
            assert "узл." in ru["reason"] and "разметк" not in ru["reason"]
        # No English reason text: every word of the English template is gone.
        assert not re.search(r"\b(node|nodes|GPUs|lead|demand|until|keep)\b", ru["reason"])
    # An old plan's sentence (no code) is said from the action's fields, with the
    # planner's words (and numbers) beside it.
    import dataclasses

    from scaler.reports.actions import _action_reason

    odd = dataclasses.replace(result.plan.actions[0], reason="zz 12.5 yy")
    plan = dataclasses.replace(result.plan, actions=[odd])
    text = _action_reason(plan, 0, "ru")
    assert text.endswith("(zz 12.5 yy)") and re.search("[а-яА-Я]", text)


def test_summary_ranks_and_links_what_matters() -> None:
    from scaler.reports.summary import SUMMARY_MAX, _lost_to_baseline, summary_section

    rows = [
        {"signal": "a", "estimator": "auto", "chosen": "yes", "mase": 1.4},
        {"signal": "a", "estimator": "seasonal_naive_1d", "chosen": "", "mase": 1.1},
        {"signal": "b", "estimator": "auto", "chosen": "yes", "mase": 0.8},
        {"signal": "b", "estimator": "seasonal_naive_1d", "chosen": "", "mase": 1.2},
    ]
    [(_rank, text, link)] = _lost_to_baseline(rows, "en")
    assert link == "accuracy" and "a lost to seasonal_naive_1d" in text
    assert "1.400" in text and "1.100" in text
    items = [(3, "c", "x"), (0, "a", "y"), (2, "b", "z")] + [(4, f"n{i}", "w") for i in range(5)]
    sec = summary_section(items, "en")
    assert sec.key == "summary" and len(sec.items) == SUMMARY_MAX == 5
    assert sec.items[:3] == [("a", "y"), ("b", "z"), ("c", "x")]
    assert summary_section([], "ru").paragraphs and not summary_section([], "ru").items
    page = render_html(Report("report", "en", "T", "s", "now", [], [sec]))
    assert '<a href="#y" data-link="y">a</a>' in page
    assert "- [a](#y)" in render_markdown(Report("report", "en", "T", "s", "now", [], [sec]))


# Words a Russian report may keep in Latin letters: units, metrics and product names. Names
# from the config and the plan (pools, signals, models, estimators, layouts), config keys
# (with ``_`` or ``.``) and anything with a digit (q0.9, 1g.10gb, H100-80GB) are names too.
RUSSIAN_ALLOWED = {"GPU", "MIG", "MPS", "MASE", "Pinball", "pinball", "UTC", "USD", "x", "tiercast"}
RUSSIAN_ALLOWED |= {"requests/s"}


def _report_texts(report: Report) -> list[str]:
    """Every string a reader sees in a report: headings, figures, paragraphs, cells, charts."""
    out = [report.title, report.subtitle]
    out += [x for f in report.figures for x in (f.label, f.unit)]
    for s in report.sections:
        out += [s.title, *s.paragraphs, *(text for text, _ in s.items)]
        for tb in s.tables:
            out += [tb.title, *(c.label for c in tb.columns)]
            out += [v for r in tb.rows for c in tb.columns if isinstance(v := r.get(c.key), str)]
        out += [x for ch in s.charts for x in (ch.title, ch.alt)]
    return out


def _strings(value: object) -> set[str]:
    """Every string inside nested dicts and lists (keys included)."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return {x for k, v in value.items() for x in _strings(k) | _strings(v)}
    if isinstance(value, list | tuple):
        return {x for v in value for x in _strings(v)}
    return set()


def english_words(report: Report, names: set[str]) -> dict[str, str]:
    """Latin-letter words of ``report`` that are neither names nor allowed units, each with
    the first text it is in."""
    found: dict[str, str] = {}
    for text in _report_texts(report):
        # Timestamps and command-line flags are not words.
        plain = re.sub(r"(\d{4}-\d\d-\d\dT)?\d\d:\d\d(:\d\d)?Z|--[\w-]+", " ", text)
        for word in re.findall(r"[A-Za-z][A-Za-z0-9_./+'-]*", plain):
            w = word.strip(".'/-")
            if re.search(r"[\d_.]", w) or w in names or w in RUSSIAN_ALLOWED:
                continue
            found.setdefault(w, text)
    return found


PRODUCT_NAMES = {"Kueue", "ClusterQueue", "nominalQuota", "ResourceFlavor", "Pending", "mixed"}
PRODUCT_NAMES |= {"Prometheus"}
"""Kubernetes kinds, fields, states and values (``mig.strategy=mixed``), and the products
tiercast reads from (Prometheus), written as they write themselves in any language."""

# Parameters whose values are words each language has its own word for (scaler.wording.TERMS).
_TERM_SAMPLES: dict[str, object] = {
    "bound": ("bridging", "stabilization"),
    "binding": "the deadline has passed",
    "which": "newest",
    "causes": ("thermal", "power"),
    "workload_class": "batch",
    "lead_from": "learned",
    "profiles": ("whole", "1g.10gb"),
    "short_profiles": ("whole", "1g.10gb"),
}


def every_code(plan: object, config: object) -> list[object]:
    """A reason of every code but the legacy sentence, its parameters filled from the demo:
    names where a name goes, the words a language translates, numbers elsewhere."""
    from scaler import wording

    pool, signal = config.pools[0].name, config.signals[0].name  # type: ignore[attr-defined]
    model = plan.pools[0].gpu_model  # type: ignore[attr-defined]
    texts = [t for lang in ("en",) for t in wording.TEMPLATES[lang].values()]
    texts += list(wording.CLAUSES["en"].values())
    fields = {
        name.rstrip("@")
        for text in texts
        for _, field, _, _ in string.Formatter().parse(text)
        if field
        for name in field.split("*")
    }

    def sample(name: str) -> object:
        if name in _TERM_SAMPLES:
            return _TERM_SAMPLES[name]
        if name == "why":
            return wording.SUSPECT_ZEROS
        if name in {"capacity", "short"}:
            return (2, 3)
        if name in {"model"}:
            return model
        if name in {"pool", "group", "node", "queue", "config", "label", "mode"}:
            return pool
        if name in {"signal", "workload", "resource", "method", "step", "error", "currency"}:
            return signal
        if name in {"signals", "workloads", "flavors", "held_flavors", "unnamed", "series"}:
            return (signal, signal)
        if name in {"held_signals", "held_nodes", "blocked"}:
            return (pool,)
        if name in {"at", "until", "since", "deadline", "window", "from_layout", "to_layout"}:
            return "2026-11-02T00:15:00Z"
        if name in {"quantile", "level"}:
            return "q0.9"
        return 12.5

    params = {name: sample(name) for name in sorted(fields)}
    return [wording.Reason(code, params) for code in wording.CODES if code != wording.LEGACY]


def english_runs(texts: list[str], names: set[str]) -> list[str]:
    """Runs of three or more Latin-letter words in a row (a sentence left in English), once
    identifiers, numbers, units, times and ``names`` are taken out."""
    found = []
    for text in texts:
        plain = re.sub(r"(\d{4}-\d\d-\d\dT)?\d\d:\d\d(:\d\d)?Z|--[\w-]+", " ", text)
        words = re.findall(r"\S+", plain)
        run: list[str] = []
        for word in [*words, "."]:
            w = word.strip(".,;:()'\"")
            if (
                re.fullmatch(r"[A-Za-z][A-Za-z'-]*", w)
                and w not in names
                and w not in RUSSIAN_ALLOWED
            ):
                run.append(w)
                continue
            if len(run) >= 3:
                found.append(" ".join(run))
            run = []
    return found


@pytest.mark.slow
def test_a_russian_review_and_finance_report_have_no_english_words() -> None:
    import argparse

    import pandas as pd

    from scaler.cli.plan import plan_without_acting
    from scaler.reports import finance
    from scaler.reports.capacity import build_capacity_report
    from scaler.reports.finance_report import build_finance_report

    args = argparse.Namespace(config=None, history=None, now=None, horizon="6h", current_nodes=[])
    config, history, _, label, result = plan_without_acting(args)
    plan = result.plan
    names = {p.name for p in config.pools} | {s.name for s in config.signals}
    names |= {w.name for w in config.workloads} | {p.gpu_model for p in plan.pools}
    names.add(config.forecast.method)
    names |= {x for s in plan.signals for x in re.findall(r"[A-Za-z][\w]*", s.estimator)}
    names |= {str(a.details.get(k, "")) for a in plan.actions for k in ("layout", "from")}
    names |= _strings(plan.mig)  # layout and profile names
    assert label == "built-in demo fleet" and plan.notes is not None
    review = build_capacity_report(
        config, history, plan, result.forecasts, label, "ru", backtest_origins=0
    )
    now = pd.Timestamp(plan.created_at).tz_localize(None)
    projection = finance.project(config, result.forecasts, now, pd.Timedelta(hours=6))
    money = build_finance_report(projection, config, label, "ru", charts=False, plan=plan)
    for report in (review, money):
        assert english_words(report, names) == {}, report.kind
        assert "встроенный демонстрационный парк" in report.subtitle
    # A note of every code (the demo's plan has none), rendered in the Russian review's
    # notes: no sentence of the English table is left in it.
    import dataclasses

    noted = dataclasses.replace(plan, notes=every_code(plan, config))
    review = build_capacity_report(
        config, history, noted, result.forecasts, label, "ru", backtest_origins=0
    )
    notes = next(s for s in review.sections if s.key == "notes")
    assert len(notes.paragraphs) == len(noted.notes) + 1
    assert english_words(review, names | PRODUCT_NAMES) == {}
    assert english_runs(_report_texts(review), names | PRODUCT_NAMES) == []
    # ... while the English one, scanned the same way, has them.
    english = build_capacity_report(
        config, history, noted, result.forecasts, label, "en", backtest_origins=0
    )
    assert len(english_runs(_report_texts(english), names | PRODUCT_NAMES)) > len(noted.notes)
    # The English review, scanned the same way, is full of English: the check can fail.
    english = build_capacity_report(
        config, history, plan, result.forecasts, label, "en", backtest_origins=0
    )
    assert {"demand", "forecast", "reserved"} <= set(english_words(english, names))


@pytest.mark.slow
def test_plan_lang_ru_prints_its_plan_table_in_russian(
    capsys: pytest.CaptureFixture[str], state_dir: Path
) -> None:
    from scaler.cli import main

    assert main(["plan", "--dry-run", "--lang", "ru", "--horizon", "6h"]) == 0
    out = capsys.readouterr().out
    plan_part = out.split("\n\n", 3)
    text = "\n".join(plan_part[:3])
    assert "Решение" in text and "Причина" in text and "стоимость:" in text
    assert "DECISION" not in text and "cost:" not in text
    # Names on the lines: pools, signals, estimators, layouts; the rest is Russian.
    names = {w for line in text.splitlines() for w in line.split()[:2]}
    names |= set(re.findall(r"[A-Za-z][\w]*", text.split("\n\n")[0].split("\n", 2)[-1]))
    found = set()
    for line in text.splitlines()[1:]:
        plain = re.sub(r"(\d{4}-\d\d-\d\dT)?\d\d:\d\d(:\d\d)?Z|--[\w-]+|tiercast run", " ", line)
        for word in re.findall(r"[A-Za-z][A-Za-z0-9_./+'-]*", plain):
            w = word.strip(".'/-()")
            if re.search(r"[\d_.]", w) or w in names or w in RUSSIAN_ALLOWED or not w:
                continue
            found.add(w)
    assert found <= {"auto", "all-disabled", "tiercast-mixed"}, found


@pytest.mark.slow
def test_a_long_review_charts_daily_means_and_tables_cost_by_week() -> None:
    import argparse

    from scaler.cli.plan import plan_without_acting
    from scaler.reports.capacity import build_capacity_report

    args = argparse.Namespace(config=None, history=None, now=None, horizon="30d", current_nodes=[])
    config, history, _, label, result = plan_without_acting(args)
    review = build_capacity_report(
        config, history, result.plan, result.forecasts, label, "en", backtest_origins=0
    )
    cost = next(s for s in review.sections if s.key == "cost")
    assert [tb.key for tb in cost.tables] == ["cost_weekly", "cost_monthly"]
    weekly = cost.tables[0].rows
    # 30 days from Monday 2 November: five weeks, each named by its Monday, and together
    # the plan's cost over the horizon.
    assert [r["period"] for r in weekly][:2] == ["2026-11-02", "2026-11-09"]
    assert len(weekly) == 5
    assert sum(r["total"] for r in weekly) == pytest.approx(result.plan.cost["horizon_total"])
    signals = next(s for s in review.sections if s.key == "signals")
    assert any("daily means" in p for p in signals.paragraphs)
