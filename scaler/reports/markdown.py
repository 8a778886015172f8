"""The report as Markdown (``templates/document.md.j2``), charts as PNG files beside it.

Tables are GitHub-flavoured pipe tables with number columns right-aligned; a pipe
or a line break inside a cell is escaped so it cannot end the cell or the row.
"""

from __future__ import annotations

from scaler.reports.document import Column, KeyFigure, Report, format_cell, format_figure
from scaler.reports.i18n import t
from scaler.reports.templating import render_template


def md_cell(text: str) -> str:
    """``text`` safe inside a table cell or a link text."""
    return text.replace("|", "\\|").replace("\n", " ")


def render_markdown(report: Report, charts_dir: str | None = "charts") -> str:
    """The document, charts linked from ``charts_dir`` (left out when None)."""
    lang = report.lang

    def cell(value: object, column: Column) -> str:
        return format_cell(value, column, lang)

    def figure_text(f: KeyFigure) -> str:
        return format_figure(f, lang)

    def text(key: str, **params: object) -> str:
        return t(lang, key, **params)

    return render_template(
        "document.md.j2",
        report=report,
        charts_dir=charts_dir,
        t=text,
        cell=cell,
        figure_text=figure_text,
        md_cell=md_cell,
    )
