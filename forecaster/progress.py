"""Progress bars on stderr for long commands, shown only to a person at a terminal.

A :class:`Progress` is one tqdm bar written to stderr, or nothing: it is off
unless stdout and stderr are both terminals, and also with ``--no-progress``,
with ``$TIERCAST_NO_PROGRESS`` set (to anything but ``0``), with JSON logs
(``--log-format json`` or ``$TIERCAST_LOG_FORMAT=json``) and on a ``TERM=dumb``
terminal. So pipes, CronJobs, CI logs and captured test output never see a
carriage return. tqdm is imported only when a bar is shown.

Each layer of the work says how much it will do (:meth:`Progress.add_total`) and
reports each unit done (:meth:`Progress.tick`): the command counts its own
stages, a library function such as the finance projection adds its scenarios.
Library code takes either a ``Progress`` or a plain ``tick`` callable, so the
forecaster stays free of terminal concerns. An off bar still counts, which lets
tests check that every declared unit is reported.
"""

from __future__ import annotations

import argparse
import contextlib
import contextvars
import os
import shutil
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import IO, Any, Protocol, TypeVar

T = TypeVar("T")

Tick = Callable[[], None]
"""A progress hook: called once per unit of work done."""

OFF_ENV = "TIERCAST_NO_PROGRESS"
"""Set to anything but ``0`` (or empty) to turn every bar off."""

REFRESH_S = 1.0
"""How often a shown bar redraws its elapsed time while one long step runs (seconds)."""


class Terminalish(Protocol):
    """What :func:`progress_wanted` asks of a stream."""

    def isatty(self) -> bool: ...


def progress_wanted(
    disabled: bool = False,
    log_format: str | None = None,
    streams: Iterable[Terminalish] | None = None,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Whether to draw bars: only for a person watching both stdout and stderr."""
    env = os.environ if environ is None else environ
    if disabled or env.get(OFF_ENV, "") not in ("", "0"):
        return False
    if (log_format or env.get("TIERCAST_LOG_FORMAT", "")).lower() == "json":
        return False
    if env.get("TERM", "") == "dumb":
        return False
    for stream in (sys.stdout, sys.stderr) if streams is None else streams:
        try:
            if not stream.isatty():
                return False
        except (AttributeError, ValueError):  # no isatty, or a closed stream
            return False
    return True


def add_progress_flag(p: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--no-progress`` for a long-running command."""
    p.add_argument(
        "--no-progress",
        action="store_true",
        help=f"no progress bar on stderr (also ${OFF_ENV}=1; bars show only on a terminal)",
    )


class Progress:
    """One bar on stderr, or nothing when off; counts units either way.

    Use as a context manager (the bar is closed and its line cleared on exit), or
    call :meth:`close`.
    """

    def __init__(self, enabled: bool, desc: str = "", total: int = 0, unit: str = "step") -> None:
        self.enabled = enabled
        self.n = 0
        self.total = total
        self._bar: Any = None
        self._stop = threading.Event()
        self._ticker: threading.Thread | None = None
        if enabled:
            from tqdm import tqdm

            # A terminal that reports no size (a bare pseudo-terminal) gets 80 x 24; tqdm
            # would draw nothing in zero columns.
            size = shutil.get_terminal_size((0, 0))
            sized = size.columns > 0 and size.lines > 0
            self._bar = tqdm(
                total=total or None,
                desc=desc,
                unit=unit,
                file=sys.stderr,
                dynamic_ncols=sized,
                ncols=None if sized else 80,
                nrows=None if sized else 24,
                leave=False,
            )
            # A single step can take half a minute (a 90-day plan's solver): redraw the
            # elapsed time meanwhile, so the bar does not look stuck.
            self._ticker = threading.Thread(target=self._refresh, daemon=True)
            self._ticker.start()

    @classmethod
    def for_args(
        cls, args: argparse.Namespace, desc: str, total: int = 0, unit: str = "step"
    ) -> Progress:
        """A bar for a command: on when :func:`progress_wanted` says so for its flags."""
        wanted = progress_wanted(
            disabled=bool(getattr(args, "no_progress", False)),
            log_format=getattr(args, "log_format", None),
        )
        return cls(wanted, desc, total, unit)

    def _refresh(self) -> None:
        while not self._stop.wait(REFRESH_S):
            # Blocking on tqdm's lock: a paused bar is redrawn when the pause ends. (Its
            # non-blocking form keeps the lock when it gets it.)
            with contextlib.suppress(Exception):  # a bar closed meanwhile
                self._bar.refresh()

    def add_total(self, n: int) -> None:
        """``n`` more units of work are coming."""
        self.total += n
        if self._bar is not None:
            self._bar.total = self.total
            self._bar.refresh()

    def update(self, n: int = 1, label: str | None = None) -> None:
        """``n`` units done; ``label`` names what runs next (shown after the bar)."""
        self.n += n
        if self._bar is not None:
            if label is not None:
                self._bar.set_postfix_str(label, refresh=False)
            self._bar.update(n)

    def tick(self) -> None:
        """One unit done (a :data:`Tick`)."""
        self.update(1)

    def describe(self, label: str) -> None:
        """Name what runs now, without counting a unit."""
        if self._bar is not None:
            self._bar.set_postfix_str(label)

    def track(self, items: Iterable[T], label: Callable[[T], str] | None = None) -> Iterator[T]:
        """Yield ``items``, one unit each, counted when the caller asks for the next."""
        for item in items:
            if label is not None:
                self.describe(label(item))
            yield item
            self.update(1)

    def write(self, text: str, file: IO[str] | None = None) -> None:
        """Print ``text`` (a line) to ``file`` (stderr by default), above the bar."""
        out = sys.stderr if file is None else file
        if self._bar is None:
            print(text, file=out, flush=True)
        else:
            self._bar.write(text, file=out)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """Clear the bar while the block prints freely to the terminal, then redraw it."""
        if self._bar is None:
            yield
            return
        with self._bar.external_write_mode(file=sys.stdout):
            yield

    def close(self) -> None:
        """Stop redrawing and clear the bar (what the command printed stays)."""
        self._stop.set()
        if self._bar is not None:
            if self._ticker is not None:
                self._ticker.join()
            self._bar.close()
            self._bar = None

    def __enter__(self) -> Progress:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


_ACTIVE: contextvars.ContextVar[Progress | None] = contextvars.ContextVar(
    "tiercast_progress", default=None
)


def active() -> Progress | None:
    """The bar a command made current with :func:`counting`, if any: work deep in a call
    (each signal a cycle forecasts) moves it without being handed it."""
    return _ACTIVE.get()


@contextlib.contextmanager
def counting(bar: Progress) -> Iterator[Progress]:
    """Make ``bar`` the :func:`active` one while the block runs."""
    token = _ACTIVE.set(bar)
    try:
        yield bar
    finally:
        _ACTIVE.reset(token)
