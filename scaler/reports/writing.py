"""Writing a report to a folder in the formats asked for.

``html`` is one self-contained page, ``md`` the Markdown with ``charts/*.png``
beside it, ``csv`` one file per table under ``csv/``, ``json`` every number in one
document. Each file is written to a temporary name and renamed, so a reader never
sees half a file.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path

from forecaster.errors import BadInputError
from forecaster.files import OutputError, write_atomic, write_error_text
from scaler.reports.csvjson import table_csv, to_json
from scaler.reports.document import Report
from scaler.reports.html import render_html
from scaler.reports.markdown import render_markdown

FORMATS: tuple[str, ...] = ("html", "md", "csv", "json")


def _write_html(report: Report, out: Path) -> list[Path]:
    p = out / f"{report.kind}.html"
    write_atomic(p, render_html(report).encode("utf-8"))
    return [p]


def _write_md(report: Report, out: Path) -> list[Path]:
    written = []
    charts = out / "charts"
    charts.mkdir(exist_ok=True)
    for s in report.sections:
        for c in s.charts:
            write_atomic(charts / f"{c.key}.png", c.png)
            written.append(charts / f"{c.key}.png")
    p = out / f"{report.kind}.md"
    write_atomic(p, render_markdown(report).encode("utf-8"))
    return [*written, p]


def _write_csv(report: Report, out: Path) -> list[Path]:
    written = []
    folder = out / "csv"
    folder.mkdir(exist_ok=True)
    for s in report.sections:
        for tb in s.tables:
            p = folder / f"{report.kind}-{tb.key}.csv"
            write_atomic(p, table_csv(tb).encode("utf-8"))
            written.append(p)
    return written


def _write_json(report: Report, out: Path) -> list[Path]:
    p = out / f"{report.kind}.json"
    text = json.dumps(to_json(report), indent=2, ensure_ascii=False, default=str)
    write_atomic(p, text.encode("utf-8"))
    return [p]


_WRITERS: dict[str, Callable[[Report, Path], list[Path]]] = {
    "html": _write_html,
    "md": _write_md,
    "csv": _write_csv,
    "json": _write_json,
}


def write_report(
    report: Report, out_dir: str | Path, formats: Sequence[str] = FORMATS, flag: str = "--out-dir"
) -> list[Path]:
    """Write the report in ``formats`` under ``out_dir``; return the files written.

    A file that cannot be written (a folder, a FIFO with no reader or a full device at
    its name) is one line naming ``flag`` and the file (:class:`OutputError`, exit 2)."""
    unknown = [f for f in formats if f not in FORMATS]
    if unknown:
        raise BadInputError(
            f"--format: {', '.join(unknown)} not known; expected some of {', '.join(FORMATS)}"
        )
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{flag}: cannot create folder {str(out)!r}: {exc.strerror}") from exc
    written: list[Path] = []
    try:
        for f in formats:
            written += _WRITERS[f](report, out)
    except OSError as exc:
        where = str(exc.filename or out)[:200]
        raise OutputError(f"{flag} {str(out)[:200]!r}: {where!r}: {write_error_text(exc)}") from exc
    return written
