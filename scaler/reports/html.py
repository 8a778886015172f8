"""The report as one self-contained HTML page (``templates/document.html.j2``).

Charts are embedded as base64 PNG and a Content Security Policy forbids loading
anything, so the page opens offline and cannot leak. Each key figure carries its
raw value in ``data-value`` (the number the JSON export holds), so a test or a
reader can check that the page says what the export says.
"""

from __future__ import annotations

import base64

from forecaster import __version__
from scaler.reports.document import (
    Column,
    KeyFigure,
    Report,
    format_cell,
    format_figure,
    json_value,
)
from scaler.reports.i18n import t
from scaler.reports.templating import render_template


def render_html(report: Report) -> str:
    """The page, every text escaped; it ends with ``</html>`` and no newline."""
    lang = report.lang

    def cell(value: object, column: Column) -> str:
        return format_cell(value, column, lang)

    def figure_text(f: KeyFigure) -> str:
        return format_figure(f, lang)

    def data_value(f: KeyFigure) -> str:
        return repr(json_value(f.value))

    def text(key: str, **params: object) -> str:
        return t(lang, key, **params)

    return render_template(
        "document.html.j2",
        report=report,
        version=__version__,
        t=text,
        cell=cell,
        figure_text=figure_text,
        data_value=data_value,
        base64=lambda png: base64.b64encode(png).decode("ascii"),
    )
