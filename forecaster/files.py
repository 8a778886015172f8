"""Reading input files within a bound, and writing output files atomically.

Writing: a new or regular file is written to a temporary file beside it, created
exclusively under a random name (never a fixed ``NAME.tmp`` that a planted link could
redirect), and renamed over it, so a reader never sees half a file. A path that is a
symbolic link, a device (``/dev/null``, ``/dev/stdout``) or a pipe is written through,
never renamed over: renaming would replace what the user pointed tiercast at with a plain
file. Where tiercast owns the folder and the names in it (the model store), ``owned=True``
refuses such a path instead of writing through it.

Reading: :func:`open_regular` and :func:`read_bounded` read only regular files, no larger
than a bound the caller names, and fail with one line naming the file. The file is opened
without blocking, so a FIFO is refused instead of waiting for a writer, and its type and
size are checked on the open descriptor, so nothing can be swapped in between.
"""

from __future__ import annotations

import errno
import os
import secrets
import stat
from pathlib import Path
from typing import BinaryIO

from forecaster.errors import BadInputError

_TEMP_ATTEMPTS = 16
"""Random temporary names tried before giving up (a clash is one in 2**64 per attempt)."""


def write_atomic(
    path: str | Path, data: str | bytes, parents: bool = False, owned: bool = False
) -> None:
    """Write ``data`` (text as UTF-8) to ``path``; with ``parents``, create missing folders.

    With ``owned`` (a path only tiercast writes), a link or special file at ``path`` is
    refused with :class:`OSError` and left alone, instead of being written through.
    """
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if parents:
        p.parent.mkdir(parents=True, exist_ok=True)
    if _written_through(p):
        if owned:
            raise OSError(errno.EEXIST, "refusing to write through a link or special file", str(p))
        with p.open("wb") as out:
            out.write(raw)
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


def _written_through(p: Path) -> bool:
    """A link, or an existing path that is not a regular file (a device, a pipe)."""
    try:
        mode = p.lstat().st_mode
    except FileNotFoundError:
        return False
    return stat.S_ISLNK(mode) or not stat.S_ISREG(mode)


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
