"""What every chart of the reports shares: size, colours, axes, legend, PNG bytes.

Charts are drawn with matplotlib's Agg backend through the object API (no pyplot
global state), at a fixed pixel size recorded with each chart, and saved without a
"Software" stamp so the same report gives the same bytes. Axis labels use the
report language's number separators and month names. The charts themselves are
in :mod:`scaler.reports.capacity_charts` and :mod:`scaler.reports.finance_charts`.
"""

from __future__ import annotations

import io
from typing import TYPE_CHECKING, TypeVar

import numpy as np
import pandas as pd

from scaler.reports.document import Chart
from scaler.reports.i18n import fmt_number, month_label, t

if TYPE_CHECKING:
    from matplotlib.axes import Axes
    from matplotlib.figure import Figure as MplFigure

CHART_SIZE_PX = (960, 360)
"""Width and height of every chart in pixels (the browser test checks them)."""
CHART_DPI = 96
TIER_COLORS = {"reserved": "#1b6ca8", "on-demand": "#e07b39", "spot": "#5aa55a"}
BAND_COLORS = {"low": "#9ecae1", "expected": "#3182bd", "high": "#08519c"}


_Frame = TypeVar("_Frame", pd.Series, pd.DataFrame)


def by_day(values: _Frame, how: str = "mean") -> _Frame:
    """``values`` (regularly sampled) aggregated by calendar day (``how``: ``mean`` or
    ``max``), a partial first or last day dropped: a day with fewer samples than a whole
    day holds at the median step would draw a point of a few samples (a lone midnight
    sample made the last point of a long forecast plunge)."""
    bins = values.resample("1D")
    out = bins.agg(how)
    if len(values.index) < 2 or out.empty:
        return out
    step_s = float(pd.Series(values.index).diff().dt.total_seconds().median())
    whole = 86400.0 / step_s if step_s > 0 else 1.0
    counts = np.asarray(bins.size(), dtype=float)
    keep = np.ones(len(out), dtype=bool)
    keep[0] = counts[0] >= whole - 1e-9
    keep[-1] = keep[-1] and counts[-1] >= whole - 1e-9
    return out[keep]


def new_figure() -> tuple[MplFigure, Axes]:
    """An empty chart of :data:`CHART_SIZE_PX` with a light grid."""
    from matplotlib.figure import Figure

    w, h = CHART_SIZE_PX
    fig = Figure(figsize=(w / CHART_DPI, h / CHART_DPI), dpi=CHART_DPI, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, alpha=0.3)
    return fig, ax


def render_chart(fig: MplFigure, key: str, title: str, alt: str) -> Chart:
    """The figure as PNG bytes with its pixel size."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    buf = io.BytesIO()
    # No "Software" stamp, so the same report gives the same bytes.
    canvas.print_png(buf, metadata={"Software": None})
    w, h = canvas.get_width_height()
    return Chart(key=key, title=title, png=buf.getvalue(), width=w, height=h, alt=alt)


def value_axis(ax: Axes, lang: str) -> None:
    """Tick labels with the language's thousands and decimal separators."""
    from matplotlib.ticker import FuncFormatter

    def label(x: float, _pos: int) -> str:
        return fmt_number(x, lang, 0 if abs(x) >= 100 or float(x).is_integer() else 1)

    ax.yaxis.set_major_formatter(FuncFormatter(label))


def time_axis(ax: Axes, lang: str) -> None:
    """Dates along x, day before month in Russian, in UTC."""
    import matplotlib.dates as mdates

    locator = mdates.AutoDateLocator(minticks=4, maxticks=10)
    day = "%d.%m" if lang == "ru" else "%m-%d"
    formatter = mdates.ConciseDateFormatter(
        locator,
        formats=["%Y", "%m", day, "%H:%M", "%H:%M", "%S"],
        zero_formats=["", "%Y", day, day, "%H:%M", "%H:%M"],
        offset_formats=["", "%Y", "%Y-%m", "%Y-%m-%d", "%Y-%m-%d", "%Y-%m-%d %H:%M"],
    )
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(formatter)
    ax.set_xlabel(t(lang, "axis_time_utc"))


def month_axis(ax: Axes, x: np.ndarray, months: list[str], lang: str, currency: str = "") -> None:
    """Months along ``x`` (in the language's words) against cost (in ``currency``)."""
    ax.set_xticks(x, [month_label(m, lang) for m in months], fontsize=8)
    ax.set_xlabel(t(lang, "axis_month"))
    label = t(lang, "axis_cost")
    ax.set_ylabel(f"{label}, {currency}" if currency else label)


def finish_chart(
    fig: MplFigure, ax: Axes, key: str, title: str, lang: str, ncols: int, alt: str | None = None
) -> Chart:
    """The end every chart shares: value-axis separators, legend, title; rendered as ``key``.

    The legend goes below the plot, outside the data (inside, it hid the band of a long
    forecast for weeks)."""
    value_axis(ax, lang)
    handles, labels = ax.get_legend_handles_labels()
    if handles:
        fig.legend(handles, labels, loc="outside lower center", fontsize=8, ncols=ncols)
    ax.set_title(title, fontsize=11)
    return render_chart(fig, key, title, title if alt is None else alt)
