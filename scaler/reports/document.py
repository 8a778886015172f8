"""The report as a value: key figures, sections of paragraphs, tables and charts.

A :class:`Report` is built from what a cycle or a projection already computed
(:mod:`scaler.reports.capacity`, :mod:`scaler.reports.finance_report`) and written
by the writers (:mod:`scaler.reports.writing`) without being computed again. The
formatting of a cell or a key figure lives here, beside the values it formats, so
the HTML, the Markdown and the command line show the same text for the same number.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from scaler.reports.i18n import fmt_number


@dataclass(frozen=True)
class KeyFigure:
    """A headline number at the top of a report; ``key`` names it in the JSON and the HTML."""

    key: str
    label: str
    value: float
    unit: str = ""
    digits: int = 2


@dataclass(frozen=True)
class Column:
    """A table column: ``key`` of the rows' values, the heading the reader sees."""

    key: str
    label: str
    digits: int | None = None
    """Decimal places for a number column; None for text."""
    percent: bool = False
    """Show a fraction as a percentage."""


@dataclass
class Table:
    """Rows under columns; ``key`` names the CSV file and the table in the JSON."""

    key: str
    title: str
    columns: list[Column]
    rows: list[dict[str, Any]]


@dataclass(frozen=True)
class Chart:
    """A chart as PNG bytes and its pixel size; ``key`` names the file beside the Markdown."""

    key: str
    title: str
    png: bytes
    width: int
    height: int
    alt: str


@dataclass
class Section:
    """A part of a report; ``key`` is its anchor, the link target of summary items."""

    key: str
    title: str
    paragraphs: list[str] = field(default_factory=list)
    tables: list[Table] = field(default_factory=list)
    charts: list[Chart] = field(default_factory=list)
    items: list[tuple[str, str]] = field(default_factory=list)
    """Bullet points as (text, key of the section they link to); the summary's recommendations."""


@dataclass
class Report:
    """A whole report, ready for any writer."""

    kind: str
    """``report`` (capacity review) or ``finance`` (dry-run projection); names the files."""
    lang: str
    title: str
    subtitle: str
    created_at: str
    figures: list[KeyFigure]
    sections: list[Section]
    data: dict[str, Any] = field(default_factory=dict)
    """Raw exports (the plan, the projection) carried into the JSON."""

    def figure(self, key: str) -> KeyFigure:
        return next(f for f in self.figures if f.key == key)


def format_cell(value: Any, column: Column, lang: str) -> str:
    """A table cell as the reader sees it: '–' for a missing value, numbers per language."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "–"
    if column.digits is None or not isinstance(value, int | float | np.number):
        return str(value)
    if column.percent:
        return fmt_number(float(value) * 100.0, lang, column.digits) + "%"
    return fmt_number(float(value), lang, column.digits)


def format_figure(f: KeyFigure, lang: str) -> str:
    """A key figure with its unit, e.g. ``1,234.50 /h``."""
    text = fmt_number(f.value, lang, f.digits)
    return f"{text} {f.unit}".strip()


def json_value(v: Any) -> Any:
    """A cell or figure as JSON holds it: a plain Python number, None for NaN and infinities."""
    if isinstance(v, np.generic):
        v = v.item()
    if isinstance(v, float):
        return None if not math.isfinite(v) else v
    return v


def format_money(value: float, currency: str, lang: str, digits: int = 2) -> str:
    """An amount of money as a sentence shows it: ``1,234.50 USD`` (no label without a currency)."""
    return f"{fmt_number(value, lang, digits)} {currency}".strip()


def money_label(label: str, currency: str) -> str:
    """A money column's label with the configured currency, when there is one."""
    return f"{label}, {currency}" if currency else label


def frame_rows(frame: pd.DataFrame) -> list[dict[str, Any]]:
    """A frame's rows as table rows keyed by column name."""
    return [{str(k): v for k, v in r.items()} for r in frame.to_dict(orient="records")]
