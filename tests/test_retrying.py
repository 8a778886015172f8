"""The one retry policy (forecaster/retrying.py): attempts, waits, what is retried, the hook."""

from __future__ import annotations

import random

import pytest

from forecaster.retrying import Attempts, Retry, RetryPolicy


class Flaky(Exception):
    """An error the tests' policies retry."""


def run(policy: RetryPolicy, outcomes: list[BaseException | str]) -> tuple[str | None, Attempts]:
    """Call through ``policy`` a function that fails or returns per ``outcomes``, in order."""
    calls = iter(outcomes)

    def call() -> str:
        outcome = next(calls)
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    tries = Attempts(policy)
    for attempt in tries:
        with attempt:
            return call(), tries
    return None, tries


def test_a_call_that_succeeds_after_failures_returns_its_value_after_doubling_waits() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=3, base_s=0.5, max_s=8, sleep=waits.append)
    value, _ = run(policy, [Flaky("a"), Flaky("b"), "ok"])
    assert value == "ok"
    assert waits == [0.5, 1.0]
    assert all(type(w) is float for w in waits)


def test_spent_attempts_end_the_loop_with_the_last_error_and_no_wait_after_it() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=2, base_s=1, max_s=1.5, sleep=waits.append)
    value, tries = run(policy, [Flaky("1"), Flaky("2"), Flaky("3"), "never"])
    assert value is None
    assert str(tries.last_error) == "3"
    assert waits == [1.0, 1.5]  # capped at max_s; nothing after the third attempt
    assert policy.attempts == 3


def test_an_error_the_policy_does_not_retry_passes_through_at_once() -> None:
    waits: list[float] = []
    policy = RetryPolicy(retries=5, sleep=waits.append, retryable=lambda e: isinstance(e, Flaky))
    with pytest.raises(KeyError):
        run(policy, [Flaky("x"), KeyError("y"), "never"])
    assert waits == [1.0]


def test_a_schedule_repeats_its_last_wait_and_a_hint_wins_capped() -> None:
    policy = RetryPolicy(schedule=(1, 4, 10), max_s=30, delay_hint=lambda e: None)
    assert [policy.delay(n) for n in range(5)] == [1, 4, 10, 10, 10]
    hinted = RetryPolicy(max_s=30, delay_hint=lambda e: float(str(e)))
    assert hinted.delay(0, Flaky("7")) == 7
    assert hinted.delay(0, Flaky("600")) == 30
    assert hinted.delay(2) == 4  # no error: the backoff


def test_jitter_scales_a_wait_into_half_to_whole() -> None:
    policy = RetryPolicy(base_s=2, max_s=100, jitter=True)
    random.seed(3)
    waits = [policy.delay(2) for _ in range(200)]
    assert all(4 <= w < 8 for w in waits)
    assert max(waits) - min(waits) > 1  # not a constant


def test_the_hook_hears_each_retry_before_its_wait() -> None:
    heard: list[Retry] = []
    policy = RetryPolicy(retries=2, base_s=0.25, sleep=lambda s: None, before_sleep=heard.append)
    run(policy, [Flaky("first"), Flaky("second"), "ok"])
    assert [(r.number, r.retries, str(r.error), r.delay_s) for r in heard] == [
        (1, 2, "first", 0.25),
        (2, 2, "second", 0.5),
    ]
