"""Retries with backoff: one policy value and one loop for every retried call (on tenacity).

A :class:`RetryPolicy` says how often to retry, how long to wait before each retry, which
errors deserve one, how to sleep and what to log before a wait; :class:`Attempts` runs the
attempts through ``tenacity``. Every retried call in tiercast has the same shape::

    tries = Attempts(policy)
    for attempt in tries:
        with attempt:
            return call()
    raise SomeError(f"{tries.last_error} (gave up after {policy.attempts} attempts)")

An error the policy does not retry leaves the ``for`` unchanged, at once; when the attempts
are spent the loop just ends, and the caller says so in its own words, with the last
retryable error in ``tries.last_error``. Code in the loop before ``with attempt:`` runs
before every attempt, after the wait (a re-check before a retry).

The wait before retry ``n`` (0 for the first): the delay the error itself names when
``delay_hint`` finds one (a Retry-After header, say), capped at ``max_s``; otherwise
``schedule[n]`` when a schedule is given (its last entry repeats), else
``base_s * 2**n`` capped at ``max_s``; with ``jitter`` a backoff wait is scaled by a
random factor in [0.5, 1).

``forecaster`` holds it because it is the lower package: ``scaler`` retries through it too.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import NamedTuple

import tenacity


class Retry(NamedTuple):
    """What a ``before_sleep`` hook is told: a retry is about to be made, after a wait."""

    number: int
    """This retry's number: 1 for the first."""
    retries: int
    """The retries the policy allows in all."""
    error: BaseException
    """The error of the attempt that just failed."""
    delay_s: float
    """The wait before this retry, in seconds."""


def any_error(error: BaseException) -> bool:
    """The default ``retryable``: every ``Exception`` (never an interrupt or an exit)."""
    return isinstance(error, Exception)


def no_hint(error: BaseException) -> float | None:
    """The default ``delay_hint``: no error names its own delay."""
    return None


@dataclass(frozen=True)
class RetryPolicy:
    """How many retries, the wait before each, which errors get one, how to sleep and log."""

    retries: int = 3
    """Retries after the first attempt: ``retries + 1`` attempts in all."""
    base_s: float = 1.0
    """The backoff's first wait; it doubles before each next retry."""
    max_s: float = 30.0
    """The longest wait, a hinted one included."""
    sleep: Callable[[float], object] = time.sleep
    """How to wait (tests pass a recorder, services an interruptible wait)."""
    jitter: bool = False
    """Scale each backoff wait by a random factor in [0.5, 1), so that several replicas
    (or cycles) do not retry in step."""
    schedule: tuple[float, ...] = ()
    """Fixed waits before the 1st, 2nd, ... retry instead of the doubling; the last repeats."""
    retryable: Callable[[BaseException], bool] = any_error
    """Whether an error deserves a retry; any other error passes through unchanged."""
    delay_hint: Callable[[BaseException], float | None] = no_hint
    """The wait an error names itself (a server's Retry-After), or None for the backoff."""
    before_sleep: Callable[[Retry], None] | None = None
    """Called before each wait: where the retry's log line is written."""

    @property
    def attempts(self) -> int:
        """Attempts in all, the first included."""
        return self.retries + 1

    def delay(self, retry: int, error: BaseException | None = None) -> float:
        """The wait before retry number ``retry`` (0 for the first), after ``error``."""
        hinted = None if error is None else self.delay_hint(error)
        if hinted is not None:
            return min(self.max_s, hinted)
        if self.schedule:
            wait = self.schedule[min(retry, len(self.schedule) - 1)]
        else:
            wait = min(self.max_s, self.base_s * 2**retry)
        return wait * (0.5 + random.random() / 2) if self.jitter else wait


class Attempts:
    """The attempts of one retried call under ``policy``; iterate, and make each one
    inside ``with attempt:`` (see the module's docstring)."""

    def __init__(self, policy: RetryPolicy) -> None:
        self.policy = policy
        self.last_error: BaseException | None = None
        """The error of the latest failed attempt that the policy retries."""
        self._retrying = tenacity.Retrying(
            stop=tenacity.stop_after_attempt(policy.attempts),
            wait=self._wait,
            retry=tenacity.retry_if_exception(policy.retryable),
            after=self._note_error,
            before_sleep=self._before_sleep,
            sleep=self._sleep,
            # Spent: the loop ends and the caller raises (or returns) what it reports.
            retry_error_callback=lambda _state: None,
        )

    def __iter__(self) -> Iterator[tenacity.AttemptManager]:
        return iter(self._retrying)

    def _note_error(self, state: tenacity.RetryCallState) -> None:
        if state.outcome is not None:
            self.last_error = state.outcome.exception()

    def _wait(self, state: tenacity.RetryCallState) -> float:
        # tenacity asks for the wait before it checks the stop; none follows the last
        # attempt (and no random number is drawn for it).
        if state.attempt_number >= self.policy.attempts:
            return 0.0
        return self.policy.delay(state.attempt_number - 1, self.last_error)

    def _before_sleep(self, state: tenacity.RetryCallState) -> None:
        if self.policy.before_sleep is not None and self.last_error is not None:
            retry = Retry(
                state.attempt_number, self.policy.retries, self.last_error, state.upcoming_sleep
            )
            self.policy.before_sleep(retry)

    def _sleep(self, seconds: float) -> None:
        # tenacity hands a float subclass; callers and their tests see a plain float.
        self.policy.sleep(float(seconds))
