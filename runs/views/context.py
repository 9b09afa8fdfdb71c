"""What a run, experiment or comparison page shows, for signed-in and shared views alike.

`urls` in each context holds the links that differ between the two (the live
stream and the exports); `read_only` hides everything that writes.
"""

from collections.abc import Callable

from runs import charts, selectors
from runs.cells import cell_runs, results_by_cell, standing_for
from runs.compare import METRICS, compare_points, differences
from runs.models import Comparison, Experiment, Run


def run_label(run: Run) -> str:
    """`#12 pg16 · tuned · tpcb` — short enough for a legend; a cell measured in
    rounds is named by its experiment and cell (`e7 cell 2 pg16 · tuned · tpcb`)."""
    what = f"{run.build.name} · {run.config_profile.name} · {run.workload.name}"
    if run.round is not None:
        return f"e{run.experiment_id} cell {run.cell + 1} {what}"
    return f"#{run.pk} {what}"


def run_context(run: Run, read_only: bool, urls: dict[str, str]) -> dict:
    """The run page: status, results, timelines, host samples, snapshot and logs."""
    progress = selectors.run_progress(run)
    results = list(run.results.order_by("index"))
    cursor = selectors.live_cursor(run)
    return {
        "run": run,
        "results": results,
        "figures": {
            **charts.run_timelines(run, progress, results),
            "host": charts.host_figure(run, selectors.run_host_samples(run)),
        },
        "has_progress": bool(progress),
        "cursor": f"p{cursor['p']}.h{cursor['h']}.r{cursor['r']}",
        "logs": selectors.run_logs(run),
        "spec": {key: value for key, value in run.spec.items() if key != "token"},
        "commands": [step for step in run.steps if step.get("argv")],
        "read_only": read_only,
        "urls": urls,
    }


def experiment_context(
    experiment: Experiment, metric: str, read_only: bool, urls: dict[str, str]
) -> dict:
    """The experiment page: its runs in queue order, and the chosen metric against
    clients per cell (`cells`: one run stands for each cell measured in rounds)."""
    runs = selectors.experiment_runs(experiment)
    cells = cell_runs(runs)
    results = results_by_cell(cells)
    labels = {run.pk: run_label(run) for run in cells}
    name = f"experiment-{experiment.pk}"
    return {
        "experiment": experiment,
        "runs": runs,
        "cells": cells,
        "metric": metric,
        "metrics": METRICS,
        "figure": charts.clients_figure(cells, results, metric, labels, name) if runs else None,
        "has_results": any(results.values()),
        "read_only": read_only,
        "urls": urls,
    }


def comparison_context(
    runs: list[Run], baseline: Run, read_only: bool, urls: dict[str, str], name: str
) -> dict:
    """The compare page: charts, the table of deltas, what differs, timelines.

    Runs measured in rounds are compared as their cells (runs/cells.py).
    """
    runs = cell_runs(runs)
    baseline = standing_for(baseline, runs)
    results = results_by_cell(runs)
    labels = {run.pk: run_label(run) for run in runs}
    return {
        "runs": runs,
        "baseline": baseline,
        "labels": labels,
        "figures": {
            "tps": charts.clients_figure(runs, results, "tps", labels, name),
            "latency": charts.clients_figure(runs, results, "latency_avg_ms", labels, name),
            # A cell in rounds draws the timeline of the run standing for it.
            "timelines": charts.overlaid_timelines(
                runs, selectors.progress_by_run(runs), selectors.results_by_run(runs), labels, name
            ),
        },
        "points": compare_points(runs, baseline, results),
        "differences": differences(runs),
        "read_only": read_only,
        "urls": urls,
    }


def saved_comparison_context(comparison: Comparison, read_only: bool, urls: dict[str, str]) -> dict:
    runs = selectors.comparison_runs(comparison)
    baseline = comparison.baseline or runs[0]
    context = comparison_context(runs, baseline, read_only, urls, f"comparison-{comparison.pk}")
    return {**context, "comparison": comparison}


def export_urls(make: Callable[[str], str]) -> dict[str, str]:
    return {"csv": make("csv"), "json": make("json")}
