"""A comparison drawn in the chart layout the user picked (runs/analysis/chart_layout.py): the x
axis, one colour per value of the colour dimension (one legend entry each), and a
small multiple per facet value. Lines when the x axis is a client sweep, grouped bars
otherwise; the mean of the repeats with its 95 % CI; an open marker (bars: a cross
pattern) on points with validity warnings. When facets differ in magnitude by 10x or
more each gets its own y axis, said in the title; when a facet's own values do, the y
axes are log. Bars only ever stand on a linear axis from zero: on a log axis their
lengths would lie (671 tps would look a tenth of 684), so there the means are points
with their error bars.
"""

import math
from collections.abc import Mapping
from typing import Any

from runs.analysis.chart_layout import CLIENTS, ChartLayout, Dimension
from runs.analysis.compare import METRICS
from runs.analysis.pivot import PlacedPoint
from runs.charts.figures import (
    TraceStyle,
    base_layout,
    figure_json,
    trace_style,
    with_legend_below,
)

WRAP_COLUMNS = 3
PANEL_HEIGHT = 270
GAP_X, GAP_Y = 0.05, 0.14
MAGNITUDE = 10.0
# Facets whose peaks are this far apart get their own y axes: on a shared one the smaller
# would fill under a fifth of its height, a flat line (preset 3's updates at 4k beside 35k).
FACETS_APART = 5.0
MARGIN = {"l": 70, "r": 20, "t": 70, "b": 50}
OWN_Y_NOTE = "each panel has its own y axis"
Panel = tuple[str, str]
# Plotly figure JSON built here and read back (axes merged with `|=`).
Json = dict[str, Any]


def _panels(
    points: list[PlacedPoint], chart_layout: ChartLayout, dims: Mapping[str, Dimension]
) -> list[Panel]:
    present = {(p.at(chart_layout.facet_row), p.at(chart_layout.facet_col)) for p in points}
    rows = dims[chart_layout.facet_row].values if chart_layout.facet_row else ("",)
    cols = dims[chart_layout.facet_col].values if chart_layout.facet_col else ("",)
    return [(r, c) for r in rows for c in cols if (r, c) in present] or [("", "")]


def _grid(panels: list[Panel], chart_layout: ChartLayout) -> int:
    """Columns of the grid: one per facet column value, wrapped at WRAP_COLUMNS without rows."""
    if chart_layout.facet_row:
        return max(1, len({c for _r, c in panels}))
    return min(len(panels), WRAP_COLUMNS)


def _axis_suffix(n: int) -> str:
    return str(n + 1) if n else ""


def _domains(n: int, columns: int, rows: int) -> tuple[list[float], list[float]]:
    width = (1 - GAP_X * (columns - 1)) / columns
    height = (1 - GAP_Y * (rows - 1)) / rows
    row, column = divmod(n, columns)
    left, top = column * (width + GAP_X), 1 - row * (height + GAP_Y)
    return [left, min(1.0, left + width)], [max(0.0, top - height), top]


def _hover(point: PlacedPoint, chart_layout: ChartLayout, dims: Mapping[str, Dimension]) -> str:
    summary = point.summary
    lines = [" · ".join(f"{dims[k].title} {point.values[k]}" for k in chart_layout.placed)]
    if summary is not None:
        lines.append(
            f"n={summary.n}, 95 % CI {summary.ci_low:,.3f} to {summary.ci_high:,.3f}"
            if summary.ci_low is not None and summary.ci_high is not None
            else f"n={summary.n}: no interval"
        )
    lines += [f"⚠ {w.title}: {w.detail}" for w in point.warnings]
    return "<br>".join(lines)


def _error_bars(points: list[PlacedPoint]) -> Json:
    summaries = [p.summary for p in points if p.summary]
    return {
        "type": "data",
        "symmetric": False,
        "array": [s.ci_high - s.mean if s.ci_high is not None else 0.0 for s in summaries],
        "arrayminus": [s.mean - s.ci_low if s.ci_low is not None else 0.0 for s in summaries],
        "visible": any(s.n > 1 for s in summaries),
    }


def _trace(
    points: list[PlacedPoint],
    chart_layout: ChartLayout,
    dims: Mapping[str, Dimension],
    kind: str,
    style: TraceStyle | list[str],
) -> Json:
    """One colour value's points in one panel: `kind` is "lines", "bars" or "points" (the
    means as markers, where bars would not start at zero); `style` is the colour value's,
    or each point's colour by its x value when nothing is coloured."""
    points = [p for p in points if p.summary]
    warned = [bool(p.warnings) for p in points]
    color = style.color if isinstance(style, TraceStyle) else style
    trace: Json = {
        "x": [p.clients if kind == "lines" else p.values[chart_layout.x] for p in points],
        "y": [p.summary.mean for p in points if p.summary],
        "error_y": _error_bars(points),
        # hovertext, never text: a bar draws its text inside itself.
        "hovertext": [_hover(p, chart_layout, dims) for p in points],
        "hovertemplate": "%{y:,.3f}<br>%{hovertext}<extra>%{fullData.name}</extra>",
    }
    if kind == "bars":
        pattern = style.pattern if isinstance(style, TraceStyle) else ""
        shapes = {"shape": ["x" if w else pattern for w in warned]}
        bar_marker: Json = {"color": color, "pattern": shapes}
        return {"type": "bar", "marker": bar_marker, "textposition": "none", **trace}
    symbol = style.symbol if isinstance(style, TraceStyle) else "circle"
    marker: Json = {
        "color": color,
        "size": [12 if w else 8 for w in warned],
        "symbol": ["diamond-open" if w else symbol for w in warned],
        "line": {"width": 2},
    }
    if kind == "points":
        return {"type": "scatter", "mode": "markers", "marker": marker, **trace}
    line: Json = {"color": style.color, "dash": style.dash} if isinstance(style, TraceStyle) else {}
    return {"type": "scatter", "mode": "lines+markers", "marker": marker, "line": line, **trace}


def _spread(values: list[float]) -> float:
    positive = [v for v in values if v > 0]
    return max(positive) / min(positive) if len(positive) > 1 else 1.0


def _y_axes(by_panel: dict[Panel, list[float]]) -> tuple[bool, bool]:
    """(independent y per facet, log y): facets whose peaks are FACETS_APART apart get their
    own axes; values 10x apart inside a facet get a log axis."""
    peaks = [max(values) for values in by_panel.values() if values]
    independent = len(peaks) > 1 and _spread(peaks) >= FACETS_APART
    log = any(_spread(values) >= MAGNITUDE for values in by_panel.values())
    return independent, log


def _panel_title(panel: Panel, chart_layout: ChartLayout, dims: Mapping[str, Dimension]) -> str:
    parts = [
        f"{dims[key].title}: {value}"
        for key, value in ((chart_layout.facet_row, panel[0]), (chart_layout.facet_col, panel[1]))
        if key
    ]
    return "<b>" + " · ".join(parts) + "</b>" if parts else ""


def laid_out_figure(
    points: list[PlacedPoint],
    chart_layout: ChartLayout,
    dims: Mapping[str, Dimension],
    metric: str,
    name: str,
) -> Json:
    """`metric` of the points in `chart_layout`: one trace per panel and colour value."""
    as_lines = chart_layout.x == CLIENTS and len(dims[CLIENTS].values) > 1
    panels = _panels(points, chart_layout, dims)
    columns = _grid(panels, chart_layout)
    rows = math.ceil(len(panels) / columns)
    colours = dims[chart_layout.colour].values if chart_layout.colour else ("",)
    in_panel: dict[Panel, list[PlacedPoint]] = {}
    for panel in panels:
        here = [
            p
            for p in points
            if (p.at(chart_layout.facet_row), p.at(chart_layout.facet_col)) == panel
        ]
        here.sort(key=lambda p: dims[chart_layout.x].values.index(p.values[chart_layout.x]))
        in_panel[panel] = here
    by_panel = {
        panel: [p.summary.mean for p in here if p.summary] for panel, here in in_panel.items()
    }
    independent, log = _y_axes(by_panel)
    kind = "lines" if as_lines else "points" if log else "bars"
    traces: list[Json] = []
    layout_axes: dict[str, Json] = {}
    titles: list[Json] = []
    for n, (panel, here) in enumerate(in_panel.items()):
        axes = {"xaxis": f"x{_axis_suffix(n)}", "yaxis": f"y{_axis_suffix(n)}"}
        for c, value in enumerate(colours):
            mine = [p for p in here if p.at(chart_layout.colour) == value]
            if not mine:
                continue
            style = (
                trace_style(c) if chart_layout.colour else _bar_colours(mine, chart_layout, dims)
            )
            trace = _trace(mine, chart_layout, dims, kind, style)
            first = not any(t["legendgroup"] == value for t in traces)
            legend = {"name": value or METRICS[metric], "legendgroup": value}
            traces.append(
                {**trace, **legend, **axes, "showlegend": bool(chart_layout.colour) and first}
            )
        x_domain, y_domain = _domains(n, columns, rows)
        layout_axes[f"xaxis{_axis_suffix(n)}"] = _x_axis(chart_layout, dims, as_lines, x_domain, n)
        layout_axes[f"yaxis{_axis_suffix(n)}"] = {"domain": y_domain, "anchor": axes["xaxis"]}
        if title := _panel_title(panel, chart_layout, dims):
            titles.append(_title_annotation(title, x_domain, y_domain))
    entries = [t["name"] for t in traces if t["showlegend"]]
    legend_title = dims[chart_layout.colour].title if chart_layout.colour else ""
    layout = _layout(
        chart_layout, dims, metric, rows, columns, layout_axes, titles, (independent, log)
    )
    layout = with_legend_below(layout, entries, legend_title, PANEL_HEIGHT * rows, MARGIN)
    return figure_json(traces, layout, f"{name}-{metric}-by-{chart_layout.x}")


def _bar_colours(
    points: list[PlacedPoint], chart_layout: ChartLayout, dims: Mapping[str, Dimension]
) -> list[str]:
    order = dims[chart_layout.x].values
    return [trace_style(order.index(p.values[chart_layout.x])).color for p in points]


def _x_axis(
    chart_layout: ChartLayout,
    dims: Mapping[str, Dimension],
    as_lines: bool,
    domain: list[float],
    n: int,
) -> Json:
    axis: Json = {"domain": domain, "anchor": f"y{_axis_suffix(n)}", "zeroline": False}
    if as_lines:
        counts = [int(v) for v in dims[CLIENTS].values]
        axis |= {"type": "log" if len(counts) > 3 else "linear", "tickvals": counts}
    else:
        axis |= {
            "type": "category",
            "categoryorder": "array",
            "categoryarray": dims[chart_layout.x].values,
        }
    return axis


def _title_annotation(text: str, x_domain: list[float], y_domain: list[float]) -> Json:
    return {
        "text": text,
        "x": (x_domain[0] + x_domain[1]) / 2,
        "y": y_domain[1],
        "xref": "paper",
        "yref": "paper",
        "xanchor": "center",
        "yanchor": "bottom",
        "showarrow": False,
        "font": {"size": 12},
    }


def _layout(
    chart_layout: ChartLayout,
    dims: Mapping[str, Dimension],
    metric: str,
    rows: int,
    columns: int,
    axes: dict[str, Json],
    titles: list[Json],
    y_axes: tuple[bool, bool],
) -> Json:
    independent, log = y_axes
    drawn = " and ".join(dims[k].title for k in (chart_layout.x, chart_layout.colour) if k)
    title = f"{METRICS[metric]} by {drawn} (geometric mean, 95 % CI)"
    if independent:
        title += f"; {OWN_Y_NOTE}"
    layout = base_layout(title, "", METRICS[metric])
    for key, axis in axes.items():
        if key.startswith("yaxis"):
            axis |= {"type": "log"} if log else {"type": "linear", "rangemode": "tozero"}
            axis |= {"separatethousands": True}
            if not independent and key != "yaxis":
                axis["matches"] = "y"
    panels = sum(1 for key in axes if key.startswith("xaxis"))
    for n in range(panels):
        if n + columns >= panels:
            axes[f"xaxis{_axis_suffix(n)}"]["title"] = {"text": dims[chart_layout.x].title}
        if n % columns == 0:
            y_title = METRICS[metric] + (" (log)" if log else "")
            axes[f"yaxis{_axis_suffix(n)}"]["title"] = {"text": y_title}
    layout.pop("xaxis"), layout.pop("yaxis")
    layout |= axes
    layout["annotations"] = titles
    layout["hovermode"] = "closest"
    layout["barmode"] = "group"
    # Means drawn as points sit side by side at their category, as grouped bars would.
    layout["scattermode"] = "group"
    return layout
