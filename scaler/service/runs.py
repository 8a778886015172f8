"""What every job of the service shares: its inputs, its outcome, the shutdown request
and the exit codes.

Exit codes of ``tiercast run`` (and the ``exit_code`` of every run record):
0 ``ok``; 1 ``held`` (a pool was held on stale or missing data: the plan was
made and is safe, but the data needs a look) or ``failed`` (a dependency was
down, an action failed, or the run record could not be written); 2 bad input or
config; 143 ``abandoned`` (SIGTERM before or while acting: remaining actions were
not sent). A CronJob's failed Job, or ``kube_job_status_failed``, catches 1, 2 and 143.

``now`` is ``--now`` when given, the wall clock when any signal is read from
Prometheus, and otherwise just after the newest sample (files and the demo).
"""

from __future__ import annotations

import logging
import signal
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NamedTuple

import pandas as pd

from forecaster.series import History
from scaler.config import Config, SignalConfig
from scaler.records import RunRecord
from scaler.service.cycle import CycleResult

log = logging.getLogger(__name__)

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT, EXIT_ABANDONED = 0, 1, 2, 143


class Inputs(NamedTuple):
    """What a job runs on: the config, the history, its time and where they came from."""

    config: Config
    history: History
    now: pd.Timestamp | None
    """None: use the job's clock (live data)."""
    source: str


def utc_now() -> pd.Timestamp:
    return pd.Timestamp.now(tz="UTC").tz_localize(None)


def live_signals(signals: Sequence[SignalConfig]) -> bool:
    """Whether any of ``signals`` is read from Prometheus (then ``now`` is the wall clock)."""
    return any(s.query is not None for s in signals)


class Stop:
    """A shutdown request: set by SIGTERM/SIGINT, checked before every action."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.signal: int | None = None

    def is_set(self) -> bool:
        return self.event.is_set()

    def set(self, signum: int | None = None) -> None:
        self.signal = signum
        self.event.set()

    def install(self) -> None:
        """Route SIGTERM and SIGINT here (only possible from the main thread)."""
        if threading.current_thread() is not threading.main_thread():
            return
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda signum, _frame: self._on_signal(signum))

    def _on_signal(self, signum: int) -> None:
        log.warning(
            "%s received: finishing the current step, no new actions",
            signal.Signals(signum).name,
        )
        self.set(signum)


@dataclass
class JobOutcome:
    """How a job run ended: what ``run`` exits with and ``serve`` reads for readiness."""

    job: str
    status: str
    exit_code: int
    record: RunRecord
    result: CycleResult | None = None
    error: BaseException | None = None
    plan_written: bool = False
    """The cycle wrote its plan file (nothing may say it did otherwise)."""
    recorded: bool = False
    """The run record was written (nothing may say it was otherwise)."""
