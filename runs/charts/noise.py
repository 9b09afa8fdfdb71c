"""The host page's noise figure: its canaries over time, each with the host's usual band.

Three rows on one time axis: the CPU loop's time per iteration, the fsync's
median time and the memory copy's rate (absent from canaries of agents before
it). The band is the host's usual spread now (runs/host_noise.py);
canaries that were outside the spread of the canaries before them when they
arrived are marked, whatever today's band says.
"""

from collections.abc import Sequence

from runs.charts.figures import COLORS, PlotlyJson, base_layout, rows_layout
from runs.host_noise import CanaryBands
from runs.inference.usual import UsualBand
from runs.models import HostCanary

FLAGGED_COLOR = "#c92a2a"
ROWS = (
    ("cpu_loop_ns", "CPU loop (ns per iteration)", "y", "x"),
    ("fsync_ms", "fsync (ms, median)", "y2", "x2"),
    ("memory_gbps", "memory copy (GB/s)", "y3", "x3"),
)


def canary_figure(
    canaries: Sequence[HostCanary], bands: CanaryBands
) -> tuple[list[PlotlyJson], PlotlyJson]:
    """(traces, layout) of the host's canaries; the band where the host has one."""
    traces: list[PlotlyJson] = []
    shapes: list[PlotlyJson] = []
    times = [canary.at.isoformat() for canary in canaries]
    runs = [f"run #{canary.run_id}" if canary.run_id else "run removed" for canary in canaries]
    for number, (field, label, y_axis, x_axis) in enumerate(ROWS):
        values = [getattr(canary, field) for canary in canaries]
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": label,
                "x": times,
                "y": values,
                "text": runs,
                "xaxis": x_axis,
                "yaxis": y_axis,
                "line": {"color": COLORS[number]},
            }
        )
        flagged = [index for index, canary in enumerate(canaries) if canary.outside_usual]
        traces.append(
            {
                "type": "scatter",
                "mode": "markers",
                "name": "outside the usual spread" if number == 0 else "",
                "showlegend": number == 0,
                "x": [times[index] for index in flagged],
                "y": [values[index] for index in flagged],
                "text": [canaries[index].detail for index in flagged],
                "xaxis": x_axis,
                "yaxis": y_axis,
                "marker": {"color": FLAGGED_COLOR, "symbol": "x", "size": 11},
            }
        )
        band = getattr(bands, field)
        if band is not None:
            shapes.append(_band_shape(band, y_axis))
    rows = rows_layout(len(ROWS))
    layout = base_layout("Host canary", "", "", height=640)
    for number, (_field, label, y_axis, x_axis) in enumerate(ROWS, 1):
        x_name, y_name = x_axis.replace("x", "xaxis"), y_axis.replace("y", "yaxis")
        title = {"title": {"text": "canary time"}} if number == len(ROWS) else {}
        layout[x_name] = {**rows[x_name], "type": "date", **title}
        # Not from zero: a few percent is what the band is about.
        layout[y_name] = {**rows[y_name], "title": {"text": label}, "rangemode": "normal"}
    layout.update({"shapes": shapes, "hovermode": "closest"})
    return traces, layout


def _band_shape(band: UsualBand, y_axis: str) -> PlotlyJson:
    """The usual band across the row, behind its points."""
    return {
        "type": "rect",
        "xref": "paper",
        "x0": 0,
        "x1": 1,
        "yref": y_axis,
        "y0": band.low,
        "y1": band.high,
        "fillcolor": COLORS[2],
        "opacity": 0.12,
        "line": {"width": 0},
        "layer": "below",
    }
