"""Writes that follow a fresh read: skipped once the target is reached, recomputed on 409.

Every pool provider and the MIG ConfigMap edits write this way: read the object, decide
from it, write carrying its ``resourceVersion``; a 409 Conflict (another writer got there
first) reads and decides again, a bounded number of times, through the one retry policy
(:mod:`forecaster.retrying`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from forecaster import retrying
from forecaster.retrying import Attempts
from scaler.actuation.kube.transport import KubeApiError, Session

_T = TypeVar("_T")


def direction_reached(decision: str, current: int, target: int) -> bool:
    """True when nothing is left to do: a scale-up never lowers, a scale-down never raises."""
    if decision == "scale-up":
        return current >= target
    if decision == "scale-down":
        return current <= target
    return current == target


def still_conflicting(path: str, retries: int) -> KubeApiError:
    """The error of a write that lost to another writer on every one of its re-reads."""
    return KubeApiError(
        f"{path}: still conflicting after {retries} re-reads; another writer keeps changing it",
        status=409,
        reason="Conflict",
    )


def _is_conflict(error: BaseException) -> bool:
    return isinstance(error, KubeApiError) and error.conflict


def _at_once(_seconds: float) -> None:
    """No wait between re-reads: a conflict means another writer got there first."""


def until_no_conflict(path: str, retries: int, attempt: Callable[[], _T]) -> _T:
    """Run ``attempt`` (a fresh read, then a write carrying its resourceVersion) again on
    each 409 Conflict, at most ``retries`` times more; other errors pass through."""
    tries = Attempts(
        retrying.RetryPolicy(retries, base_s=0.0, sleep=_at_once, retryable=_is_conflict)
    )
    for each in tries:
        with each:
            return attempt()
    raise still_conflicting(path, retries)


def create_or_update(
    session: Session,
    path: str,
    retries: int,
    create: Callable[[], list[str]],
    update: Callable[[dict[str, Any]], list[str]],
) -> list[str]:
    """Read ``path``: ``create()`` it when missing, else ``update(current)``; their notes.

    ``update`` decides from the object it is given and either returns ``[]`` (already
    as wanted) or writes with that object's resourceVersion; its 409 Conflict re-reads
    and decides again, at most ``retries`` times more (:func:`until_no_conflict`). The
    create runs outside those retries: a 409 AlreadyExists from it passes through, as
    any other error does.
    """

    def attempt() -> list[str] | None:
        try:
            current = session.get(path)
        except KubeApiError as exc:
            if not exc.not_found:
                raise
            return None
        return update(current)

    notes = until_no_conflict(path, retries, attempt)
    return create() if notes is None else notes
