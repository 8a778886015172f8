"""Errors named by what the caller should do.

``BadInputError`` means the input (a file, a flag, a config field) is wrong and
retrying will not help: the CLI prints its one-line message and exits 2.
``TemporaryError`` means the world misbehaved (a server down, a timeout) and the
next cycle may succeed: the CLI exits 1. Library exceptions are wrapped in these
with the cause chained, so callers never need to know which client raised.
"""

from __future__ import annotations


class TiercastError(Exception):
    """Base of every error tiercast raises on purpose."""

    exit_code: int = 1


class BadInputError(TiercastError, ValueError):
    """Input is malformed; one line names what, where, and what was expected."""

    exit_code = 2


class DataError(BadInputError):
    """A history file or frame cannot be read as a time series."""


class TemporaryError(TiercastError):
    """A dependency failed in a way the next attempt may not repeat."""

    exit_code = 1

    def __init__(self, message: str, delay_s: float | None = None) -> None:
        super().__init__(message)
        self.delay_s = delay_s


class NotFittedError(TiercastError, AttributeError):
    """An estimator was asked to predict before ``fit``."""


class StaleDataError(TemporaryError):
    """The newest sample is older than the staleness limit; never scale down on it."""
