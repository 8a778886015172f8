"""Reading input files within a bound, and writing output files atomically.

Writing: a new or regular file is written to a temporary file beside it, created
exclusively under a random name (never a fixed ``NAME.tmp`` that a planted link could
redirect), and renamed over it, so a reader never sees half a file. A path that is a
symbolic link, a device (``/dev/null``, ``/dev/stdout``) or a pipe is written through,
never renamed over: renaming would replace what the user pointed tiercast at with a plain
file. It is opened without blocking, so a FIFO with no reader is refused (``ENXIO``) and a
reader that stops reading ends the write after :data:`WRITE_STALL_S`, never a hang. A
folder at the path is refused before anything is written. Where tiercast owns the path
(the model store, the history store, the forecast cache, the default plan file),
``owned=True`` refuses a link or special file at it instead of writing through it, and
``owned_folder=True`` a link at a folder tiercast names itself (a history-store signal's). :func:`write_output` is the one writer of every output a flag or the
config names: any failure (a full device, a folder, a FIFO with no reader, a planted
link) is one line naming the flag (:class:`OutputError`, exit 2).

Reading: :func:`open_regular` and :func:`read_bounded` read only regular files, no larger
than a bound the caller names, and fail with one line naming the file. The file is opened
without blocking, so a FIFO is refused instead of waiting for a writer, and its type and
size are checked on the open descriptor, so nothing can be swapped in between.
"""

from __future__ import annotations

import errno
import logging
import os
import secrets
import select
import stat
import time
from pathlib import Path
from typing import BinaryIO

from forecaster.errors import BadInputError

log = logging.getLogger(__name__)

_TEMP_ATTEMPTS = 16
"""Random temporary names tried before giving up (a clash is one in 2**64 per attempt)."""


WRITE_STALL_S = 30.0
"""Seconds a write through a pipe or device may wait for room before it is given up."""


class OutputError(BadInputError):
    """An output could not be written; one line naming the flag or setting (exit 2)."""


def write_atomic(
    path: str | Path,
    data: str | bytes,
    parents: bool = False,
    owned: bool = False,
    owned_folder: bool = False,
) -> None:
    """Write ``data`` (text as UTF-8) to ``path``; with ``parents``, create missing folders.

    With ``owned`` (a path only tiercast writes), a link or special file at ``path`` is
    refused with :class:`OSError` and left alone, instead of being written through; with
    ``owned_folder`` (a folder tiercast names and creates itself, as the history store's
    folder per signal), a link at the folder is refused too. (A folder the user names,
    such as the model store's, may be a link.) A folder at ``path`` is
    :class:`IsADirectoryError`; a FIFO with no reader is ``ENXIO``; a full device is
    ``ENOSPC`` (no temporary file left behind).
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if parents:
        p.parent.mkdir(parents=True, exist_ok=True)
    if owned_folder and p.parent.is_symlink():
        raise OSError(errno.ELOOP, "refusing to write into a linked folder", str(p.parent))
    mode = _mode(p)
    if mode is not None and stat.S_ISDIR(mode):
        raise IsADirectoryError(errno.EISDIR, "is a directory", str(p))
    if mode is not None and (stat.S_ISLNK(mode) or not stat.S_ISREG(mode)):
        if owned:
            raise OSError(errno.EEXIST, "refusing to write through a link or special file", str(p))
        _write_through(p, raw)
        return
    fd, tmp = _create_temp(p)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(raw)
        # rename replaces the directory entry itself: a link raced in at ``p`` is replaced,
        # never followed.
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_output(
    path: str | Path, data: str | bytes, flag: str, parents: bool = True, owned: bool = False
) -> None:
    """:func:`write_atomic`, every failure one line naming ``flag`` (:class:`OutputError`).

    ``flag`` is what the user set (``"--plan-out"``, ``"service.plan_out"``); ``owned``
    for a path tiercast chose itself (the default plan file in the state folder).
    """
    try:
        write_atomic(path, data, parents=parents, owned=owned)
    except OSError as exc:
        raise OutputError(f"{flag} {str(path)[:200]!r}: {write_error_text(exc)}") from exc


def check_output(path: str | Path, flag: str) -> None:
    """Refuse, before any work, an output path that can never be written: a folder, or
    a path under a file. Nothing is created."""
    p = Path(path)
    mode = _mode(p, follow=True)
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(f"{flag} {str(p)[:200]!r} is a directory; expected a file")
    for parent in p.parents:
        parent_mode = _mode(parent, follow=True)
        if parent_mode is None:
            continue
        if not stat.S_ISDIR(parent_mode):
            raise OutputError(f"{flag} {str(p)[:200]!r}: {str(parent)[:200]!r} is not a folder")
        break


def check_output_folder(path: str | Path, flag: str) -> None:
    """Refuse, before any work, a folder argument that is something else (a file, a FIFO,
    a device) or lies under a file. Nothing is created."""
    p = Path(path)
    for candidate in (p, *p.parents):
        mode = _mode(candidate, follow=True)
        if mode is None:
            continue
        if not stat.S_ISDIR(mode):
            what = "it" if candidate == p else repr(str(candidate)[:200])
            kind = "a file" if stat.S_ISREG(mode) else _kind(mode)
            raise OutputError(f"{flag} {str(p)[:200]!r}: {what} is {kind}; expected a folder")
        return


_WARNED_WRITABLE: set[str] = set()


def world_writable(path: str | Path) -> bool:
    """Whether the folder at ``path`` (followed) exists and anyone may write in it: anyone
    could then plant a link or a file where tiercast keeps its state."""
    mode = _mode(Path(path), follow=True)
    return mode is not None and stat.S_ISDIR(mode) and bool(mode & stat.S_IWOTH)


def warn_world_writable(path: str | Path, what: str) -> bool:
    """Log one warning (once per folder and process) when ``path`` is world-writable;
    whether it is. ``what`` names the folder (``"state folder"``)."""
    if not world_writable(path):
        return False
    key = str(Path(path).resolve())
    if key not in _WARNED_WRITABLE:
        _WARNED_WRITABLE.add(key)
        log.warning(
            "%s %r is world-writable: anyone on this machine can plant files or links in it; "
            "chmod o-w it or pick a private folder",
            what,
            str(path)[:200],
        )
    return True


def write_error_text(exc: OSError) -> str:
    """The reason of a failed write (:func:`write_atomic`'s ``OSError``), in words."""
    if exc.errno == errno.ENXIO:
        return "is a FIFO with no reader; nothing was written"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device; nothing usable was written"
    if exc.errno == errno.EISDIR:
        return "is a directory; expected a file"
    if exc.errno in (errno.EEXIST, errno.ELOOP) and exc.strerror and "refusing" in exc.strerror:
        return f"{exc.strerror} at a name tiercast owns; remove it or name another path"
    if exc.errno == errno.ETIMEDOUT:
        return f"the reader took no data for {WRITE_STALL_S:g} s; the write was given up"
    if exc.errno == errno.ENOTDIR:
        return "a part of the path is not a folder"
    return str(exc.strerror or exc)


def _mode(p: Path, follow: bool = False) -> int | None:
    """``p``'s file type and mode (of the link itself unless ``follow``), None if absent."""
    try:
        return (p.stat() if follow else p.lstat()).st_mode
    except (FileNotFoundError, NotADirectoryError):
        return None


def _write_through(p: Path, raw: bytes) -> None:
    """Write ``raw`` through the link, device or pipe at ``p``, never blocking for ever."""
    flags = os.O_WRONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_CREAT | os.O_TRUNC
    fd = os.open(p, flags, 0o666)
    try:
        if stat.S_ISDIR(os.fstat(fd).st_mode):  # pragma: no cover - open refuses folders
            raise IsADirectoryError(errno.EISDIR, "is a directory", str(p))
        view = memoryview(raw)
        stalled_since = time.monotonic()
        while view:
            try:
                sent = os.write(fd, view)
            except BlockingIOError:
                sent = 0
            if sent:
                view = view[sent:]
                stalled_since = time.monotonic()
                continue
            left = WRITE_STALL_S - (time.monotonic() - stalled_since)
            if left <= 0 or not select.select([], [fd], [], left)[1]:
                raise OSError(errno.ETIMEDOUT, "the reader took no data", str(p))
    finally:
        os.close(fd)


def _create_temp(p: Path) -> tuple[int, Path]:
    """A new file beside ``p`` under a random name, created exclusively and never through a link.

    The mode is 0o666 less the umask, as a plain ``open`` would give the final file.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    for _ in range(_TEMP_ATTEMPTS):
        tmp = p.with_name(f"{p.name}.{secrets.token_hex(8)}.tmp")
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
    raise FileExistsError(errno.EEXIST, "no free temporary name", str(p))


def _kind(mode: int) -> str:
    """What a non-regular file is, for the error line."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISLNK, "a symbolic link"),
    ):
        if test(mode):
            return name
    return "not a plain file"


def open_regular(
    path: str | Path,
    max_bytes: int,
    what: str = "file",
    error: type[BadInputError] = BadInputError,
    follow: bool = True,
) -> BinaryIO:
    """``path`` opened for binary reading, once it is known to be a regular file of at most ``max_bytes``.

    ``what`` names the file in the error (``"config file"``); ``error`` is the class raised
    (one line). Without ``follow``, a symbolic link at ``path`` is refused too. The caller
    closes the handle, and should still stop reading at ``max_bytes``: a file may grow.
    """
    shown = f"{what} {str(path)[:200]!r}"
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | (0 if follow else os.O_NOFOLLOW)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise error(f"{shown} does not exist") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise error(f"{shown} is a symbolic link; expected a regular file") from exc
        raise error(f"{shown} cannot be read: {exc.strerror or exc}") from exc
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise error(f"{shown} is {_kind(info.st_mode)}; expected a regular file")
        if info.st_size > max_bytes:
            raise error(f"{shown} is {info.st_size} bytes; at most {max_bytes} are read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_bounded(
    path: str | Path,
    max_bytes: int,
    what: str = "file",
    error: type[BadInputError] = BadInputError,
    follow: bool = True,
) -> bytes:
    """The bytes of the regular file at ``path``, refused (one line) when over ``max_bytes``.

    See :func:`open_regular` for ``what``, ``error`` and ``follow``. A file that grows past
    the bound while it is read is refused as well, after reading at most one byte more.
    """
    with open_regular(path, max_bytes, what, error, follow) as handle:
        try:
            raw = handle.read(max_bytes + 1)
        except OSError as exc:
            raise error(
                f"{what} {str(path)[:200]!r} cannot be read: {exc.strerror or exc}"
            ) from exc
    if len(raw) > max_bytes:
        raise error(
            f"{what} {str(path)[:200]!r} is over {max_bytes} bytes; at most {max_bytes} are read"
        )
    return raw
