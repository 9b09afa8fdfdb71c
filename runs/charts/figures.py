"""What every figure shares: colours, the layout and template, and the dict plotly.js draws."""

import functools
import json
from typing import TypedDict

import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ("#2f6fdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c")


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
def two_rows_layout() -> dict[str, PlotlyJson]:
    """The axes of two rows sharing their x axis, as plotly's make_subplots lays them out."""
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
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
