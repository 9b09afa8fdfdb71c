"""Plotly figures for the pages, built server-side and drawn by plotly.js.

Timelines put the points of a run one after another on one time axis: a
point starts where the previous one ended, with a gap between them. A point
lasts as long as the longest of its stored timelines (progress, host and
server samples), so tps, latency, host and server charts share that axis. The
page's live script (frontend/live.js) extends the same traces with the same rule.

Charts against clients draw the mean of the repeats with its 95 % confidence
interval, points with validity warnings with an open marker (the warnings,
naming the repeats, in the hover), and each run's peak as an annotation.
"""

import json
from collections.abc import Sequence

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from runs.compare import METRICS, Peak, run_summaries
from runs.models import ClientHostSample, HostSample, ProgressSample, Result, Run, ServerSample
from runs.stats import Summary
from runs.warnings import CheckpointEvent, ValidityWarning, checkpoint_events

COLORS = ("#2f6fdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c")
WARN_COLOR = "#b7791f"
CHECKPOINT_COLORS = {"timed": "#e8590c", "requested": "#ae3ec9", "running": "#868e96"}
HOST_SERIES = (
    ("cpu_user", "CPU user %"),
    ("cpu_system", "CPU system %"),
    ("cpu_iowait", "CPU iowait %"),
    ("disk_data_util", "disk util % (data)"),
    ("disk_wal_util", "disk util % (WAL)"),
)
BUFFER_SERIES = (
    ("buffers_checkpoint_per_s", "by checkpointer"),
    ("buffers_clean_per_s", "by background writer"),
    ("buffers_backend_per_s", "by backends"),
)
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}

Samples = list[tuple[int, float]]
Offsets = dict[int, float]


def _layout(title: str, x_title: str, y_title: str, height: int = 320) -> dict:
    return {
        "title": {"text": title, "x": 0, "font": {"size": 14}},
        "template": "plotly_white",
        "height": height,
        "margin": {"l": 60, "r": 20, "t": 40, "b": 45},
        "xaxis": {"title": {"text": x_title}, "zeroline": False},
        "yaxis": {"title": {"text": y_title}, "rangemode": "tozero", "separatethousands": True},
        "legend": {"orientation": "h", "y": -0.25},
        "hovermode": "x unified",
    }


def figure_json(figure: go.Figure, filename: str) -> dict:
    """The figure as a plain dict for `json_script`, with the modebar config (PNG name)."""
    config = {**PLOT_CONFIG, "toImageButtonOptions": {"scale": 2, "filename": filename}}
    return {**json.loads(figure.to_json()), "config": config}


def point_offsets(*series: Samples) -> dict[int, float]:
    """Point -> where it starts on the shared axis: the points before it, end to end."""
    lengths: dict[int, float] = {}
    for samples in series:
        for point, t in samples:
            lengths[point] = max(lengths.get(point, 0.0), t or 0.0)
    offsets, start = {}, 0.0
    for point in sorted(lengths):
        offsets[point] = start
        start += lengths[point]
    return offsets


def offsets_for(progress: Sequence, host: Sequence, server: Sequence) -> dict[int, float]:
    """A run's point offsets from all of its stored timelines."""
    return point_offsets(_times(progress), _times(host), _times(server))


def timeline_xs(samples: Samples, offsets: dict[int, float]) -> list[float | None]:
    """x for each (point, t) on the shared axis; None marks the gap before a new point."""
    xs: list[float | None] = []
    current = None
    for point, t in samples:
        if current is not None and point != current:
            xs.append(None)
        current = point
        xs.append(offsets.get(point, 0.0) + (t or 0.0))
    return xs


def _with_gaps(samples: Samples, values: Sequence) -> list:
    out, current = [], None
    for (point, _t), value in zip(samples, values, strict=True):
        if current is not None and point != current:
            out.append(None)
        current = point
        out.append(value)
    return out


def _timeline_trace(
    samples: Samples,
    values: Sequence[float | None],
    name: str,
    color: str,
    offsets: Offsets,
    labels: list[str] | None = None,
) -> go.Scatter:
    return go.Scatter(
        x=timeline_xs(samples, offsets),
        y=_with_gaps(samples, values),
        mode="lines+markers",
        name=name,
        line={"color": color, "width": 2},
        marker={"size": 4},
        text=_with_gaps(samples, labels) if labels else None,
        connectgaps=False,
        # Where the live script continues this trace: the last point and its t.
        meta={"last_point": samples[-1][0], "last_t": samples[-1][1] or 0.0} if samples else {},
        hovertemplate="%{y:,.3f}<extra>%{fullData.name} %{text}</extra>" if labels else None,
    )


def _times(samples: Sequence) -> Samples:
    return [(s.point, s.t or 0.0) for s in samples]


def progress_traces(
    progress: list[ProgressSample], labels: dict[int, str], name: str, color: str, offsets: Offsets
) -> tuple[go.Scatter, go.Scatter]:
    """(tps trace, latency trace) of one run's progress samples."""
    samples = _times(progress)
    text = [labels.get(p.point, "") for p in progress]
    tps = _timeline_trace(samples, [p.tps for p in progress], name, color, offsets, text)
    latency = _timeline_trace(samples, [p.latency_ms for p in progress], name, color, offsets, text)
    return tps, latency


def point_labels(results: list[Result], spec: dict) -> dict[int, str]:
    """Point index -> `4 clients, repeat 1`, from results and the sweep in the spec."""
    labels = {r.index: f"{r.clients} clients, repeat {r.repeat}" for r in results}
    sweep = spec.get("sweep") or {}
    clients, repeats = sweep.get("clients") or [], sweep.get("repeats") or 1
    planned = [(c, r) for c in clients for r in range(1, repeats + 1)]
    if sweep.get("order") == "interleaved":
        planned = [(c, r) for r in range(1, repeats + 1) for c in clients]
    for index, (c, r) in enumerate(planned):
        labels.setdefault(index, f"{c} clients, repeat {r}")
    return labels


def run_checkpoints(server_samples: list[ServerSample]) -> list[CheckpointEvent]:
    """Every checkpoint start and end seen in a run's server samples, point by point."""
    by_point: dict[int, list[ServerSample]] = {}
    for sample in server_samples:
        by_point.setdefault(sample.point, []).append(sample)
    return [e for point, rows in sorted(by_point.items()) for e in checkpoint_events(point, rows)]


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
    progress: list[ProgressSample],
    point_warnings: dict[int, list[ValidityWarning]],
    offsets: Offsets,
) -> go.Scatter:
    """A marker above each warned point of a timeline, its warnings in the hover text."""
    measured: dict[int, list[ProgressSample]] = {}
    for sample in progress:
        if sample.tps is not None:
            measured.setdefault(sample.point, []).append(sample)
    xs, ys, text = [], [], []
    for point, found in sorted(point_warnings.items()):
        rows = measured.get(point, [])
        if not found or not rows:
            continue
        xs.append(offsets.get(point, 0.0) + max(p.t or 0.0 for p in rows) / 2)
        ys.append(max(p.tps or 0.0 for p in rows))
        text.append("<br>".join(f"{w.title}: {w.detail}" for w in found))
    return go.Scatter(
        x=xs,
        y=ys,
        text=text,
        mode="markers",
        name="validity warning",
        marker={"symbol": "triangle-down", "size": 11, "color": WARN_COLOR},
        hovertemplate="%{text}<extra></extra>",
        showlegend=bool(xs),
    )


def run_timelines(
    run: Run,
    progress: list[ProgressSample],
    results: list[Result],
    offsets: dict[int, float],
    checkpoints: list[CheckpointEvent],
    point_warnings: dict[int, list[ValidityWarning]],
) -> dict:
    """{"tps": figure, "latency": figure} of one run, live-extendable (trace 0).

    Checkpoints are vertical lines; warned points get a marker on the tps chart.
    """
    labels = point_labels(results, run.spec)
    tps, latency = progress_traces(progress, labels, "run", COLORS[0], offsets)
    marks = _warning_marks(progress, point_warnings, offsets)
    shapes = _checkpoint_shapes(checkpoints, offsets)
    tps_fig = go.Figure([tps, marks], _layout("tps over time", "seconds", "tps"))
    latency_fig = go.Figure([latency], _layout("latency over time", "seconds", "ms"))
    for figure in (tps_fig, latency_fig):
        figure.update_layout(showlegend=False, shapes=shapes)
    return {
        "tps": figure_json(tps_fig, f"run-{run.pk}-tps"),
        "latency": figure_json(latency_fig, f"run-{run.pk}-latency"),
    }


def host_sample_values(sample: dict) -> dict[str, float | None]:
    """The plotted values of one host sample (see agents/observe/host.py)."""
    disks = sample.get("disks") or {}
    return {
        "cpu_user": sample.get("cpu_user"),
        "cpu_system": sample.get("cpu_system"),
        "cpu_iowait": sample.get("cpu_iowait"),
        "disk_data_util": (disks.get("data") or {}).get("util_percent"),
        "disk_wal_util": (disks.get("wal") or {}).get("util_percent"),
    }


def host_figure(
    run: Run,
    host_samples: list[HostSample],
    offsets: dict[int, float],
    client_samples: Sequence[ClientHostSample] | None = None,
) -> dict:
    """CPU and disk utilisation of the host during the run, one trace per series; with a
    client host (`client_samples` not None), its CPU after the host's traces."""
    samples = _times(host_samples)
    values = [host_sample_values(s.data) for s in host_samples]
    traces = [
        _timeline_trace(samples, [v[key] for v in values], label, COLORS[n % len(COLORS)], offsets)
        for n, (key, label) in enumerate(HOST_SERIES)
    ]
    if client_samples is not None:
        client_times = _times(list(client_samples))
        for key, label in HOST_SERIES[:2]:
            trace = _timeline_trace(
                client_times,
                [s.data.get(key) for s in client_samples],
                f"client host {label}",
                "#555555",
                offsets,
            )
            trace.line.dash = "dot" if key == "cpu_user" else "dash"
            traces.append(trace)
    layout = _layout("host", "seconds", "%", height=260)
    layout["yaxis"]["range"] = [0, 100]
    return figure_json(go.Figure(traces, layout), f"run-{run.pk}-host")


def wait_event_types(server_samples: list[ServerSample]) -> dict[str, list[int]]:
    """Wait-event type -> sampled backends per sample (`CPU`: active, not waiting)."""
    types = sorted(
        {key.split(":")[0] for s in server_samples for key in (s.data.get("wait_events") or {})}
    )
    stacked: dict[str, list[int]] = {name: [] for name in types}
    for sample in server_samples:
        counts = dict.fromkeys(types, 0)
        for key, backends in (sample.data.get("wait_events") or {}).items():
            counts[key.split(":")[0]] += backends
        for name in types:
            stacked[name].append(counts[name])
    return stacked


def _checkpoint_markers(
    events: list[CheckpointEvent], offsets: Offsets, name: str, color: str | None = None
) -> go.Scatter:
    """Checkpoint starts (triangle up) and ends (triangle down) as one marker trace."""
    return go.Scatter(
        x=[offsets.get(e.point, 0.0) + e.t for e in events],
        y=[0.0] * len(events),
        mode="markers",
        name=name,
        text=[f"{e.kind} checkpoint {e.edge}" for e in events],
        marker={
            "symbol": ["triangle-up" if e.edge == "start" else "triangle-down" for e in events],
            "size": 11,
            "color": [color or CHECKPOINT_COLORS[e.kind] for e in events],
        },
        hovertemplate="%{text}<extra>%{fullData.name}</extra>",
        showlegend=bool(events),
    )


def server_figure(
    run: Run,
    server_samples: list[ServerSample],
    offsets: Offsets,
    checkpoints: list[CheckpointEvent],
) -> dict:
    """Buffers written per second with checkpoint markers (top) and sampled wait events
    stacked by wait-event type (bottom), on the run's shared time axis."""
    figure = make_subplots(rows=2, cols=1, shared_xaxes=True, vertical_spacing=0.08)
    samples = _times(server_samples)
    for n, (key, label) in enumerate(BUFFER_SERIES):
        values = [s.data.get(key) for s in server_samples]
        color = COLORS[n % len(COLORS)]
        figure.add_trace(_timeline_trace(samples, values, label, color, offsets), row=1, col=1)
    figure.add_trace(_checkpoint_markers(checkpoints, offsets, "checkpoints"), row=1, col=1)
    for n, (kind, counts) in enumerate(wait_event_types(server_samples).items()):
        trace = _timeline_trace(samples, counts, kind, COLORS[(n + 3) % len(COLORS)], offsets)
        trace.update(stackgroup="waits", mode="lines", line={"width": 0.5})
        figure.add_trace(trace, row=2, col=1)
    layout = _layout("server: buffers written and wait events", "seconds", "buffers/s", 440)
    layout["yaxis2"] = {"title": {"text": "backends"}, "rangemode": "tozero"}
    layout["xaxis2"] = {"title": {"text": "seconds"}}
    layout["xaxis"] = {"zeroline": False}
    figure.update_layout(layout)
    return figure_json(figure, f"run-{run.pk}-server")


def _ci_bars(summaries: list[Summary]) -> dict:
    return {
        "type": "data",
        "symmetric": False,
        "array": [s.ci_high - s.mean if s.ci_high is not None else 0.0 for s in summaries],
        "arrayminus": [s.mean - s.ci_low if s.ci_low is not None else 0.0 for s in summaries],
        "visible": any(s.n > 1 for s in summaries),
    }


def _hover(clients: int, summary: Summary, found: list[ValidityWarning]) -> str:
    interval = (
        f"95 % CI {summary.ci_low:,.3f} to {summary.ci_high:,.3f}"
        if summary.ci_low is not None
        else "one repeat: no interval"
    )
    lines = [f"{clients} clients, n={summary.n}", interval]
    lines += [f"⚠ {w.title}: {w.detail}" for w in found]
    return "<br>".join(lines)


def _peak_annotation(
    peak: Peak, x: int | str, color: str, label: str, nth: int
) -> dict[str, object]:
    return {
        "x": x,
        "y": peak.summary.mean,
        "text": f"{peak.word} {peak.summary.mean:,.1f} @ {peak.clients}",
        "showarrow": True,
        "arrowhead": 2,
        "ax": 0,
        "ay": -24 - 16 * nth,  # stacked, so peaks at the same client count stay readable
        "font": {"size": 11, "color": color},
        "hovertext": f"{label}: {peak.word} at {peak.clients} clients",
    }


def clients_figure(
    runs: list[Run],
    results: dict[int, list[Result]],
    metric: str,
    labels: dict[int, str],
    name: str,
    cell_warnings: dict[tuple[int, int], list[ValidityWarning]] | None = None,
    peaks: dict[int, Peak] | None = None,
) -> dict:
    """`metric` against clients, one line per run (bars for a single client count).

    Markers are the mean over repeats with 95 % CI error bars; a cell with
    warnings has an open diamond marker (bars: a cross pattern) and its
    warnings, naming the repeats, in the hover; the peak of each run is
    annotated. `cell_warnings` is keyed by (run id, clients), `peaks` by run id.
    """
    cell_warnings, peaks = cell_warnings or {}, peaks or {}
    client_counts = {r.clients for rs in results.values() for r in rs}
    as_bars = len(client_counts) == 1

    def x_of(clients: int) -> int | str:
        return f"{clients} clients" if as_bars else clients

    traces: list[go.Bar | go.Scatter] = []
    annotations: list[dict[str, object]] = []
    for n, run in enumerate(runs):
        color = COLORS[n % len(COLORS)]
        summaries = run_summaries(results.get(run.pk, []), metric)
        found = [cell_warnings.get((run.pk, c), []) for c in summaries]
        common = {
            "x": [x_of(c) for c in summaries],
            "y": [s.mean for s in summaries.values()],
            "name": labels[run.pk],
            "legendgroup": str(run.pk),
            "error_y": _ci_bars(list(summaries.values())),
            "text": [_hover(c, s, f) for (c, s), f in zip(summaries.items(), found, strict=True)],
            "hovertemplate": "%{y:,.3f}<br>%{text}<extra>%{fullData.name}</extra>",
        }
        if as_bars:
            shapes = ["x" if f else "" for f in found]
            traces.append(go.Bar(marker={"color": color, "pattern": {"shape": shapes}}, **common))
        else:
            marker = {
                "color": color,
                "size": [12 if f else 7 for f in found],
                "symbol": ["diamond-open" if f else "circle" for f in found],
                "line": {"width": 2},
            }
            traces.append(go.Scatter(mode="lines+markers", marker=marker, **common))
        if run.pk in peaks:
            peak = peaks[run.pk]
            annotations.append(
                _peak_annotation(peak, x_of(peak.clients), color, labels[run.pk], len(annotations))
            )
    title = f"{METRICS[metric]} against clients (mean, 95 % CI)"
    layout = _layout(title, "clients", METRICS[metric], height=380)
    layout["hovermode"] = "closest"
    layout["annotations"] = annotations
    if not as_bars:
        layout["xaxis"]["type"] = "log" if len(client_counts) > 3 else "linear"
        layout["xaxis"]["tickvals"] = sorted(client_counts)
    return figure_json(go.Figure(traces, layout), f"{name}-{metric}")


def overlaid_timelines(
    runs: list[Run],
    progress: dict[int, list[ProgressSample]],
    results: dict[int, list[Result]],
    labels: dict[int, str],
    name: str,
    offsets: dict[int, Offsets],
) -> dict:
    """tps and latency timelines of several runs on one axis each, one line per run."""
    tps_traces, latency_traces = [], []
    for n, run in enumerate(runs):
        point_names = point_labels(results.get(run.pk, []), run.spec)
        tps, latency = progress_traces(
            progress.get(run.pk, []),
            point_names,
            labels[run.pk],
            COLORS[n % len(COLORS)],
            offsets[run.pk],
        )
        tps_traces.append(tps)
        latency_traces.append(latency)
    return {
        "tps": figure_json(
            go.Figure(tps_traces, _layout("tps over time", "seconds", "tps")), f"{name}-tps-time"
        ),
        "latency": figure_json(
            go.Figure(latency_traces, _layout("latency over time", "seconds", "ms")),
            f"{name}-latency-time",
        ),
    }


def written_per_second(sample: ServerSample) -> float | None:
    """Buffers written per second by checkpointer, background writer and backends together."""
    values = [sample.data.get(key) for key, _label in BUFFER_SERIES]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def overlaid_server(
    runs: list[Run],
    server: dict[int, list[ServerSample]],
    labels: dict[int, str],
    name: str,
    offsets: dict[int, Offsets],
) -> dict:
    """Buffers written per second of several runs on one axis, with each run's checkpoints."""
    traces = []
    for n, run in enumerate(runs):
        color, samples = COLORS[n % len(COLORS)], server.get(run.pk, [])
        values = [written_per_second(s) for s in samples]
        traces.append(
            _timeline_trace(_times(samples), values, labels[run.pk], color, offsets[run.pk])
        )
        events = [e for e in run_checkpoints(samples) if e.edge == "start"]
        traces.append(
            _checkpoint_markers(events, offsets[run.pk], f"checkpoints {labels[run.pk]}", color)
        )
    layout = _layout("buffers written per second, checkpoint starts (▲)", "seconds", "buffers/s")
    return figure_json(go.Figure(traces, layout), f"{name}-server-time")
