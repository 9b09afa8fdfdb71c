"""Charts against clients: the mean of the repeats with its 95 % confidence interval,
points with validity warnings with an open marker (the warnings, naming the repeats,
in the hover), and each run's peak as an annotation.
"""

from runs.analysis.compare import METRICS, Peak, run_summaries
from runs.analysis.validity import ValidityWarning
from runs.charts.figures import COLORS, PlotlyJson, base_layout, figure_json
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
) -> PlotlyJson:
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

    traces: list[PlotlyJson] = []
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
            bar_marker = {"color": color, "pattern": {"shape": shapes}}
            traces.append({"type": "bar", "marker": bar_marker, **common})
        else:
            marker = {
                "color": color,
                "size": [12 if f else 7 for f in found],
                "symbol": ["diamond-open" if f else "circle" for f in found],
                "line": {"width": 2},
            }
            traces.append({"type": "scatter", "mode": "lines+markers", "marker": marker, **common})
        if run.pk in peaks:
            peak = peaks[run.pk]
            annotations.append(
                _peak_annotation(peak, x_of(peak.clients), color, labels[run.pk], len(annotations))
            )
    title = f"{METRICS[metric]} against clients (mean, 95 % CI)"
    x_axis: PlotlyJson = {
        "type": "log" if len(client_counts) > 3 else "linear",
        "tickvals": sorted(client_counts),
    }
    layout = base_layout(
        title, "clients", METRICS[metric], height=380, x_axis=None if as_bars else x_axis
    )
    layout["hovermode"] = "closest"
    layout["annotations"] = annotations
    return figure_json(traces, layout, f"{name}-{metric}")
