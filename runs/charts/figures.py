"""What every figure shares: colours, the layout and template, and the dict plotly.js draws."""

import functools
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypedDict

import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ("#2f6fdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c")
# After every colour has been used once, the next round of traces takes the next dash,
# marker and bar pattern, so a chart of 16 cells does not draw cell 9 as cell 1.
DASHES = ("solid", "dash", "dot", "dashdot")
SYMBOLS = ("circle", "square", "triangle-up", "cross")
# No "x": a crossed bar marks a point with validity warnings.
BAR_PATTERNS = ("", "/", ".", "\\")


TEMPLATE = "plotly_white"


# A figure, trace, layout or axis in plotly's figure schema: JSON that plotly.js checks.
PlotlyJson = dict[str, object]


class PlotlyFigure(TypedDict):
    """A figure as plotly's `to_plotly_json` gives it."""

    data: list[PlotlyJson]
    layout: PlotlyJson


# No plotly logo and no button that uploads a figure to plotly's cloud (Chart Studio):
# the lab is private, and the lab's own Share is the way to show a chart to others.
PLOT_CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showSendToCloud": False,
    "showEditInChartStudio": False,
    "modeBarButtonsToRemove": ["sendDataToCloud", "editInChartStudio"],
}
# A PNG export is this wide (the layout's height), at twice the pixels.
PNG_WIDTH = 1200


@dataclass(frozen=True)
class TraceStyle:
    """How one trace is told apart: colour, line dash, marker symbol and bar pattern."""

    color: str
    dash: str
    symbol: str
    pattern: str


def trace_style(n: int) -> TraceStyle:
    """The n-th trace's style. Colours go round first; each round after the first takes the
    next dash and pattern, and the marker shifts one more every full round of dashes, so no
    two of the first len(COLORS) * len(DASHES) * len(SYMBOLS) (128) traces share colour,
    dash and marker, and no two of the first len(COLORS) * len(DASHES) (32) share colour and
    dash, colour and marker, or colour and bar pattern."""
    turn, colour = divmod(n, len(COLORS))
    return TraceStyle(
        color=COLORS[colour],
        dash=DASHES[turn % len(DASHES)],
        symbol=SYMBOLS[(turn + turn // len(DASHES)) % len(SYMBOLS)],
        pattern=BAR_PATTERNS[turn % len(BAR_PATTERNS)],
    )


# What a legend below the plot is sized from: the widest plot the pages draw (the main
# column at 1,280 px less the axis margins), plotly's 12 px legend font at its widest
# average character, the swatch before each label, and one row of entries.
LEGEND_WIDTH_PX = 1100
LEGEND_CHAR_PX = 7.5
LEGEND_SWATCH_PX = 60
LEGEND_ROW_PX = 24
LEGEND_MAX_COLUMNS = 4


@dataclass(frozen=True)
class LegendSpace:
    """A horizontal legend below the plot: its columns, rows and height in pixels."""

    columns: int
    rows: int
    height_px: int


def legend_space(labels: Sequence[str], titled: bool) -> LegendSpace:
    """The room a legend of these entries takes below the plot, in as many equal columns
    as the longest label allows (a title takes a row of its own)."""
    if not labels:
        return LegendSpace(0, 0, 0)
    widest = max(len(label) for label in labels) * LEGEND_CHAR_PX + LEGEND_SWATCH_PX
    columns = max(1, min(LEGEND_MAX_COLUMNS, len(labels), int(LEGEND_WIDTH_PX // widest)))
    rows = math.ceil(len(labels) / columns)
    return LegendSpace(columns, rows, (rows + titled) * LEGEND_ROW_PX + 8)


def with_legend_below(
    layout: PlotlyJson, labels: Sequence[str], title: str, plot_px: int, margin: dict[str, int]
) -> PlotlyJson:
    """The layout with its legend under the plot, past `margin["b"]` (the x axis and its
    title), its height counted in the figure's: the plot keeps `plot_px`, grown to at
    least the legend's height so a legend never outgrows its plot, and the figure grows by
    the legend. A legend plotly places itself takes its room from a fixed-height figure's
    plot: past a dozen long labels the plot was smaller than its legend."""
    space = legend_space(labels, bool(title))
    plot_px = max(plot_px, space.height_px)
    below = margin["b"]
    legend: PlotlyJson = {
        "orientation": "h",
        "x": 0,
        "xanchor": "left",
        "y": -below / plot_px,
        "yanchor": "top",
        "title": {"text": title, "side": "top"},
        "traceorder": "normal",
    }
    if space.columns:
        legend |= {"entrywidth": 1 / space.columns, "entrywidthmode": "fraction"}
    return {
        **layout,
        "height": margin["t"] + plot_px + below + space.height_px,
        "margin": {**margin, "b": below + space.height_px},
        "legend": legend,
        "showlegend": bool(labels),
    }


def base_layout(
    title: str,
    x_title: str,
    y_title: str,
    height: int = 320,
    *,
    x_axis: PlotlyJson | None = None,
    y_axis: PlotlyJson | None = None,
) -> PlotlyJson:
    """The layout of a chart; `x_axis` and `y_axis` add to (or replace) its axes' keys."""
    y_base = {"title": {"text": y_title}, "rangemode": "tozero", "separatethousands": True}
    return {
        "title": {
            "text": title,
            "x": 0,
            "xref": "paper",
            "xanchor": "left",
            "y": 1,
            "yref": "container",
            "yanchor": "top",
            "pad": {"t": 12},
            "font": {"size": 14},
        },
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 50, "b": 45},
        "xaxis": {"title": {"text": x_title}, "zeroline": False, **(x_axis or {})},
        "yaxis": {**y_base, **(y_axis or {})},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified",
    }


@functools.cache
def _template() -> PlotlyJson:
    """The `plotly_white` template as plotly.js takes it (it knows no template names)."""
    template: PlotlyJson = json.loads(go.Figure(layout={"template": TEMPLATE}).to_json())["layout"][
        "template"
    ]
    return template


@functools.cache
def rows_layout(rows: int) -> dict[str, PlotlyJson]:
    """The axes of `rows` rows sharing their x axis, as plotly's make_subplots lays them out."""
    figure = make_subplots(rows=rows, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    axes: dict[str, PlotlyJson] = json.loads(figure.layout.to_json())
    return axes


def figure_json(traces: list[PlotlyJson], layout: PlotlyJson, filename: str) -> PlotlyJson:
    """A figure as a plain dict for `json_script`, with the modebar config (PNG name).

    Traces and layout are plain dicts in plotly's figure schema: building
    plotly's validated objects took most of a page's time with dozens of traces.
    """
    image = {
        "format": "png",
        "filename": filename,
        "width": PNG_WIDTH,
        "height": layout.get("height", 400),
        "scale": 2,
    }
    config = {**PLOT_CONFIG, "toImageButtonOptions": image}
    return {"data": traces, "layout": {**layout, "template": _template()}, "config": config}
