"""Plotly figures for the pages, built server-side and drawn by plotly.js.

Timelines put the points of a run one after another on one time axis: a
point starts where the previous one ended, with a gap between them. The page's
live script (frontend/live.js) extends the same traces with the same rule.
"""

import json

import plotly.graph_objects as go

from agents.contract.spec import sweep_points
from runs.compare import METRICS, Spread, run_spreads
from runs.models import HostSample, ProgressSample, Result, Run

COLORS = ("#2f6fdb", "#e8590c", "#2b8a3e", "#ae3ec9", "#c92a2a", "#1098ad", "#5c940d", "#862e9c")
HOST_SERIES = (
    ("cpu_user", "CPU user %"),
    ("cpu_system", "CPU system %"),
    ("cpu_iowait", "CPU iowait %"),
    ("disk_data_util", "disk util % (data)"),
    ("disk_wal_util", "disk util % (WAL)"),
)
PLOT_CONFIG = {"displaylogo": False, "responsive": True, "toImageButtonOptions": {"scale": 2}}


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


def sequential_times(samples: list[tuple[int, float]]) -> list[float | None]:
    """x for each (point, t), points laid end to end; None marks the gap before a new point."""
    xs: list[float | None] = []
    last_x, offset, current = 0.0, 0.0, None
    for point, t in samples:
        if point != current:
            if current is not None:
                xs.append(None)
            offset, current = last_x, point
        last_x = offset + (t or 0.0)
        xs.append(last_x)
    return xs


def _with_gaps(samples: list[tuple[int, float]], values: list) -> list:
    out, current = [], None
    for (point, _t), value in zip(samples, values, strict=True):
        if current is not None and point != current:
            out.append(None)
        current = point
        out.append(value)
    return out


def _timeline_trace(samples, values, name: str, color: str, labels=None) -> go.Scatter:
    return go.Scatter(
        x=sequential_times(samples),
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


def progress_traces(progress: list[ProgressSample], labels: dict[int, str], name: str, color: str):
    """(tps trace, latency trace) of one run's progress samples."""
    samples = [(p.point, p.t) for p in progress]
    text = [labels.get(p.point, "") for p in progress]
    tps = _timeline_trace(samples, [p.tps for p in progress], name, color, text)
    latency = _timeline_trace(samples, [p.latency_ms for p in progress], name, color, text)
    return tps, latency


def point_labels(results: list[Result], spec: dict) -> dict[int, str]:
    """Point index -> `4 clients, repeat 1`, from results and the sweep in the spec."""
    labels = {r.index: f"{r.clients} clients, repeat {r.repeat}" for r in results}
    sweep = spec.get("sweep") or {}
    # Specs stored by older labs or written by hand may lack the defaults.
    planned = (
        sweep_points({"repeats": 1, "order": "ascending", **sweep}) if sweep.get("clients") else []
    )
    for index, (c, r) in enumerate(planned):
        labels.setdefault(index, f"{c} clients, repeat {r}")
    return labels


def run_timelines(run: Run, progress: list[ProgressSample], results: list[Result]) -> dict:
    """{"tps": figure, "latency": figure} of one run, live-extendable (trace 0)."""
    tps, latency = progress_traces(progress, point_labels(results, run.spec), "run", COLORS[0])
    tps_fig = go.Figure([tps], _layout("tps over time", "seconds", "tps"))
    latency_fig = go.Figure([latency], _layout("latency over time", "seconds", "ms"))
    tps_fig.update_layout(showlegend=False)
    latency_fig.update_layout(showlegend=False)
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


def host_figure(run: Run, host_samples: list[HostSample]) -> dict:
    """CPU and disk utilisation of the host during the run, one trace per series."""
    samples = [(s.point, s.t or 0.0) for s in host_samples]
    values = [host_sample_values(s.data) for s in host_samples]
    traces = [
        _timeline_trace(samples, [v[key] for v in values], label, COLORS[n % len(COLORS)])
        for n, (key, label) in enumerate(HOST_SERIES)
    ]
    layout = _layout("host", "seconds", "%", height=260)
    layout["yaxis"]["range"] = [0, 100]
    return figure_json(go.Figure(traces, layout), f"run-{run.pk}-host")


def _error_bars(spreads: list[Spread]) -> dict:
    return {
        "type": "data",
        "symmetric": False,
        "array": [s.maximum - s.mean for s in spreads],
        "arrayminus": [s.mean - s.minimum for s in spreads],
        "visible": any(s.n > 1 for s in spreads),
    }


def clients_figure(
    runs: list[Run],
    results: dict[int, list[Result]],
    metric: str,
    labels: dict[int, str],
    name: str,
) -> dict:
    """`metric` against clients, one line per run (bars for a single client count).

    Markers are the mean over repeats; error bars span min to max.
    """
    client_counts = {r.clients for rs in results.values() for r in rs}
    as_bars = len(client_counts) == 1
    traces = []
    for n, run in enumerate(runs):
        spreads = run_spreads(results.get(run.pk, []), metric)
        x = [f"{c} clients" for c in spreads] if as_bars else list(spreads)
        common = {
            "x": x,
            "y": [s.mean for s in spreads.values()],
            "name": labels[run.pk],
            "error_y": _error_bars(list(spreads.values())),
            "marker": {"color": COLORS[n % len(COLORS)]},
        }
        traces.append(go.Bar(**common) if as_bars else go.Scatter(mode="lines+markers", **common))
    title = f"{METRICS[metric]} against clients"
    layout = _layout(title, "clients", METRICS[metric], height=360)
    layout["hovermode"] = "closest"
    if not as_bars:
        layout["xaxis"]["type"] = "log" if len(client_counts) > 3 else "linear"
        layout["xaxis"]["tickvals"] = sorted(client_counts)
    return figure_json(go.Figure(traces, layout), f"{name}-{metric}")


def overlaid_timelines(
    runs: list[Run], progress: dict[int, list[ProgressSample]], results, labels, name: str
) -> dict:
    """tps and latency timelines of several runs on one axis each, one line per run."""
    tps_traces, latency_traces = [], []
    for n, run in enumerate(runs):
        point_names = point_labels(results.get(run.pk, []), run.spec)
        tps, latency = progress_traces(
            progress.get(run.pk, []), point_names, labels[run.pk], COLORS[n % len(COLORS)]
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
