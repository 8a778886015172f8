"""The report's numbers for programs: one CSV per table and one JSON document.

The JSON holds every number the page shows (key figures by key, every table's
rows, each chart by file name and size) plus the raw exports the report was built
from (the plan, the projection); a CSV holds one table's rows under its column keys.
Values are plain numbers, NaN and infinities empty (CSV) or null (JSON).

A CSV text cell that a spreadsheet would run as a formula (one starting with ``=``,
``+``, ``-``, ``@``, a tab or a carriage return: a workload named ``=HYPERLINK(...)``)
is written with a ``'`` in front, as OWASP's CSV injection advice says
(:func:`csv_safe`); numbers are written as they are.
"""

from __future__ import annotations

import csv
import io
from typing import Any

from forecaster import __version__
from scaler.reports.document import Report, Section, Table, format_figure, json_value

FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""What a spreadsheet reads as the start of a formula (OWASP, "CSV Injection")."""


def csv_safe(value: Any) -> Any:
    """``value`` for a CSV cell: text that would start a formula gets a ``'`` in front, and
    a carriage return becomes a newline (which the writer quotes; a bare one it does not,
    and a reader would split the row there)."""
    if not isinstance(value, str):
        return value
    if value.startswith(FORMULA_STARTS):
        value = "'" + value
    return value.replace("\r\n", "\n").replace("\r", "\n")


def table_csv(table: Table) -> str:
    """One table as CSV: a header of column keys, then one line per row; text cells that
    would start a formula neutralised (:func:`csv_safe`)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([csv_safe(c.key) for c in table.columns])
    for r in table.rows:
        w.writerow(
            ["" if (v := json_value(r.get(c.key))) is None else csv_safe(v) for c in table.columns]
        )
    return buf.getvalue()


def to_json(report: Report) -> dict[str, Any]:
    """Every number the page shows, plus the raw exports; charts by file name and size."""
    return {
        "kind": report.kind,
        "lang": report.lang,
        "title": report.title,
        "subtitle": report.subtitle,
        "created_at": report.created_at,
        "generator": f"tiercast {__version__}",
        "key_figures": {f.key: json_value(f.value) for f in report.figures},
        "figures": [
            {
                "key": f.key,
                "label": f.label,
                "value": json_value(f.value),
                "unit": f.unit,
                "digits": f.digits,
                "text": format_figure(f, report.lang),
            }
            for f in report.figures
        ],
        "sections": [_section_json(s) for s in report.sections],
        "data": report.data,
    }


def _section_json(s: Section) -> dict[str, Any]:
    return {
        "key": s.key,
        "title": s.title,
        "paragraphs": s.paragraphs,
        "items": [{"text": text, "link": link} for text, link in s.items],
        "tables": [_table_json(tb) for tb in s.tables],
        "charts": [
            {
                "key": c.key,
                "title": c.title,
                "file": f"charts/{c.key}.png",
                "width": c.width,
                "height": c.height,
            }
            for c in s.charts
        ],
    }


def _table_json(tb: Table) -> dict[str, Any]:
    return {
        "key": tb.key,
        "title": tb.title,
        "columns": [{"key": c.key, "label": c.label} for c in tb.columns],
        "rows": [{c.key: json_value(r.get(c.key)) for c in tb.columns} for r in tb.rows],
    }
