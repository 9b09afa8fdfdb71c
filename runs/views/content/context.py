"""What a run or experiment page shows, for signed-in and shared views alike (the
comparison page: runs/views/content/comparing.py).

`urls` in each context holds the links that differ between the two (the live
stream and the exports); `read_only` hides everything that writes.
"""

from collections.abc import Callable

from runs import selectors
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS
from runs.analysis import run_checks
from runs.analysis.chart_layout import cell_labels, dimensions
from runs.analysis.compare import (
    METRICS,
    Peak,
    StatsTable,
    point_warnings,
    stats_table,
)
from runs.analysis.duet_windows import TOGETHER_FLOOR, duet_windows
from runs.charts import clients, flames
from runs.charts import timelines as timeline_charts
from runs.counters.points import counter_table, statement_points
from runs.flamegraphs.pages import run_cpu_profiles
from runs.flamegraphs.trees import flame_tree
from runs.inference import equivalence, stats
from runs.models import Experiment, Run, imported_file
from runs.selectors import LiveCursor
from runs.services.history.imported import same_output_as
from runs.services.history.series import notes_for_runs
from runs.sse import format_cursor
from runs.stats_tables import StatsInputs, load_inputs
from runs.timelines import store
from runs.views.content.adaptive import adaptive_summary, spread_split
from runs.views.content.capacity import capacity_summary


def run_label(run: Run) -> str:
    """`#12 pg16 · tuned · tpcb` — short enough for a legend; a cell measured in
    rounds is named by its experiment and cell (`e7 cell 2 pg16 · tuned · tpcb`),
    an imported run by its file (`#31 c8.log · imported 9.2 · imported tpcb-like, ...`:
    its config is always "settings unknown")."""
    file_name = imported_file(run)
    if file_name is not None:
        return f"#{run.pk} {file_name} · {run.build.name} · {run.workload.name}"
    what = f"{run.build.name} · {run.config_profile.name} · {run.workload.name}"
    if run.round is not None:
        return f"e{run.experiment_id} cell {run.cell + 1} {what}"
    return f"#{run.pk} {what}"


def run_context(run: Run, read_only: bool, urls: dict[str, str]) -> dict[str, object]:
    """The run page: status, results with their warnings, timelines with the server's
    activity on the same axis, host samples, snapshot and logs."""
    digest = store.digests([run])[run.pk]
    results = list(run.results.order_by("index"))
    in_samples = {(run.pk, point): found for point, found in digest.warnings.items()}
    found = point_warnings(results, in_samples)
    by_point = {index: warnings for (_run, index), warnings in found.items()}
    return {
        "run": run,
        "results": results,
        "counter_rows": counter_table(results),
        "statement_points": statement_points(results),
        "cpu_profiles": cpu_profile_panels(run),
        "point_warnings": by_point,
        "run_warnings": run_checks.run_warnings(run, results),
        "checkpoints": [e for e in digest.checkpoints if e.edge == "start"],
        "figures": {
            **timeline_charts.run_timelines(run, digest, by_point),
            "host": timeline_charts.host_figure(run, digest),
            "server": timeline_charts.server_figure(run, digest),
        },
        "has_progress": bool(digest.traces.get("tps")),
        "has_server_samples": has_server_samples(digest),
        "cursor": format_cursor(_live_cursor(run, digest)),
        "logs": selectors.run_logs(run),
        "spec": {key: value for key, value in run.spec.items() if key != "token"},
        "commands": [step for step in run.steps if step.get("argv")],
        "run_notes": notes_for_runs([run]),
        "same_output_as": same_output_as(run),
        "read_only": read_only,
        "urls": urls,
    }


def cpu_profile_panels(run: Run) -> list[dict[str, object]]:
    """The points of the run's CPU-profile pass: each one's flame graph, or why it has none."""
    panels: list[dict[str, object]] = []
    for cpu_profile in run_cpu_profiles(run):
        figure = None
        if cpu_profile.folded:
            title = (
                f"Server CPU at {cpu_profile.clients} clients: {cpu_profile.kept_samples:,} of "
                f"{cpu_profile.samples:,} samples (perf {cpu_profile.event}, "
                f"{cpu_profile.frequency_hz} Hz)"
            )
            name = f"run-{run.pk}-cpu-profile-{cpu_profile.clients}"
            figure = flames.flame_figure(flame_tree(cpu_profile.folded), title, name)
        panel_id = f"fig-cpu-profile-{cpu_profile.index}"
        panels.append({"cpu_profile": cpu_profile, "figure": figure, "id": panel_id})
    return panels


def _live_cursor(run: Run, digest: store.Digest) -> LiveCursor:
    """Where the live stream starts: after the samples the page's digest holds (a running
    run's, stored by the control worker, may be a minute old) and the results the page shows."""
    stored = selectors.live_cursor(run)
    cursor: LiveCursor = {
        "p": digest.cursor.get("p", stored["p"]),
        "h": digest.cursor.get("h", stored["h"]),
        "r": stored["r"],
    }
    if "c" in stored:
        cursor["c"] = digest.cursor.get("c", stored["c"])
    cursor["s"] = digest.cursor.get("s", stored.get("s", 0))
    return cursor


def has_server_samples(digest: store.Digest) -> bool:
    return any(len(s) for name, s in digest.traces.items() if name.startswith(("server.", "wait.")))


def _clients_chart(
    loaded: StatsInputs,
    table: StatsTable,
    metric: str,
    labels: dict[int, str],
    name: str,
    peaks: dict[int, Peak],
) -> dict[str, object]:
    return clients.clients_figure(
        loaded["cells"],
        loaded["results"],
        metric,
        labels,
        name,
        cell_warnings=table.cell_warnings(),
        peaks=peaks,
    )


def experiment_context(
    experiment: Experiment, metric: str, read_only: bool, urls: dict[str, str]
) -> dict[str, object]:
    """The experiment page: its runs in queue order, and the chosen metric against
    clients per cell (`cells`: one run stands for each cell measured in rounds)
    with its statistics, warnings and peaks."""
    runs = selectors.experiment_runs(experiment)
    loaded = load_inputs(runs)
    cells = loaded["cells"]
    dims = dimensions(cells, {r.clients for rs in loaded["results"].values() for r in rs})
    labels = cell_labels(cells, dims)
    table = stats_table(cells, None, loaded["results"], loaded["in_samples"], metrics=(metric,))
    name = f"experiment-{experiment.pk}"
    peaks = {pk: found[metric] for pk, found in table.peaks.items() if metric in found}
    return {
        "experiment": experiment,
        "runs": runs,
        "cells": cells,
        "labels": labels,
        "metric": metric,
        "metrics": METRICS,
        "table": table,
        "figure": _clients_chart(loaded, table, metric, labels, name, peaks) if runs else None,
        # Past a few runs the chart carries no peak labels: the peaks table goes under it.
        "peaks_on_chart": clients.annotates_peaks(peaks),
        "has_results": any(loaded["results"].values()),
        "read_only": read_only,
        "urls": urls,
        "adaptive": adaptive_summary(
            experiment, {run.cell: labels[run.pk] for run in cells if run.pk in labels}
        ),
        "capacity": capacity_summary(experiment),
        "spread": spread_split(experiment, loaded["results"]) if runs else None,
        # How long a duet's two sides ran together, point by point.
        "duet_windows": duet_windows(runs, loaded["own_results"]) if experiment.duet else None,
        "together_floor_pct": round(100 * TOGETHER_FLOOR),
        "sweep_choices": [
            (field.label, getattr(experiment, field.name))
            for field in EXPERIMENT_ROW_FIELDS
            if field.kind == "choice"
        ],
    }


def min_effect_from(raw: str | None) -> tuple[float, str]:
    """(minimum effect in percent, error text): the default with the error on bad input."""
    try:
        return stats.parse_min_effect(raw), ""
    except ValueError as exc:
        return stats.DEFAULT_MIN_EFFECT_PCT, str(exc)


def margin_from(raw: str | None) -> tuple[float, str]:
    """(equivalence margin in percent, error text): the default with the error on bad input."""
    try:
        return equivalence.parse_margin(raw), ""
    except ValueError as exc:
        return equivalence.DEFAULT_MARGIN_PCT, str(exc)


def export_urls(make: Callable[[str], str]) -> dict[str, str]:
    return {"csv": make("csv"), "json": make("json")}
