"""Library warnings captured and summarised, so the one line that matters is not buried.

numpy's ``All-NaN slice encountered`` (a year-long gap gives a hundred of them),
statsmodels' ``ConvergenceWarning`` on ordinary fits, pandas' and scikit-learn's
``FutureWarning``: each is a library telling tiercast about a computation tiercast
already handles (a NaN stays NaN and is held; a fit that did not converge loses the
backtest). Inside :func:`summarised_warnings` they are counted instead of printed, and at
the end one line at INFO names each kind and how often it came (``--log-level INFO``
shows it). tiercast's own warnings (``UserWarning`` raised from ``forecaster`` or
``scaler``) are shown as before.
"""

from __future__ import annotations

import logging
import warnings
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

log = logging.getLogger(__name__)

_OURS = (
    str(Path(__file__).resolve().parent),
    str(Path(__file__).resolve().parent.parent / "scaler"),
)
_LIBRARY_KINDS = (RuntimeWarning, FutureWarning, DeprecationWarning, PendingDeprecationWarning)


def is_library_warning(category: type[Warning], filename: str) -> bool:
    """A warning a library raised about its own computation (see the module)."""
    if issubclass(category, _LIBRARY_KINDS):
        return True
    if category.__module__.split(".")[0] not in ("builtins", "forecaster", "scaler"):
        return True  # statsmodels' ConvergenceWarning, scikit-learn's, pandas'
    return not str(Path(filename).resolve()).startswith(_OURS)


def summary_line(counts: Counter[tuple[str, str]]) -> str:
    """``counts`` (kind, message) in one line, the most frequent first."""
    parts = [f"{n} x {kind} {message!r}" for (kind, message), n in counts.most_common(5)]
    if len(counts) > 5:
        parts.append(f"{len(counts) - 5} other kinds")
    return "library warnings (handled; summarised): " + "; ".join(parts)


@contextmanager
def summarised_warnings(logger: logging.Logger | None = None) -> Iterator[Counter[tuple[str, str]]]:
    """Count library warnings raised in the block instead of printing them, and log one
    summary line at INFO at the end; the counter is yielded. The warning filters are kept
    (an ignored warning is not counted)."""
    counts: Counter[tuple[str, str]] = Counter()
    with warnings.catch_warnings():
        shown = warnings.showwarning

        def show(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if is_library_warning(category, filename):
                text = str(message).strip().splitlines()[0] if str(message).strip() else ""
                counts[(category.__name__, text[:80])] += 1
            else:
                shown(message, category, filename, lineno, file, line)

        warnings.showwarning = show
        try:
            yield counts
        finally:
            if counts:
                (logger or log).info("%s", summary_line(counts))
