"""Writing an output file: atomically where tiercast owns the path, through it where it does not.

A new or regular file is written to ``NAME.tmp`` beside it and renamed over it, so a reader
never sees half a file. A path that is a symbolic link, a device (``/dev/null``,
``/dev/stdout``) or a pipe is written through, never renamed over: renaming would replace
what the user pointed tiercast at with a plain file.
"""

from __future__ import annotations

import stat
from pathlib import Path


def write_atomic(path: str | Path, data: str | bytes, parents: bool = False) -> None:
    """Write ``data`` (text as UTF-8) to ``path``; with ``parents``, create missing folders."""
    p = Path(path)
    raw = data.encode("utf-8") if isinstance(data, str) else data
    if parents:
        p.parent.mkdir(parents=True, exist_ok=True)
    if _written_through(p):
        with p.open("wb") as out:
            out.write(raw)
        return
    tmp = p.with_name(p.name + ".tmp")
    tmp.write_bytes(raw)
    tmp.replace(p)


def _written_through(p: Path) -> bool:
    """A link, or an existing path that is not a regular file (a device, a pipe)."""
    try:
        mode = p.lstat().st_mode
    except FileNotFoundError:
        return False
    return stat.S_ISLNK(mode) or not stat.S_ISREG(mode)
