"""The series page's figures: each metric over time, per line (cell and client count).

Each occurrence is a point with its 95 % confidence interval; change points
are dashed vertical lines, notes on the series' runs and hosts dotted ones.
"""

import plotly.graph_objects as go

from runs.analysis.compare import METRICS
from runs.charts.figures import PlotlyFigure
from runs.inference.changepoints import change_points
from runs.models import Note, Run, Series
from runs.services.history.series import (
    SERIES_METRICS,
    HistoryPoint,
    notes_for_runs,
    series_history,
)


def series_figures(series: Series) -> dict[str, PlotlyFigure]:
    """Metric -> its figure (plotly's plain dict: `data`, `layout`) over the series' history,
    for each metric that was measured."""
    runs = list(Run.objects.filter(experiment__occurrence__series=series))
    notes = notes_for_runs(runs)
    histories = {metric: series_history(series, metric) for metric in SERIES_METRICS}
    return {
        metric: _metric_figure(metric, lines, notes).to_plotly_json()
        for metric, lines in histories.items()
        if lines
    }


def _metric_figure(
    metric: str, lines: dict[str, list[HistoryPoint]], notes: list[Note]
) -> go.Figure:
    figure = go.Figure()
    for key, points in lines.items():
        figure.add_trace(_trace(key, points))
        for change in change_points([p.mean for p in points]):
            when = points[change.index].occurrence.fired_at
            figure.add_vline(
                x=when.timestamp() * 1000,
                line={"dash": "dash", "color": "#c0392b"},
                annotation_text=f"change {change.change_percent:+.1f} % ({key})",
            )
    for note in notes:
        figure.add_vline(
            x=note.created_at.timestamp() * 1000,
            line={"dash": "dot", "color": "#7f8c8d"},
            annotation_text=note.text[:40],
            annotation_position="bottom right",
        )
    figure.update_layout(
        title={"text": f"{METRICS[metric]} over time", "x": 0, "font": {"size": 14}},
        template="plotly_white",
        height=340,
        xaxis={"type": "date", "title": {"text": "occurrence"}},
        yaxis={"title": {"text": METRICS[metric]}, "rangemode": "tozero"},
        legend={"orientation": "h", "y": -0.25},
    )
    return figure


def _trace(key: str, points: list[HistoryPoint]) -> go.Scatter:
    return go.Scatter(
        name=key,
        mode="lines+markers",
        x=[p.occurrence.fired_at for p in points],
        y=[p.mean for p in points],
        error_y={
            "type": "data",
            "symmetric": False,
            "array": [(p.high - p.mean) if p.high is not None else 0 for p in points],
            "arrayminus": [(p.mean - p.low) if p.low is not None else 0 for p in points],
        },
        text=[p.occurrence.experiment.name for p in points],
    )
