"""Reasons as values: every code renders in every language, the JSON form round-trips,
old sentences still read, and an Event note carries its reason whole."""

from __future__ import annotations

import json
import re
import string

import pytest

from scaler import wording
from scaler.actuation.kube.events import NOTE_LIMIT, action_note, change_events
from scaler.plans import SCHEMA_VERSION, Action
from scaler.wording import CLAUSES, CODES, LANGS, TEMPLATES, Reason, render


def _fields(template: str) -> set[str]:
    names: set[str] = set()
    for _, name, _, _ in string.Formatter().parse(template):
        if name:
            names.update(name.rstrip("@").split("*"))
    return names


def _sample(name: str) -> object:
    """A value for a parameter: numbers where the table formats numbers, else a word."""
    if name in {"profiles", "short_profiles"}:
        return ("whole", "1g.10gb")
    if name == "bound":
        return ("bridging", "max_nodes")
    if name in {"signals", "workloads", "flavors", "held_flavors", "unnamed"}:
        return ("n1", "n2")
    if name in {"held_signals", "held_nodes", "blocked"}:
        return ("n1", "n2")
    if name in {"capacity", "short"}:
        return (2, 3)
    if name in {"text", "model", "pool", "node", "queue", "resource", "config", "label", "mode"}:
        return "x"
    if name == "why":
        return wording.SUSPECT_SPIKE  # a held model's cause: another code, rendered inside
    if name in {"at", "until", "window", "since", "step", "from_layout", "to_layout"}:
        return "x"
    if name in {"quantile", "level", "method", "error", "lead_from", "group"}:
        return "learned"
    return 1234.5 if name.endswith(("_h", "_pct", "per_hour", "gpus", "gpus_short")) else 12


def _all_params() -> dict[str, object]:
    names: set[str] = set()
    for table in (*TEMPLATES.values(), *CLAUSES.values()):
        for text in table.values():
            names |= _fields(text)
    names |= {k for table in CLAUSES.values() for k in table}
    return {n: _sample(n) for n in sorted(names)}


def test_every_code_has_a_template_in_every_language_with_the_same_fields() -> None:
    for lang in LANGS:
        assert set(TEMPLATES[lang]) == set(CODES), lang
        assert set(CLAUSES[lang]) == set(CLAUSES["en"]), lang
    for code in CODES:
        assert _fields(TEMPLATES["ru"][code]) == _fields(TEMPLATES["en"][code]), code
    for key in CLAUSES["en"]:
        assert _fields(CLAUSES["ru"][key]) == _fields(CLAUSES["en"][key]), key


@pytest.mark.parametrize("code", CODES)
def test_every_code_renders_in_every_language(code: str) -> None:
    reason = Reason(code, _all_params())
    en, ru = reason.text("en"), reason.text("ru")
    assert en and ru and "{" not in en and "{" not in ru
    if code != wording.LEGACY:
        # Russian is Russian: a value word is translated, a number uses the decimal comma.
        assert re.search("[а-яА-Я]", ru), ru
        assert not {"whole", "bridging", "1234.5"} & set(re.split(r"[\s,;()]+", ru)), ru


def test_an_unknown_code_or_a_non_scalar_parameter_is_refused() -> None:
    with pytest.raises(ValueError, match="not one of"):
        Reason("scale-up.because")
    with pytest.raises(TypeError, match="not a JSON scalar"):
        Reason(wording.NO_OP_FITS, {"gpus": {"a": 1}})


def test_a_reason_round_trips_through_the_plan_json() -> None:
    reason = Reason(
        wording.SCALE_UP_FORECAST,
        {
            "gpus": 57.0,
            "model": "H100-80GB",
            "at": "00:15Z",
            "signals": ["chat_rps", "code_rps"],
            "lead_min": 15,
            "nodes": 1,
            "cost_per_hour": 11.2,
            "bound": ["bridging"],
        },
        ("risk.margins.chat_rps", "risk.margins.code_rps"),
    )
    data = json.loads(json.dumps(reason.to_dict()))
    assert data["code"] == "scale-up.forecast" and data["refs"][0] == "risk.margins.chat_rps"
    assert data["text"] == (
        "57.0 GPUs of H100-80GB by 00:15Z (chat_rps, code_rps; lead 15m): +1 node(s) "
        "(+11.20/h); bound: bridging"
    )
    assert Reason.from_value(data) == reason
    assert "переходный период" in reason.text("ru") and "57,0" in reason.text("ru")


def test_an_old_sentence_reason_still_reads() -> None:
    old = {
        "pool": "p",
        "decision": "no-op",
        "current_nodes": 1,
        "target_nodes": 1,
        "at": "2026-11-30T00:00:00Z",
        "needed_at": "2026-11-30T00:10:00Z",
        "cost_delta_per_hour": 0.0,
        "reason": "1 node(s) fit demand",
    }
    a = Action(**old)  # type: ignore[arg-type]
    assert a.reason.code == wording.LEGACY and render(a.reason, "ru") == "1 node(s) fit demand"
    assert SCHEMA_VERSION == 2


def _action(reason: Reason) -> Action:
    return Action("p", "scale-up", 1, 2, "t", "t", 1.0, reason)


def test_an_event_note_carries_the_reason_whole_and_shortens_only_the_message() -> None:
    reason = Reason(wording.LEGACY, {"text": "r" * 900 + " the end"})
    note = action_note(_action(reason), "applied", "m" * 5000)
    assert len(note) <= NOTE_LIMIT and note.startswith(reason.text() + " -> applied: ")
    calls = [{"verb": "PATCH", "status": "ok", "path": "/apis/karpenter.sh/v1/nodepools/p"}]
    [(_, body)] = change_events(_action(reason), calls, "applied", "m" * 5000, "t", "i")
    assert body["note"] == note and " the end -> applied" in body["note"]
    with pytest.raises(ValueError, match="does not fit an Event note"):
        action_note(_action(Reason(wording.LEGACY, {"text": "r" * 2000})), "applied", "")


def test_the_list_of_codes_in_the_docs_is_the_tables() -> None:
    from pathlib import Path

    docs = Path(__file__).resolve().parents[1] / "docs" / "reasons.md"
    assert docs.read_text(encoding="utf-8") == wording.codes_markdown(), (
        "docs/reasons.md differs from scaler/wording.py: python -m scaler.wording --docs "
        "> docs/reasons.md"
    )
    for code in CODES:
        assert f"| `{code}` |" in wording.codes_markdown()


def test_suspect_data_codes_are_wording_codes_and_say_what_the_forecaster_says() -> None:
    import numpy as np
    import pandas as pd

    from forecaster import suspect
    from scaler.planning.reasons import suspicion_reasons

    assert {suspect.SPIKE, suspect.ZEROS, suspect.LABEL_SETS} <= set(CODES)
    idx = pd.date_range("2026-03-01", periods=300, freq="5min")
    spiky = pd.Series(np.full(300, 10.0), index=idx)
    spiky.iloc[-1] = 1e6
    zeros = pd.Series(np.r_[np.full(290, 10.0), np.zeros(10)], index=idx)
    screened = suspect.screen_history({"a": spiky, "b": zeros}, idx[-1], pd.Timedelta(minutes=15))
    found = screened.found
    held, notes = suspicion_reasons(found)
    assert set(held) == {"a", "b"} and notes == []
    for signal, reasons in held.items():
        for reason, s in zip(reasons, found[signal], strict=True):
            # English from the table is the forecaster's own line, number for number.
            assert reason.text("en") == f"signal {signal!r}: {s.why}"
            assert re.search("[а-яА-Я]", reason.text("ru"))
    # The held model's note states its cause in the cause's words, in either language.
    note = wording.Reason(
        wording.NOTE_HELD, {**held["b"][0].params, "model": "H100", "why": held["b"][0].code}
    )
    assert (
        note.text("en")
        == f"H100: {held['b'][0].text('en')}; holding current capacity (no scale-down)"
    )
    assert held["b"][0].text("ru") in note.text("ru")
