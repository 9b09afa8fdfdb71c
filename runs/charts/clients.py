"""Charts against clients: the mean of the repeats with its 95 % confidence interval,
points with validity warnings with an open marker (the warnings, naming the repeats,
in the hover), and each run's peak as an annotation while there are few enough runs
for the labels to stay apart (past that the peaks table under the chart lists them).
"""

import math
from collections import Counter

from runs.analysis.compare import METRICS, Peak, run_summaries
from runs.analysis.validity import ValidityWarning
from runs.charts.figures import (
    PlotlyJson,
    TraceStyle,
    base_layout,
    figure_json,
    trace_style,
    with_legend_below,
)
from runs.inference.stats import Summary
from runs.models import Result, Run


def _ci_bars(summaries: list[Summary]) -> PlotlyJson:
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


# Past this many runs with a peak the chart carries no peak labels: sixteen of them
# stacked up into the title; the peaks table under the chart lists them instead.
PEAK_ANNOTATIONS_MAX = 4
PLOT_PX = 280
MARGIN = {"l": 60, "r": 20, "t": 50, "b": 50}


def annotates_peaks(peaks: dict[int, Peak]) -> bool:
    """Whether the chart labels each run's peak (else the page shows the peaks table)."""
    return 0 < len(peaks) <= PEAK_ANNOTATIONS_MAX


def _peak_annotation(
    peak: Peak, x: float | str, color: str, label: str, nth: int
) -> dict[str, object]:
    return {
        "x": x,
        "y": peak.summary.mean,
        "text": f"{peak.word} {peak.summary.mean:,.1f} @ {peak.clients}",
        "showarrow": True,
        "arrowhead": 2,
        "ax": 0,
        # Stacked when peaks share a client count; the page's script moves any label
        # that still lands on another (frontend/charts.js).
        "ay": -24 - 16 * nth,
        "font": {"size": 11, "color": color},
        "hovertext": f"{label}: {peak.word} at {peak.clients} clients",
    }


def _marker(style: TraceStyle, found: list[list[ValidityWarning]]) -> PlotlyJson:
    return {
        "color": style.color,
        "size": [12 if f else 7 for f in found],
        "symbol": ["diamond-open" if f else style.symbol for f in found],
        "line": {"width": 2},
    }


def clients_figure(
    runs: list[Run],
    results: dict[int, list[Result]],
    metric: str,
    labels: dict[int, str],
    name: str,
    cell_warnings: dict[tuple[int, int], list[ValidityWarning]] | None = None,
    peaks: dict[int, Peak] | None = None,
) -> PlotlyJson:
    """`metric` against clients, one line per run (bars for a single client count).

    Markers are the mean over repeats with 95 % CI error bars; a cell with
    warnings has an open diamond marker (bars: a cross pattern) and its
    warnings, naming the repeats, in the hover; each run has its own colour,
    dash and marker (trace_style); the peak of each run is annotated up to
    PEAK_ANNOTATIONS_MAX runs. `cell_warnings` is keyed by (run id, clients),
    `peaks` by run id.
    """
    cell_warnings, peaks = cell_warnings or {}, peaks or {}
    client_counts = {r.clients for rs in results.values() for r in rs}
    as_bars = len(client_counts) == 1

    log_x = not as_bars and len(client_counts) > 3

    def x_of(clients: int) -> int | str:
        return f"{clients} clients" if as_bars else clients

    def label_x(clients: int) -> float | str:
        """Where a label points: plotly places annotations on a log axis by the log10 of x
        (given x itself, a label at 8 clients stood at 10^8, past the plot's end)."""
        return math.log10(clients) if log_x else x_of(clients)

    traces: list[PlotlyJson] = []
    annotations: list[dict[str, object]] = []
    annotated = annotates_peaks(peaks)
    at_clients: Counter[int] = Counter()
    for n, run in enumerate(runs):
        style = trace_style(n)
        summaries = run_summaries(results.get(run.pk, []), metric)
        found = [cell_warnings.get((run.pk, c), []) for c in summaries]
        common = {
            "x": [x_of(c) for c in summaries],
            "y": [s.mean for s in summaries.values()],
            "name": labels[run.pk],
            "legendgroup": str(run.pk),
            "error_y": _ci_bars(list(summaries.values())),
            # hovertext, never text: a bar draws its text inside itself.
            "hovertext": [
                _hover(c, s, f) for (c, s), f in zip(summaries.items(), found, strict=True)
            ],
            "hovertemplate": "%{y:,.3f}<br>%{hovertext}<extra>%{fullData.name}</extra>",
        }
        if as_bars:
            shapes = ["x" if f else style.pattern for f in found]
            bar_marker = {"color": style.color, "pattern": {"shape": shapes}}
            traces.append({"type": "bar", "marker": bar_marker, "textposition": "none", **common})
        else:
            line = {"color": style.color, "dash": style.dash}
            marker = _marker(style, found)
            traces.append(
                {
                    "type": "scatter",
                    "mode": "lines+markers",
                    "line": line,
                    "marker": marker,
                    **common,
                }
            )
        if annotated and run.pk in peaks:
            peak = peaks[run.pk]
            nth = at_clients[peak.clients]
            at_clients[peak.clients] += 1
            label = labels[run.pk]
            annotations.append(
                _peak_annotation(peak, label_x(peak.clients), style.color, label, nth)
            )
    title = f"{METRICS[metric]} against clients (geometric mean, 95 % CI)"
    x_axis: PlotlyJson = {
        "type": "log" if log_x else "linear",
        "tickvals": sorted(client_counts),
    }
    layout = base_layout(title, "clients", METRICS[metric], x_axis=None if as_bars else x_axis)
    layout = with_legend_below(layout, [labels[run.pk] for run in runs], "", PLOT_PX, MARGIN)
    layout["hovermode"] = "closest"
    layout["annotations"] = annotations
    return figure_json(traces, layout, f"{name}-{metric}")
