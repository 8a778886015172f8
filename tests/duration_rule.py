"""The fast tier's time rule: an unmarked test whose call phase takes over 2 s fails the run.

On by default where ``CI`` is ``true`` (or ``1``), and wherever ``--max-unmarked-s=SECONDS``
is given; ``--max-unmarked-s=0`` turns it off. Each offender gets one line at the end of
the run, naming the test, its time and ``mark it @pytest.mark.slow``; the tests themselves
keep their outcome and the run's exit status becomes 1. Only the call phase counts: a
session fixture that starts a server once (a setup phase) is fine in a fast test.
Registered by ``tests/conftest.py``; works under pytest-xdist (the workers tag the
reports, the controller counts them).
"""

from __future__ import annotations

import os
from collections.abc import Generator, Mapping

import pytest

DEFAULT_LIMIT_S = 2.0
_KEY = "unmarked_over_limit_s"


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--max-unmarked-s",
        type=float,
        default=None,
        metavar="SECONDS",
        help="fail the run when a test not marked slow takes longer than this in its call "
        f"phase (default {DEFAULT_LIMIT_S:g} where CI=true, else off; 0 turns it off)",
    )


def limit_s(given: float | None, environ: Mapping[str, str] = os.environ) -> float:
    """The limit in force (0: the rule is off) for ``--max-unmarked-s`` and the environment."""
    if given is not None:
        return max(float(given), 0.0)
    on_ci = environ.get("CI", "").strip().lower() in ("true", "1", "yes")
    return DEFAULT_LIMIT_S if on_ci else 0.0


def pytest_configure(config: pytest.Config) -> None:
    limit = limit_s(config.getoption("--max-unmarked-s"))
    if limit:
        config.pluginmanager.register(DurationRule(limit), "tiercast-duration-rule")


class DurationRule:
    """The rule at one limit, for one run."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.offenders: list[tuple[str, float]] = []

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_makereport(
        self, item: pytest.Item, call: pytest.CallInfo[None]
    ) -> Generator[None, pytest.TestReport, None]:
        outcome = yield
        report = outcome.get_result()
        if (
            report.when == "call"
            and report.duration > self.limit
            and item.get_closest_marker("slow") is None
        ):
            report.user_properties.append((_KEY, self.limit))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if any(name == _KEY for name, _ in report.user_properties):
            self.offenders.append((report.nodeid, report.duration))

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        ok = (pytest.ExitCode.OK, pytest.ExitCode.NO_TESTS_COLLECTED)
        if self.offenders and session.exitstatus in ok:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.offenders:
            return
        terminalreporter.section(f"unmarked tests over {self.limit:g} s", sep="=", red=True)
        for nodeid, seconds in self.offenders:
            terminalreporter.write_line(
                f"{nodeid} took {seconds:.2f} s, over {self.limit:g} s: mark it @pytest.mark.slow"
            )
