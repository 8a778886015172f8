"""The fuzz corpus in CI: every hand-written case and a bounded hypothesis sample, in-process.

``tests/fuzz_corpus.py`` holds the cases and the judge; ``tests/fuzz_cli.py`` runs the
full corpus (slow cases and many random mutations included) in subprocesses.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from scaler.cli import main
from scaler.service import cycle
from tests.fuzz_corpus import (
    ABSURD_NUMBERS,
    NUMERIC_FIELDS,
    Case,
    absurd_case,
    hand_config_cases,
    hand_history_cases,
    hand_input_cases,
    hand_output_cases,
    is_absurd,
    judge,
    left_in,
    place_files,
    serve_prometheus,
    special_output_cases,
    state_cases,
    suspect_input_cases,
)


def run_in_process(case: Case, folder: Path, capsys: pytest.CaptureFixture[str]) -> str:
    if case.prometheus is None:
        return _run_in_process(case, folder, capsys, None)
    with serve_prometheus(case.prometheus) as url:
        return _run_in_process(case, folder, capsys, url)


def _run_in_process(
    case: Case, folder: Path, capsys: pytest.CaptureFixture[str], url: str | None
) -> str:
    place_files(case, folder, url)
    capsys.readouterr()
    try:
        code: int | None = main(case.argv)
    except SystemExit as exc:  # argparse
        code = int(exc.code or 0)
    err = capsys.readouterr().err
    plan = folder / "plan.json"
    plan_text = plan.read_text() if plan.is_file() else None
    verdict = judge(case, code, err, plan_text, left_in(folder))
    assert verdict == "clean", f"{case.name}: {verdict}: exit {code}: {err[-600:]}"
    return err


CASES = [
    c for c in (*hand_config_cases(), *hand_history_cases(), *hand_output_cases()) if not c.slow
]
INPUT_CASES = [
    c for c in (*hand_input_cases(), *state_cases(), *suspect_input_cases()) if not c.slow
]


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_hand_written_case_fails_safe(
    case: Case, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cycle, "_STORES", {})
    run_in_process(case, workdir, capsys)
    assert not (workdir / "pwned").exists()


OUTPUT_CASES = [c for c in special_output_cases() if not c.slow]


@pytest.mark.slow
@pytest.mark.parametrize("case", OUTPUT_CASES, ids=[c.name for c in OUTPUT_CASES])
def test_a_special_file_at_any_output_is_one_line_naming_the_flag(
    case: Case, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """#50 finding 9: each was a wait for ever, a traceback or a file written through a link."""
    monkeypatch.setattr(cycle, "_STORES", {})
    run_in_process(case, workdir, capsys)
    assert not (workdir / "elsewhere.json").exists()
    assert not (workdir / "gone").exists()


FAST_INPUTS = [c for c in INPUT_CASES if not c.name.startswith(("state/", "suspect/", "dup"))]
CYCLE_INPUTS = [c for c in INPUT_CASES if c not in FAST_INPUTS]


@pytest.mark.parametrize("case", FAST_INPUTS, ids=[c.name for c in FAST_INPUTS])
def test_a_malformed_node_list_mig_parted_config_or_path_is_one_line(
    case: Case, workdir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """#50 finding 5: each was a traceback, a read until MemoryError, or a wait for ever."""
    run_in_process(case, workdir, capsys)


@pytest.mark.slow
@pytest.mark.parametrize("case", CYCLE_INPUTS, ids=[c.name for c in CYCLE_INPUTS])
def test_corrupt_state_and_suspect_inputs_fail_safe(
    case: Case, workdir: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """#50 findings 6, 8 and 10: corrupt state is set aside and the cycle plans (this run
    and the next); duplicate label sets and implausible footprints hold (exit 1)."""
    from scaler.service import growth_cache

    monkeypatch.setattr(cycle, "_STORES", {})
    monkeypatch.setattr(growth_cache, "_CACHES", {})
    run_in_process(case, workdir, capsys)
    state = [name for name in case.files if name.startswith("models/")]
    for name in state:
        if case.name.endswith(("-nested", "-binary")):  # the whole file set aside
            assert (workdir / f"{name}.bad").read_bytes() == case.files[name]
    if state:  # the next cycle runs on what this one rebuilt, without a word about it
        monkeypatch.setattr(growth_cache, "_CACHES", {})
        err = run_in_process(Case(case.name, {}, case.argv, "ok"), workdir, capsys)
        assert "set aside" not in err


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    path=st.sampled_from(NUMERIC_FIELDS),
    value=st.one_of(
        st.sampled_from(ABSURD_NUMBERS),
        st.floats(min_value=1e13, allow_infinity=False),
        st.integers(max_value=-2),
        st.text(min_size=1, max_size=40).filter(lambda t: not _numeric(t)),
    ),
)
@pytest.mark.slow
def test_an_absurd_quantity_anywhere_is_one_line_naming_the_field(
    path: str,
    value: Any,
    tmp_path_factory: pytest.TempPathFactory,
    capsys: pytest.CaptureFixture[str],
) -> None:
    assume(is_absurd(path, value))
    folder = tmp_path_factory.mktemp("fuzz")
    import os

    here = os.getcwd()
    os.chdir(folder)
    try:
        run_in_process(absurd_case(path, value, "hypothesis"), folder, capsys)
    finally:
        os.chdir(here)


def _numeric(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def test_the_judge_catches_what_it_must() -> None:
    case = Case("x", {}, [], "error", "max_nodes")
    assert judge(case, 2, "tiercast: error: cfg: pools[0].max_nodes: bad\n", None) == "clean"
    assert judge(case, 0, "", None) == "wrong-success"
    assert judge(case, 1, "Traceback (most recent call last):\n", None) == "traceback"
    assert judge(case, 2, "tiercast: error: " + "x" * 400 + " max_nodes\n", None) == "traceback"
    assert judge(case, 2, "tiercast: error: a\ntiercast: error: max_nodes\n", None) == "traceback"
    assert judge(case, None, "", None) == "hang"
    hold = Case("h", {}, [], "hold")
    down = json.dumps({"actions": [{"decision": "scale-down"}]})
    assert judge(hold, 0, "", down) == "wrong-success"
    assert judge(hold, 0, "", '{"cost": NaN}') == "wrong-success"
    assert judge(hold, 0, "", json.dumps({"actions": []})) == "clean"
    # A log line repeating the final error line is a second line.
    logged = "2026-12-02 10:00:00,000 ERROR scaler.service.cycle_job: cycle x failed\n"
    assert judge(hold, 2, logged + "tiercast: error: no data\n", None) == "traceback"
    # A dry-run that leaves a plan, records or models in its folder is a wrong success.
    quiet = Case("q", {"h.csv": b""}, [], "ok", outputs=("finance/",))
    assert judge(quiet, 0, "", None, {"h.csv", "finance/finance.html"}) == "clean"
    for stray in ("tiercast-plan.json", "models/a.npz", "finance/tiercast-plan.json"):
        assert judge(quiet, 0, "", None, {"h.csv", stray}) == "wrong-success", stray
