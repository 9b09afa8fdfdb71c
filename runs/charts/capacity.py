"""A capacity search's curve: latency percentiles against the offered rate, every probe,
with the objective's limit and the capacity's interval drawn (both axes log)."""

from runs.analysis.capacity import CURVE_PERCENTILES, CapacityReading
from runs.charts.figures import PlotlyJson, base_layout, figure_json, trace_style

OBJECTIVE_COLOR = "#c92a2a"
CAPACITY_COLOR = "#2b8a3e"


def capacity_figure(reading: CapacityReading, name: str, title: str | None = None) -> PlotlyJson:
    """One line per percentile over the probes that logged latencies (in offered-rate
    order, each probe's run in its hover), the limit as a red dashed line across the
    probed range, and the capacity as a green line in its shaded interval; `title`
    names a compared cell's curve."""
    probes = sorted(
        (p for p in reading.probes if any(v is not None for v in p.percentiles.values())),
        key=lambda probe: (probe.offered_tps, probe.number),
    )
    traces: list[PlotlyJson] = []
    for n, percentile in enumerate(CURVE_PERCENTILES):
        style = trace_style(n)
        traces.append(
            {
                "type": "scatter",
                "mode": "lines+markers",
                "name": f"p{percentile:g}",
                "x": [p.offered_tps for p in probes],
                "y": [p.percentiles[percentile] for p in probes],
                "line": {"color": style.color, "dash": style.dash},
                "marker": {"symbol": style.symbol},
                "hovertext": [
                    f"probe {p.number} (run {p.run_id}): "
                    f"{p.verdict.decision if p.verdict else p.status}"
                    + (" (stalled)" if p.stall else "")
                    for p in probes
                ],
                "hovertemplate": "%{x:,.0f} tps: %{y:,.2f} ms<br>%{hovertext}"
                f"<extra>p{percentile:g}</extra>",
            }
        )
    low, high = reading.plan.low_tps, reading.plan.high_tps
    limit = reading.objective.limit_ms
    traces.append(
        {
            "type": "scatter",
            "mode": "lines",
            "name": f"objective: {reading.objective.describe()}",
            "x": [low, high],
            "y": [limit, limit],
            "line": {"color": OBJECTIVE_COLOR, "dash": "dash"},
            "hoverinfo": "skip",
        }
    )
    traces.extend(_capacity_traces(reading))
    layout = base_layout(
        title or "Latency against offered rate",
        "offered rate (tps, log)",
        "latency (ms, log)",
        400,
        x_axis={"type": "log", "separatethousands": True},
        y_axis={"type": "log", "rangemode": "normal"},
    )
    layout["hovermode"] = "closest"
    return figure_json(traces, layout, name)


def _capacity_traces(reading: CapacityReading) -> list[PlotlyJson]:
    """The capacity's interval as a shaded band and its estimate as a line, spanning the
    probes' latencies; nothing where the search found no interval."""
    capacity = reading.capacity
    values = [
        value for probe in reading.probes for value in probe.percentiles.values() if value
    ] + [reading.objective.limit_ms]
    bottom, top = min(values), max(values)
    traces: list[PlotlyJson] = []
    if capacity.lower is not None and capacity.upper is not None:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": "capacity interval",
                "x": [capacity.lower, capacity.upper, capacity.upper, capacity.lower],
                "y": [bottom, bottom, top, top],
                "fill": "toself",
                "fillcolor": "rgba(43, 138, 62, 0.15)",
                "line": {"width": 0},
                "hoverinfo": "skip",
            }
        )
    if capacity.estimate is not None:
        traces.append(
            {
                "type": "scatter",
                "mode": "lines",
                "name": f"capacity: {capacity.sentence}",
                "x": [capacity.estimate, capacity.estimate],
                "y": [bottom, top],
                "line": {"color": CAPACITY_COLOR, "width": 2},
                "hoverinfo": "skip",
            }
        )
    return traces
