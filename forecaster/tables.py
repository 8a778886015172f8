"""Aligned plain-text tables: the one way tiercast prints a table, in ``forecaster`` and
``scaler`` alike, through ``tabulate``.

Every table is the same shape: columns separated by two spaces, each padded to its widest
cell, numbers right-aligned where the caller says so, trailing blanks dropped, and an
optional indent. Cells are printed as given (no number parsing: a caller formats its own
numbers), so a table's bytes depend only on its cells.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence

from tabulate import tabulate


def aligned(
    rows: Sequence[Sequence[str]], right: Collection[int] = (), indent: str = ""
) -> list[str]:
    """``rows`` (the header first, if any) as aligned lines.

    Columns are separated by two spaces; the columns whose index is in ``right`` are
    right-aligned, the others left-aligned; every line starts with ``indent`` and has no
    trailing blanks.
    """
    if not rows:
        return []
    width = max(len(r) for r in rows)
    text = tabulate(
        [list(r) + [""] * (width - len(r)) for r in rows],
        tablefmt="plain",
        colalign=["right" if i in right else "left" for i in range(width)],
        disable_numparse=True,
        preserve_whitespace=True,
    )
    return [(indent + line).rstrip() for line in text.split("\n")]
