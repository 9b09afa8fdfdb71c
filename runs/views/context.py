"""What a run, experiment or comparison page shows, for signed-in and shared views alike.

`urls` in each context holds the links that differ between the two (the live
stream and the exports); `read_only` hides everything that writes.
"""

from collections.abc import Callable

from runs import charts, selectors, stats
from runs import warnings as checks
from runs.cells import standing_for
from runs.compare import (
    COMPARED_METRICS,
    METRICS,
    StatsTable,
    differences,
    point_warnings,
    stats_table,
)
from runs.models import ClientHostSample, Comparison, Experiment, Run
from runs.sse import format_cursor
from runs.tables import StatsInputs, load_inputs, table_of


def run_label(run: Run) -> str:
    """`#12 pg16 · tuned · tpcb` — short enough for a legend; a cell measured in
    rounds is named by its experiment and cell (`e7 cell 2 pg16 · tuned · tpcb`)."""
    what = f"{run.build.name} · {run.config_profile.name} · {run.workload.name}"
    if run.round is not None:
        return f"e{run.experiment_id} cell {run.cell + 1} {what}"
    return f"#{run.pk} {what}"


def _client_host_samples(run: Run) -> list[ClientHostSample] | None:
    """The client host's samples of a run with a client host; None for the others."""
    if run.client_host_id is None:
        return None
    return list(run.client_host_samples.order_by("point", "t", "pk"))


def run_context(run: Run, read_only: bool, urls: dict[str, str]) -> dict[str, object]:
    """The run page: status, results with their warnings, timelines with the server's
    activity on the same axis, host samples, snapshot and logs."""
    progress = selectors.run_progress(run)
    host, server = selectors.run_host_samples(run), selectors.run_server_samples(run)
    results = list(run.results.order_by("index"))
    samples = selectors.samples_by_point(
        {run.pk: progress}, {run.pk: host}, {run.pk: server}, [run.pk] if run.client_host_id else []
    )
    by_point = {index: found for (_run, index), found in point_warnings(results, samples).items()}
    offsets = charts.offsets_for(progress, host, server)
    checkpoints = charts.run_checkpoints(server)
    return {
        "run": run,
        "results": results,
        "point_warnings": by_point,
        "run_warnings": checks.run_warnings(run, results),
        "checkpoints": [e for e in checkpoints if e.edge == "start"],
        "figures": {
            **charts.run_timelines(run, progress, results, offsets, checkpoints, by_point),
            "host": charts.host_figure(run, host, offsets, _client_host_samples(run)),
            "server": charts.server_figure(run, server, offsets, checkpoints),
        },
        "has_progress": bool(progress),
        "has_server_samples": bool(server),
        "cursor": format_cursor(selectors.live_cursor(run)),
        "logs": selectors.run_logs(run),
        "spec": {key: value for key, value in run.spec.items() if key != "token"},
        "commands": [step for step in run.steps if step.get("argv")],
        "read_only": read_only,
        "urls": urls,
    }


def _clients_chart(
    loaded: StatsInputs, table: StatsTable, metric: str, labels: dict[int, str], name: str
) -> dict:
    peaks = {pk: found[metric] for pk, found in table.peaks.items() if metric in found}
    return charts.clients_figure(
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
    labels = {run.pk: run_label(run) for run in cells}
    table = stats_table(cells, None, loaded["results"], loaded["samples"], metrics=(metric,))
    name = f"experiment-{experiment.pk}"
    return {
        "experiment": experiment,
        "runs": runs,
        "cells": cells,
        "labels": labels,
        "metric": metric,
        "metrics": METRICS,
        "table": table,
        "figure": _clients_chart(loaded, table, metric, labels, name) if runs else None,
        "has_results": any(loaded["results"].values()),
        "read_only": read_only,
        "urls": urls,
    }


def min_effect_from(raw: str | None) -> tuple[float, str]:
    """(minimum effect in percent, error text): the default with the error on bad input."""
    try:
        return stats.parse_min_effect(raw), ""
    except ValueError as exc:
        return stats.DEFAULT_MIN_EFFECT_PCT, str(exc)


def comparison_context(
    runs: list[Run],
    baseline: Run,
    read_only: bool,
    urls: dict[str, str],
    name: str,
    min_effect_raw: str | None = None,
) -> dict[str, object]:
    """The compare page: charts, the statistics table against the baseline, what differs,
    timelines and the server's activity overlaid.

    Runs measured in rounds are compared as their cells (runs/cells.py); a
    cell's timelines are those of the run standing for it (one cluster's story).
    """
    min_effect, min_effect_error = min_effect_from(min_effect_raw)
    loaded = load_inputs(runs)
    runs = loaded["cells"]
    baseline = standing_for(baseline, runs)
    labels = {run.pk: run_label(run) for run in runs}
    table = table_of(loaded, baseline, min_effect, COMPARED_METRICS)
    progress, offsets = loaded["progress"], loaded["offsets"]
    return {
        "runs": runs,
        "baseline": baseline,
        "labels": labels,
        "metrics": METRICS,
        "table": table,
        "min_effect_error": min_effect_error,
        "figures": {
            "tps": _clients_chart(loaded, table, "tps", labels, name),
            "latency": _clients_chart(loaded, table, "latency_avg_ms", labels, name),
            "timelines": charts.overlaid_timelines(
                runs, progress, loaded["own_results"], labels, name, offsets
            ),
            "server": charts.overlaid_server(runs, loaded["server"], labels, name, offsets),
        },
        "has_server_samples": any(loaded["server"].get(run.pk) for run in runs),
        "differences": differences(runs),
        "read_only": read_only,
        "urls": urls,
    }


def saved_comparison_context(
    comparison: Comparison, read_only: bool, urls: dict[str, str], min_effect_raw: str | None = None
) -> dict[str, object]:
    runs = selectors.comparison_runs(comparison)
    baseline = comparison.baseline or runs[0]
    name = f"comparison-{comparison.pk}"
    context = comparison_context(runs, baseline, read_only, urls, name, min_effect_raw)
    return {**context, "comparison": comparison}


def export_urls(make: Callable[[str], str]) -> dict[str, str]:
    return {"csv": make("csv"), "json": make("json")}
