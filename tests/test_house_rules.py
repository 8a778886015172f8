"""The house rules that a reviewer should not have to count by hand, checked in CI.

No function in ``scaler/`` or ``forecaster/`` is over 120 lines (from its ``def`` line to
its last line, as Python's parser reports them; aim for about 60). The other timed rule, no
unmarked test over 2 seconds, is a hook in ``tests/conftest.py``; its own check is here.
No test reads a clock to judge speed (speed is a benchmark's table, a ratio against a
baseline of the same run, not a bound that a busy machine breaks): :data:`CLOCKS` appear
only in the files of :data:`CLOCK_ALLOWED`, each with its reason.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO
from tests.duration_rule import limit_s

pytest_plugins = ["pytester"]

MAX_FUNCTION_LINES = 120
PACKAGES = ("scaler", "forecaster")
CLOCKS = ("process_time", "perf_counter", "thread_time")
"""The clocks a speed test would read (``time.monotonic`` measures timeouts, not speed)."""
CLOCK_ALLOWED: dict[str, str] = {
    "tests/test_large_inputs.py": "ten times the series in under forty times the time: "
    "linear against quadratic growth, a factor of 4 from the bound either way",
    "tests/test_house_rules.py": "this rule names the clocks",
}


def long_functions(files: list[Path], limit: int = MAX_FUNCTION_LINES) -> list[str]:
    """``path:line name is N lines`` for every function or method in ``files`` over ``limit``."""
    found = []
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                lines = (node.end_lineno or node.lineno) - node.lineno + 1
                if lines > limit:
                    where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                    found.append(f"{where}:{node.lineno} {node.name} is {lines} lines")
    return found


def parts() -> dict[str, list[Path]]:
    """Each Python file of the packages, by its path (one test each keeps every test short)."""
    return {
        str(path.relative_to(REPO)): [path]
        for package in PACKAGES
        for path in sorted((REPO / package).rglob("*.py"))
    }


PARTS = parts()


@pytest.mark.parametrize("part", sorted(PARTS))
def test_no_function_is_over_120_lines(part: str) -> None:
    found = long_functions(PARTS[part])
    assert not found, (
        f"over {MAX_FUNCTION_LINES} lines (split them into named steps of about 60):\n"
        + "\n".join(found)
    )


def test_the_line_count_is_from_def_to_the_last_line(tmp_path: Path) -> None:
    body = "\n".join(f"    x{i} = {i}" for i in range(119))
    source = tmp_path / "a.py"
    source.write_text(
        f"def fits():\n{body}\n\n\nclass C:\n    async def over(self):\n"
        + body.replace("    ", "        ")
        + "\n        y = 1\n        return y\n"
    )
    assert long_functions([source]) == [f"{source}:124 over is 122 lines"]
    assert {"scaler/service/cycle.py", "forecaster/selection.py"} <= set(PARTS)


def test_an_unmarked_test_over_the_limit_fails_the_run(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The rule of tests/duration_rule.py at a small limit, so that this check stays fast.
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")  # no xdist, hypothesis...: quicker
    pytester.makeconftest((REPO / "tests" / "duration_rule.py").read_text(encoding="utf-8"))
    pytester.makeini("[pytest]\nmarkers =\n    slow: slow\n")
    pytester.makepyfile(
        test_timed="""
        import time
        import pytest

        def test_quick():
            pass

        def test_dawdles():
            time.sleep(0.08)

        @pytest.mark.slow
        def test_marked():
            time.sleep(0.08)
        """
    )
    result = pytester.runpytest("--max-unmarked-s=0.05", "-p", "no:cacheprovider")
    assert result.ret == 1
    result.assert_outcomes(passed=3)
    result.stdout.re_match_lines(
        [r"test_timed.py::test_dawdles took 0\.\d\d s, over 0\.05 s: mark it @pytest\.mark\.slow"]
    )
    assert "test_marked took" not in result.stdout.str()
    assert "test_quick took" not in result.stdout.str()
    # Off by default outside CI (and at 0); 2 s by default where CI=true.
    assert pytester.runpytest("-k", "dawdles", "-p", "no:cacheprovider").ret == 0
    assert limit_s(None, {}) == 0 and limit_s(0.0, {"CI": "true"}) == 0
    assert limit_s(None, {"CI": "true"}) == 2.0 and limit_s(None, {"CI": "false"}) == 0
    assert limit_s(1.5, {}) == 1.5


def clock_reads(files: list[Path]) -> list[str]:
    """``path:line clock`` for every attribute or name in ``files`` that is one of :data:`CLOCKS`."""
    found = []
    for path in files:
        text = path.read_text(encoding="utf-8")
        if not any(clock in text for clock in CLOCKS):
            continue  # parse only the files that could hold one: the rule stays quick
        for node in ast.walk(ast.parse(text, filename=str(path))):
            if isinstance(node, ast.Attribute):
                name: str | None = node.attr
            elif isinstance(node, ast.alias):  # from time import perf_counter
                name = node.name
            else:
                name = getattr(node, "id", None)
            if name in CLOCKS:
                where = path.relative_to(REPO) if path.is_relative_to(REPO) else path
                found.append(f"{where}:{getattr(node, 'lineno', 0)} {name}")
    return found


def test_no_test_times_itself_against_a_bound(tmp_path: Path) -> None:
    timed = tmp_path / "test_timed.py"
    timed.write_text("import time\nfrom time import perf_counter\nt = time.process_time()\n")
    assert clock_reads([timed]) == [f"{timed}:2 perf_counter", f"{timed}:3 process_time"]
    tests = sorted((REPO / "tests").rglob("*.py"))
    found = [f for f in clock_reads(tests) if f.split(":")[0] not in CLOCK_ALLOWED]
    assert not found, (
        "tests read a clock (put the figure in a benchmark's table instead):\n" + "\n".join(found)
    )
    assert set(CLOCK_ALLOWED) <= {str(p.relative_to(REPO)) for p in tests}
