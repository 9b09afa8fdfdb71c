"""Timeline figures of one run or several overlaid: progress, host and server activity.

Timelines put the points of a run one after another on one time axis: a
point starts where the previous one ended, with a gap between them. A point
lasts as long as the longest of its stored timelines (progress, host and
server samples), so tps, latency, host and server charts share that axis. The
page's live script (frontend/live.js) extends the same traces with the same rule.
Timeline charts draw a run's digest (runs/timelines/store.py): each line reduced to
what a chart shows, its trace's `meta` naming the run and stored trace the zoom
fetches at full resolution (frontend/zoom.js).
"""

from runs.analysis.validity import CheckpointEvent, ValidityWarning
from runs.charts.figures import (
    COLORS,
    PlotlyJson,
    base_layout,
    figure_json,
    rows_layout,
    trace_style,
)
from runs.models import Run
from runs.timelines.downsample import CHART_SAMPLES, Timeline, trace_budget
from runs.timelines.samples import (
    ALLOC_TRACE,
    BUFFER_TRACES,
    CLIENT_HOST_TRACES,
    HOST_TRACES,
)
from runs.timelines.store import Digest

CHECKPOINT_COLORS = {"timed": "#e8590c", "requested": "#ae3ec9", "running": "#868e96"}
# A validity warning is an open diamond (as on the clients charts) in a colour no checkpoint
# has: checkpoints are triangles and lines in the colours above.
WARNING_MARKER = {"symbol": "diamond-open", "size": 12, "color": "#c92a2a", "line": {"width": 2}}
# Buffers allocated, beside the coloured lines of those written.
GREY = "#495057"
WARM_UP_FILL = "rgba(134, 142, 150, 0.18)"

Offsets = dict[int, float]


# The hover of a second read from a sampled log: what its value rests on.
COUNTED_HOVER = (
    "%{x:.0f} s: %{y}<br>%{customdata:,} logged transactions<extra>%{fullData.name}</extra>"
)


def _timeline_trace(
    timeline: Timeline | None, name: str, color: str, meta: PlotlyJson, dash: str | None = None
) -> PlotlyJson:
    """A line of a (reduced) timeline; `meta` names its run and stored trace for the zoom, and
    says where the live script continues it (the last point and its t). A timeline whose
    seconds rest on logged transactions shows their number in its hover (`customdata`)."""
    timeline = timeline or Timeline([], [], [])
    xs, ys = timeline.gapped()
    if timeline.last_point is not None:
        meta = {**meta, "last_point": timeline.last_point, "last_t": timeline.last_t}
    counts = timeline.gapped_counts()
    counted = {} if counts is None else {"customdata": counts, "hovertemplate": COUNTED_HOVER}
    return {
        **counted,
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines+markers",
        "name": name,
        "line": {"color": color, "width": 2, **({"dash": dash} if dash else {})},
        "marker": {"size": 3},
        "connectgaps": False,
        "meta": meta,
    }


def progress_traces(
    digest: Digest, run_pk: int, name: str, color: str, n_out: int = CHART_SAMPLES
) -> tuple[PlotlyJson, PlotlyJson]:
    """(tps trace, latency trace) of one run's digest, at most `n_out` samples each."""
    traces = []
    for key in ("tps", "latency_ms"):
        timeline = digest.traces.get(key)
        reduced = timeline.reduced(n_out) if timeline else None
        traces.append(_timeline_trace(reduced, name, color, {"run": run_pk, "trace": key}))
    return traces[0], traces[1]


# Each second's latency percentiles from the sampled log (agents/pgbench/log_timeline.py),
# drawn with the average: (trace, legend name, dash).
PERCENTILE_LINES = (
    ("p50_ms", "p50", "dot"),
    ("p95_ms", "p95", "dash"),
    ("p99_ms", "p99", "longdash"),
)


def draws_percentiles(run: Run, digest: Digest) -> bool:
    """Whether the latency chart has percentile lines: the run's seconds have them, or a
    run still measuring reads its seconds from a per-transaction log (the live page
    extends them). `-P`, an aggregate log and runs stored before the agent reported percentiles
    have none."""
    if any(digest.traces.get(key) for key, _name, _dash in PERCENTILE_LINES):
        return True
    workload = run.spec.get("workload") or {}
    logged = workload.get("latency_log", "sampled") in ("sampled", "full")
    return not run.is_final and logged and not workload.get("progress")


def percentile_traces(run: Run, digest: Digest) -> list[PlotlyJson]:
    """A line per latency percentile (after the average, in PERCENTILE_LINES' order, where
    the live page extends them), or [] (`draws_percentiles`). Their hover says the logged
    transactions each second rests on."""
    if not draws_percentiles(run, digest):
        return []
    traces = []
    for n, (key, name, dash) in enumerate(PERCENTILE_LINES, start=1):
        timeline = digest.traces.get(key)
        reduced = timeline.reduced(CHART_SAMPLES) if timeline else None
        meta = {"run": run.pk, "trace": key}
        traces.append(_timeline_trace(reduced, name, COLORS[n], meta, dash))
    return traces


def _checkpoint_shapes(events: list[CheckpointEvent], offsets: Offsets) -> list[PlotlyJson]:
    """Vertical lines at checkpoint starts (solid) and ends (dotted), coloured by cause."""
    return [
        {
            "type": "line",
            "xref": "x",
            "yref": "paper",
            "x0": offsets.get(e.point, 0.0) + e.t,
            "x1": offsets.get(e.point, 0.0) + e.t,
            "y0": 0,
            "y1": 1,
            "line": {
                "color": CHECKPOINT_COLORS[e.kind],
                "width": 1,
                "dash": "solid" if e.edge == "start" else "dot",
            },
        }
        for e in events
    ]


def _warm_up_shapes(warm_ups: dict[int, float], offsets: Offsets) -> list[PlotlyJson]:
    """A grey band over each point's seconds before its tps settled (a detected warm-up)."""
    return [
        {
            "type": "rect",
            "xref": "x",
            "yref": "paper",
            "x0": offsets.get(point, 0.0),
            "x1": offsets.get(point, 0.0) + end,
            "y0": 0,
            "y1": 1,
            "fillcolor": WARM_UP_FILL,
            "line": {"width": 0},
            "layer": "below",
        }
        for point, end in sorted(warm_ups.items())
    ]


def _warm_up_labels(warm_ups: dict[int, float], offsets: Offsets) -> list[PlotlyJson]:
    """'warm-up N s' at the top of each band."""
    return [
        {
            "xref": "x",
            "yref": "paper",
            "x": offsets.get(point, 0.0) + end / 2,
            "y": 1,
            "yanchor": "bottom",
            "text": f"warm-up {end:.0f} s",
            "showarrow": False,
            "font": {"size": 10, "color": "#666"},
        }
        for point, end in sorted(warm_ups.items())
    ]


def _warning_marks(
    marks: dict[int, tuple[float, float]], point_warnings: dict[int, list[ValidityWarning]]
) -> PlotlyJson:
    """A marker above each warned point of a timeline, named in the legend and the hover,
    its warnings in the hover text."""
    xs, ys, text = [], [], []
    for point, found in sorted(point_warnings.items()):
        if not found or point not in marks:
            continue
        xs.append(marks[point][0])
        ys.append(marks[point][1])
        text.append("<br>".join(f"{w.title}: {w.detail}" for w in found))
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "text": text,
        "mode": "markers",
        "name": "validity warning",
        "marker": WARNING_MARKER,
        "hovertemplate": "%{text}<extra>validity warning</extra>",
        "showlegend": bool(xs),
    }


def run_timelines(
    run: Run, digest: Digest, point_warnings: dict[int, list[ValidityWarning]]
) -> dict[str, PlotlyJson]:
    """{"tps": figure, "latency": figure} of one run, live-extendable (trace 0, and the
    latency's percentile lines after it).

    Checkpoints are vertical lines; the seconds a point's tps ramped before it settled
    are a grey band (labelled on the tps chart); warned points get a marker on the tps
    chart, the one entry of its legend.
    """
    tps, latency = progress_traces(digest, run.pk, "run", COLORS[0])
    tps["showlegend"] = False
    marks = _warning_marks(digest.marks, point_warnings)
    shapes = [
        *_warm_up_shapes(digest.warm_ups, digest.offsets),
        *_checkpoint_shapes(digest.checkpoints, digest.offsets),
    ]
    extra = {"showlegend": False, "shapes": shapes}
    tps_layout = {
        **base_layout(f"tps over time{timeline_source(run)}", "seconds", "tps"),
        **extra,
        "showlegend": marks["showlegend"],
    }
    labels = _warm_up_labels(digest.warm_ups, digest.offsets)
    if labels:
        tps_layout["annotations"] = labels
    percentiles = percentile_traces(run, digest)
    latency["name"] = "average" if percentiles else latency["name"]
    latency_layout = {
        **base_layout("latency over time", "seconds", "ms"),
        **extra,
        "showlegend": bool(percentiles),
    }
    return {
        "tps": figure_json([tps, marks], tps_layout, f"run-{run.pk}-tps"),
        "latency": figure_json([latency, *percentiles], latency_layout, f"run-{run.pk}-latency"),
    }


TIMELINE_SOURCES = {
    "sampled": " (estimated from the sampled transaction log)",
    "full": " (from the transaction log)",
    "aggregate": " (from the aggregate log, drawn as each point ends)",
}


def timeline_source(run: Run) -> str:
    """Where a run's per-second timeline comes from, as a title suffix: `-P 1` (none),
    or the transaction log (agents/pgbench/log_timeline.py)."""
    workload = run.spec.get("workload") or {}
    if workload.get("progress"):
        return ""
    return TIMELINE_SOURCES.get(workload.get("latency_log", ""), "")


def host_figure(run: Run, digest: Digest) -> PlotlyJson:
    """CPU and disk utilisation of the host during the run, one line per trace; with a
    client host, its CPU too (after the host's traces, which the live page extends)."""
    traces = [
        _timeline_trace(
            digest.traces.get(f"host.{key}"),
            label,
            COLORS[n % len(COLORS)],
            {"run": run.pk, "trace": f"host.{key}"},
        )
        for n, (key, label) in enumerate(HOST_TRACES)
    ]
    for key, label in CLIENT_HOST_TRACES if run.client_host_id else ():
        client = digest.traces.get(f"client.{key}")
        meta = {"run": run.pk, "trace": f"client.{key}"}
        dash = "dot" if key == "cpu_user" else "dash"
        traces.append(_timeline_trace(client, f"client host {label}", "#555555", meta, dash))
    layout = base_layout("host", "seconds", "%", height=260, y_axis={"range": [0, 100]})
    return figure_json(traces, layout, f"run-{run.pk}-host")


def _checkpoint_markers(
    events: list[CheckpointEvent], offsets: Offsets, name: str, color: str | None = None
) -> PlotlyJson:
    """Checkpoint starts (triangle up) and ends (triangle down) as one marker trace."""
    return {
        "type": "scatter",
        "x": [offsets.get(e.point, 0.0) + e.t for e in events],
        "y": [0.0] * len(events),
        "mode": "markers",
        "name": name,
        "text": [f"{e.kind} checkpoint {e.edge}" for e in events],
        "marker": {
            "symbol": ["triangle-up" if e.edge == "start" else "triangle-down" for e in events],
            "size": 11,
            "color": [color or CHECKPOINT_COLORS[e.kind] for e in events],
        },
        "hovertemplate": "%{text}<extra>%{fullData.name}</extra>",
        "showlegend": bool(events),
    }


def server_figure(run: Run, digest: Digest) -> PlotlyJson:
    """Buffers written and allocated per second with checkpoint markers (top) and sampled
    wait events stacked by wait-event type (bottom), on the run's shared time axis; the
    live page extends each trace by its `meta.trace` (frontend/live.js)."""
    traces: list[PlotlyJson] = []
    for n, (key, label) in enumerate(BUFFER_TRACES):
        name = f"server.{key}"
        traces.append(
            _timeline_trace(
                digest.traces.get(name),
                label,
                COLORS[n % len(COLORS)],
                {"run": run.pk, "trace": name},
            )
        )
    key, label = ALLOC_TRACE
    alloc = {"run": run.pk, "trace": f"server.{key}"}
    traces.append(_timeline_trace(digest.traces.get(f"server.{key}"), label, GREY, alloc, "dot"))
    markers = _checkpoint_markers(digest.checkpoints, digest.offsets, "checkpoints")
    traces.append({**markers, "meta": {"trace": "checkpoints", "colors": CHECKPOINT_COLORS}})
    waits = sorted(name for name in digest.traces if name.startswith("wait."))
    for n, name in enumerate(waits):
        color = COLORS[(n + 3) % len(COLORS)]
        meta: PlotlyJson = {"run": run.pk, "trace": name}
        trace = _timeline_trace(digest.traces[name], name.removeprefix("wait."), color, meta)
        trace.update(stackgroup="waits", mode="lines", line={"width": 0.5}, xaxis="x2", yaxis="y2")
        traces.append(trace)
    rows = rows_layout(2)
    title = "server: buffers written and allocated, wait events"
    layout = base_layout(title, "seconds", "buffers/s", 440, y_axis=rows["yaxis"])
    layout["yaxis2"] = {**rows["yaxis2"], "title": {"text": "backends"}, "rangemode": "tozero"}
    layout["xaxis2"] = {**rows["xaxis2"], "title": {"text": "seconds"}}
    layout["xaxis"] = {**rows["xaxis"], "zeroline": False}
    return figure_json(traces, layout, f"run-{run.pk}-server")


def overlaid_timelines(
    runs: list[Run],
    digests: dict[int, Digest],
    labels: dict[int, str],
    name: str,
    repeats: dict[int, list[int]] | None = None,
) -> dict[str, PlotlyJson]:
    """tps and latency timelines of several cells on one axis each: every repeat of a cell
    (`repeats`: cell's run id -> the run ids of its rounds) in the cell's colour, one
    legend entry per cell, each line reduced to its share of what a chart shows."""
    repeats = repeats or {}
    # A cell with no measured point (cancelled in its first) still draws what it sampled.
    drawn = [(n, run, pk) for n, run in enumerate(runs) for pk in repeats.get(run.pk) or [run.pk]]
    drawn = [(n, run, pk) for n, run, pk in drawn if pk in digests]
    tps_traces, latency_traces = [], []
    n_out = trace_budget(len(drawn))
    for n, run, pk in drawn:
        style, label = trace_style(n), labels[run.pk]
        tps, latency = progress_traces(digests[pk], pk, label, style.color, n_out)
        first = pk == next(p for _n, r, p in drawn if r.pk == run.pk)
        for trace in (tps, latency):
            trace.update(legendgroup=str(run.pk), showlegend=first, marker={"size": 2})
            # Past eight cells the colours come round again with the next dash.
            trace["line"] = {"color": style.color, "width": 1.5, "dash": style.dash}
        tps_traces.append(tps)
        latency_traces.append(latency)
    return {
        "tps": figure_json(
            tps_traces, _timeline_layout("tps over time, every repeat", "tps"), f"{name}-tps-time"
        ),
        "latency": figure_json(
            latency_traces,
            _timeline_layout("latency over time, every repeat", "ms"),
            f"{name}-latency-time",
        ),
    }


def _timeline_layout(title: str, y_title: str) -> PlotlyJson:
    """An overlaid timeline's layout: the legend to the right, so many cells do not make
    it taller than the plot."""
    layout = base_layout(title, "seconds", y_title, height=380)
    layout["legend"] = {"orientation": "v", "x": 1.01, "y": 1, "font": {"size": 10}}
    return layout


def overlaid_server(
    runs: list[Run], digests: dict[int, Digest], labels: dict[int, str], name: str
) -> PlotlyJson:
    """Buffers written per second of several runs on one axis, with each run's checkpoints."""
    traces = []
    n_out = trace_budget(len(runs))
    for n, run in enumerate(runs):
        style, digest = trace_style(n), digests[run.pk]
        written = digest.traces.get("server.written")
        meta = {"run": run.pk, "trace": "server.written"}
        reduced = written.reduced(n_out) if written else None
        traces.append(_timeline_trace(reduced, labels[run.pk], style.color, meta, style.dash))
        events = [e for e in digest.checkpoints if e.edge == "start"]
        checkpoints = f"checkpoints {labels[run.pk]}"
        traces.append(_checkpoint_markers(events, digest.offsets, checkpoints, style.color))
    layout = base_layout(
        "buffers written per second, checkpoint starts (▲)", "seconds", "buffers/s"
    )
    return figure_json(traces, layout, f"{name}-server-time")
