"""Reading a JSON or YAML input document the one bounded way, and setting aside state that
cannot be read.

Every structured input tiercast reads from a file (the node list and the mig-parted
config of ``tiercast inventory``, the growth backtest cache, the drift state) goes through
:func:`read_document`:

* the path holds no NUL byte, and names a regular file (:func:`forecaster.files.read_bounded`:
  a FIFO, a device or a folder is refused without waiting, a file over the size bound
  is refused unread);
* the bytes decode as UTF-8, or the error says at which byte they do not;
* the text parses as JSON, else as YAML through a safe loader that counts its depth and
  its ``*alias`` references as it composes (a file nested past :data:`MAX_DEPTH` or a
  billion-laughs file stops there, never at Python's recursion limit);
* the parsed document holds at most :data:`MAX_VALUES` values and :data:`MAX_DEPTH` levels.

Each failure is one line naming the file (``what`` and the path), of the caller's error
class; :func:`shape_problem` turns a pydantic ``ValidationError`` into one line naming
the field, so a caller that validates the document's shape says which field is wrong.

State that tiercast wrote and reads back each cycle (a cache, a marker, a history
partition) must never fail every cycle once it is corrupt: :func:`set_aside` renames it
to ``NAME.bad`` (replacing an earlier one) with a warning, and the caller goes on as if
the file were absent, so the next write rebuilds it.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import stat
from pathlib import Path
from typing import Any

import numpy as np
import yaml

from forecaster.bounded_yaml import BoundedLoader
from forecaster.errors import BadInputError
from forecaster.files import read_bounded

MAX_DEPTH = 64
"""Most levels of nesting in a document (a Node is about 8 deep)."""
MAX_VALUES = 2_000_000
"""Most values in a parsed document (a list of 5,000 nodes holds about 1,000,000)."""
MAX_ALIASES = 64
"""Most YAML ``*alias`` references in one document (a node list or a mig-parted config
needs none; a billion-laughs file needs a few dozen)."""
SET_ASIDE_SUFFIX = ".bad"


def shown(path: str | Path) -> str:
    """A path as error lines show it: quoted, at most 200 characters, NUL bytes escaped."""
    return repr(str(path)[:200])


def check_path(path: str | Path, what: str, error: type[BadInputError] = BadInputError) -> None:
    """One line when ``path`` cannot name a file at all (a NUL byte, an empty path)."""
    text = os.fspath(path)
    if "\x00" in text:
        raise error(f"{what} {shown(text)}: the path holds a NUL byte")
    if not text:
        raise error(f"{what}: the path is empty")


def decode(
    raw: bytes, path: str | Path, what: str, error: type[BadInputError] = BadInputError
) -> str:
    """``raw`` as UTF-8 text (a leading byte-order mark dropped), or one line saying where not."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise error(
            f"{what} {shown(path)} is not UTF-8 text (byte {exc.start}: "
            f"{raw[exc.start : exc.start + 1]!r})"
        ) from None


class _BoundedLoader(BoundedLoader):
    """``yaml.SafeLoader`` that stops at :data:`MAX_DEPTH` levels and :data:`MAX_ALIASES` aliases."""

    max_depth = MAX_DEPTH
    max_aliases = MAX_ALIASES

    def over_limit(self, problem: str) -> Exception:
        return _Limit(problem)


class _Limit(Exception):
    """A document over one of the bounds."""


def _over_bounds(data: Any) -> str | None:
    """What bound ``data`` is over (depth, values), if any; walks without recursion."""
    budget = MAX_VALUES
    stack: list[tuple[Any, int]] = [(data, 1)]
    while stack:
        item, depth = stack.pop()
        budget -= 1
        if budget < 0:
            return f"more than {MAX_VALUES} values"
        if depth > MAX_DEPTH:
            return f"nested deeper than {MAX_DEPTH} levels"
        if isinstance(item, dict):
            stack.extend((v, depth + 1) for v in item.values())
        elif isinstance(item, list):
            stack.extend((v, depth + 1) for v in item)
    return None


def parse_document(
    text: str,
    path: str | Path,
    what: str,
    error: type[BadInputError] = BadInputError,
    json_only: bool = False,
) -> Any:
    """``text`` parsed as JSON, else (unless ``json_only``) as YAML, within the bounds; one
    line otherwise."""
    data: Any
    try:
        data = json.loads(text)
    except RecursionError:
        raise error(f"{what} {shown(path)}: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError as exc:
        if json_only:
            raise error(f"{what} {shown(path)} is not JSON: {str(exc)[:120]}") from None
        data = _yaml(text, path, what, error)
    problem = _over_bounds(data)
    if problem is not None:
        raise error(f"{what} {shown(path)}: {problem}")
    return data


def _flow_depth(text: str) -> int:
    """The deepest nesting of ``[``/``{`` in ``text``, quotes not told apart: YAML's scanner
    reads a whole deep flow collection before the composer sees its depth, so a file of
    ``[`` x 5000 is refused here instead (no node list or config nests brackets 64 deep,
    quoted or not)."""
    raw = np.frombuffer(text.encode("utf-8", "surrogatepass"), dtype=np.uint8)
    steps = np.zeros(len(raw), dtype=np.int32)
    steps[(raw == ord("[")) | (raw == ord("{"))] = 1
    steps[(raw == ord("]")) | (raw == ord("}"))] = -1
    return int(np.cumsum(steps).max(initial=0))


def _yaml(text: str, path: str | Path, what: str, error: type[BadInputError]) -> Any:
    if _flow_depth(text) > MAX_DEPTH:
        raise error(f"{what} {shown(path)}: nested deeper than {MAX_DEPTH} levels")
    try:
        return yaml.load(text, Loader=_BoundedLoader)  # a SafeLoader: no tag runs code
    except _Limit as exc:
        raise error(f"{what} {shown(path)}: {exc}") from None
    except RecursionError:
        raise error(f"{what} {shown(path)}: nested deeper than {MAX_DEPTH} levels") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" line {mark.line + 1}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise error(
            f"{what} {shown(path)}{where} is neither JSON nor YAML: "
            f"{' '.join(str(problem).split())[:120]}"
        ) from None


def read_document(
    path: str | Path,
    max_bytes: int,
    what: str = "file",
    error: type[BadInputError] = BadInputError,
    follow: bool = True,
    json_only: bool = False,
) -> Any:
    """The JSON or YAML document in the regular file at ``path`` (see the module docstring).

    ``what`` names the file in the error (``"--nodes"``), ``error`` is the class raised
    (one line); without ``follow`` a symbolic link at ``path`` is refused too; with
    ``json_only`` (state tiercast wrote itself) text that is not JSON is refused.
    """
    check_path(path, what, error)
    raw = read_bounded(path, max_bytes, what, error, follow)
    return parse_document(decode(raw, path, what, error), path, what, error, json_only)


def shape_problem(exc: Any, prefix: str = "") -> str:
    """The first problem of a pydantic ``ValidationError`` as ``field.path: message``."""
    errors = exc.errors(include_url=False) if hasattr(exc, "errors") else []
    if not errors:
        return f"{prefix}: {' '.join(str(exc).split())[:160]}"
    first = errors[0]
    where = prefix
    for part in first.get("loc", ()):
        where += f"[{part}]" if isinstance(part, int) else (f".{part}" if where else str(part))
    given = first.get("input")
    seen = "" if isinstance(given, dict | list) else f" (got {str(given)[:40]!r})"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{where}: {first.get('msg', 'invalid')}{seen}{more}"


def set_aside(path: str | Path, why: str, log: logging.Logger) -> Path | None:
    """Rename the unusable state file ``path`` to ``NAME.bad`` (replacing an earlier one)
    with one warning, so the next cycle rebuilds it; the new path, or None when it was
    not renamed (a link, folder or special file is never moved: it is only ignored, with
    the same warning, and the owned-path writer refuses to write through it)."""
    p = Path(path)
    target = p.with_name(p.name + SET_ASIDE_SUFFIX)
    # One line of at most ~300 characters: the path once, the reason without it.
    why = str(why).replace(shown(p), "").replace(str(p), "")
    why = " ".join(why.split()).replace(" :", ":")[:90]
    where = str(p) if len(str(p)) <= 80 else "..." + str(p)[-77:]
    try:
        if not stat.S_ISREG(p.lstat().st_mode):
            # A link, folder or special file someone put there is left as it is.
            raise OSError(errno.EPERM, "only a regular file is moved", str(p))
        # rename moves the directory entry itself: a link at the target is never followed.
        os.replace(p, target)
    except OSError as exc:
        log.warning("%s unusable (%s); ignored, not set aside: %s", where, why, exc.strerror or exc)
        return None
    log.warning("%s unusable (%s); set aside as %s, rebuilt", where, why, SET_ASIDE_SUFFIX)
    return target
