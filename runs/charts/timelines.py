"""Timeline figures of one run or several overlaid: progress, host and server activity.

Timelines put the points of a run one after another on one time axis: a
point starts where the previous one ended, with a gap between them. A point
lasts as long as the longest of its stored timelines (progress, host and
server samples), so tps, latency, host and server charts share that axis. The
page's live script (frontend/live.js) extends the same traces with the same rule.
Timeline charts draw a run's digest (runs/timelines/store.py): each line reduced to
what a chart shows, its trace's `meta` naming the run and series the zoom
fetches at full resolution (frontend/zoom.js).
"""

from runs.analysis.validity import CheckpointEvent, ValidityWarning
from runs.charts.figures import COLORS, base_layout, figure_json, two_rows_layout
from runs.models import Run
from runs.timelines.downsample import CHART_SAMPLES, Timeline, trace_budget
from runs.timelines.samples import (
    BUFFER_SERIES,
    CLIENT_HOST_SERIES,
    HOST_SERIES,
)
from runs.timelines.store import Digest

CHECKPOINT_COLORS = {"timed": "#e8590c", "requested": "#ae3ec9", "running": "#868e96"}
# A validity warning is an open diamond (as on the clients charts) in a colour no checkpoint
# has: checkpoints are triangles and lines in the colours above.
WARNING_MARKER = {"symbol": "diamond-open", "size": 12, "color": "#c92a2a", "line": {"width": 2}}

Offsets = dict[int, float]


def _timeline_trace(series: Timeline | None, name: str, color: str, meta: dict) -> dict:
    """A line of a (reduced) timeline; `meta` names its run and series for the zoom, and
    says where the live script continues it (the last point and its t)."""
    series = series or Timeline([], [], [])
    xs, ys = series.gapped()
    if series.last_point is not None:
        meta = {**meta, "last_point": series.last_point, "last_t": series.last_t}
    return {
        "type": "scatter",
        "x": xs,
        "y": ys,
        "mode": "lines+markers",
        "name": name,
        "line": {"color": color, "width": 2},
        "marker": {"size": 3},
        "connectgaps": False,
        "meta": meta,
    }


def progress_traces(
    digest: Digest, run_pk: int, name: str, color: str, n_out: int = CHART_SAMPLES
) -> tuple[dict, dict]:
    """(tps trace, latency trace) of one run's digest, at most `n_out` samples each."""
    traces = []
    for key in ("tps", "latency_ms"):
        series = digest.series.get(key)
        reduced = series.reduced(n_out) if series else None
        traces.append(_timeline_trace(reduced, name, color, {"run": run_pk, "series": key}))
    return traces[0], traces[1]


def _checkpoint_shapes(events: list[CheckpointEvent], offsets: Offsets) -> list[dict]:
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


def _warning_marks(
    marks: dict[int, tuple[float, float]], point_warnings: dict[int, list[ValidityWarning]]
) -> dict:
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
) -> dict:
    """{"tps": figure, "latency": figure} of one run, live-extendable (trace 0).

    Checkpoints are vertical lines; warned points get a marker on the tps chart, the
    one entry of its legend.
    """
    tps, latency = progress_traces(digest, run.pk, "run", COLORS[0])
    tps["showlegend"] = False
    marks = _warning_marks(digest.marks, point_warnings)
    shapes = _checkpoint_shapes(digest.checkpoints, digest.offsets)
    extra = {"showlegend": False, "shapes": shapes}
    tps_layout = {
        **base_layout(f"tps over time{timeline_source(run)}", "seconds", "tps"),
        **extra,
        "showlegend": marks["showlegend"],
    }
    latency_layout = {**base_layout("latency over time", "seconds", "ms"), **extra}
    return {
        "tps": figure_json([tps, marks], tps_layout, f"run-{run.pk}-tps"),
        "latency": figure_json([latency], latency_layout, f"run-{run.pk}-latency"),
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


def host_figure(run: Run, digest: Digest) -> dict:
    """CPU and disk utilisation of the host during the run, one trace per series; with a
    client host, its CPU too (after the host's traces, which the live page extends)."""
    traces = [
        _timeline_trace(
            digest.series.get(f"host.{key}"),
            label,
            COLORS[n % len(COLORS)],
            {"run": run.pk, "series": f"host.{key}"},
        )
        for n, (key, label) in enumerate(HOST_SERIES)
    ]
    for key, label in CLIENT_HOST_SERIES if run.client_host_id else ():
        client = digest.series.get(f"client.{key}")
        trace = _timeline_trace(
            client, f"client host {label}", "#555555", {"run": run.pk, "series": f"client.{key}"}
        )
        trace["line"]["dash"] = "dot" if key == "cpu_user" else "dash"
        traces.append(trace)
    layout = base_layout("host", "seconds", "%", height=260)
    layout["yaxis"]["range"] = [0, 100]
    return figure_json(traces, layout, f"run-{run.pk}-host")


def _checkpoint_markers(
    events: list[CheckpointEvent], offsets: Offsets, name: str, color: str | None = None
) -> dict:
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


def server_figure(run: Run, digest: Digest) -> dict:
    """Buffers written per second with checkpoint markers (top) and sampled wait events
    stacked by wait-event type (bottom), on the run's shared time axis."""
    traces = []
    for n, (key, label) in enumerate(BUFFER_SERIES):
        name = f"server.{key}"
        traces.append(
            _timeline_trace(
                digest.series.get(name),
                label,
                COLORS[n % len(COLORS)],
                {"run": run.pk, "series": name},
            )
        )
    traces.append(_checkpoint_markers(digest.checkpoints, digest.offsets, "checkpoints"))
    waits = sorted(name for name in digest.series if name.startswith("wait."))
    for n, name in enumerate(waits):
        color = COLORS[(n + 3) % len(COLORS)]
        meta = {"run": run.pk, "series": name}
        trace = _timeline_trace(digest.series[name], name.removeprefix("wait."), color, meta)
        trace.update(stackgroup="waits", mode="lines", line={"width": 0.5}, xaxis="x2", yaxis="y2")
        traces.append(trace)
    rows = two_rows_layout()
    layout = base_layout("server: buffers written and wait events", "seconds", "buffers/s", 440)
    layout["yaxis"] = {**layout["yaxis"], **rows["yaxis"]}
    layout["yaxis2"] = {**rows["yaxis2"], "title": {"text": "backends"}, "rangemode": "tozero"}
    layout["xaxis2"] = {**rows["xaxis2"], "title": {"text": "seconds"}}
    layout["xaxis"] = {**rows["xaxis"], "zeroline": False}
    return figure_json(traces, layout, f"run-{run.pk}-server")


def overlaid_timelines(
    runs: list[Run], digests: dict[int, Digest], labels: dict[int, str], name: str
) -> dict:
    """tps and latency timelines of several runs on one axis each, one line per run,
    each reduced to its share of what a chart shows."""
    tps_traces, latency_traces = [], []
    n_out = trace_budget(len(runs))
    for n, run in enumerate(runs):
        color = COLORS[n % len(COLORS)]
        tps, latency = progress_traces(digests[run.pk], run.pk, labels[run.pk], color, n_out)
        tps_traces.append(tps)
        latency_traces.append(latency)
    return {
        "tps": figure_json(
            tps_traces, base_layout("tps over time", "seconds", "tps"), f"{name}-tps-time"
        ),
        "latency": figure_json(
            latency_traces,
            base_layout("latency over time", "seconds", "ms"),
            f"{name}-latency-time",
        ),
    }


def overlaid_server(
    runs: list[Run], digests: dict[int, Digest], labels: dict[int, str], name: str
) -> dict:
    """Buffers written per second of several runs on one axis, with each run's checkpoints."""
    traces = []
    n_out = trace_budget(len(runs))
    for n, run in enumerate(runs):
        color, digest = COLORS[n % len(COLORS)], digests[run.pk]
        written = digest.series.get("server.written")
        meta = {"run": run.pk, "series": "server.written"}
        reduced = written.reduced(n_out) if written else None
        traces.append(_timeline_trace(reduced, labels[run.pk], color, meta))
        events = [e for e in digest.checkpoints if e.edge == "start"]
        traces.append(
            _checkpoint_markers(events, digest.offsets, f"checkpoints {labels[run.pk]}", color)
        )
    layout = base_layout(
        "buffers written per second, checkpoint starts (▲)", "seconds", "buffers/s"
    )
    return figure_json(traces, layout, f"{name}-server-time")
