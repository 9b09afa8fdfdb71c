"""What every figure shares: colours, the layout and template, and the dict plotly.js draws."""

import functools
import json

import plotly.graph_objects as go
from plotly.subplots import make_subplots

COLORS = ("#2f6fdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c")


TEMPLATE = "plotly_white"


PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


def base_layout(title: str, x_title: str, y_title: str, height: int = 320) -> dict:
    return {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
        "xaxis": {"title": {"text": x_title}, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "separatethousands": True},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified",
    }


@functools.cache
def _template() -> dict:
    """The `plotly_white` template as plotly.js takes it (it knows no template names)."""
    return json.loads(go.Figure(layout={"template": TEMPLATE}).to_json())["layout"]["template"]


@functools.cache
def two_rows_layout() -> dict:
    """The axes of two rows sharing their x axis, as plotly's make_subplots lays them out."""
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    return json.loads(figure.layout.to_json())


def figure_json(traces: list[dict], layout: dict, filename: str) -> dict:
    """A figure as a plain dict for `json_script`, with the modebar config (PNG name).

    Traces and layout are plain dicts in plotly's figure schema: building
    plotly's validated objects took most of a page's time with dozens of traces.
    """
    config = {**PLOT_CONFIG, "toImageButtonOptions": {"scale": 2, "filename": filename}}
    return {"data": traces, "layout": {**layout, "template": _template()}, "config": config}
