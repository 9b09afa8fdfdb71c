"""What a comparison page shows, signed in or shared: the chart in the layout the URL
asks for (runs/analysis/chart_layout.py), its pivot tables, the statistics table against the
baseline the URL names, what differs, and every repeat's timeline.

Everything the page can change (chart layout, filters, baseline, minimum effect) is a query
parameter, so a link, a share link with the same query, and a reload draw the same page.
"""

from collections.abc import Mapping

from runs import selectors
from runs.analysis.cells import standing_for
from runs.analysis.chart_layout import (
    FILTER_PREFIX,
    NONE,
    SLOT_TITLES,
    SLOTS,
    ChartLayout,
    Dimension,
    cell_labels,
    dimensions,
    layout_from_query,
    varying,
)
from runs.analysis.compare import COMPARED_METRICS, METRICS
from runs.analysis.pivot import pivot, placed_points
from runs.analysis.whatdiffers import shown_differences, wal_apart_on_data_device
from runs.charts import flames
from runs.charts import timelines as timeline_charts
from runs.charts.laid_out import laid_out_figure
from runs.counters.points import movers_by_cell, movers_by_run
from runs.flamegraphs.changes import changed_frames, tree_changes
from runs.flamegraphs.pages import cpu_profile_pairs
from runs.flamegraphs.trees import flame_tree
from runs.models import Comparison, Run
from runs.services.history.series import notes_for_runs
from runs.stats_tables import load_inputs, table_of
from runs.timelines import store
from runs.timelines.downsample import MIN_TRACE_SAMPLES, trace_budget
from runs.views.content.context import has_server_samples, margin_from, min_effect_from


def baseline_from(runs: list[Run], saved: Run, raw: str | None) -> tuple[Run, str]:
    """(baseline, error text): the run the URL's `baseline` names among the compared
    runs, else the saved baseline with an error saying what to pick."""
    if not raw:
        return saved, ""
    found = next((run for run in runs if str(run.pk) == raw), None)
    if found is None:
        return saved, f"baseline: {raw!r} is not one of the compared runs; pick one from the list"
    return found, ""


def layout_controls(
    dims: Mapping[str, Dimension], chart_layout: ChartLayout
) -> list[dict[str, object]]:
    """The selects of the layout form: each slot with its choices, then each filter."""
    keys = varying(dims) or ["clients"]
    controls: list[dict[str, object]] = []
    for slot in SLOTS:
        choices = [(key, dims[key].title) for key in keys]
        if slot != "x":
            choices.append((NONE, "none"))
        chosen = chart_layout.slot(slot) or NONE
        controls.append(
            {"name": slot, "title": SLOT_TITLES[slot], "chosen": chosen, "choices": choices}
        )
    for key, value in chart_layout.filters.items():
        choices = [(v, v) for v in dims[key].values]
        title = f"only {dims[key].title}"
        controls.append(
            {"name": FILTER_PREFIX + key, "title": title, "chosen": value, "choices": choices}
        )
    return controls


def comparison_context(
    runs: list[Run],
    baseline: Run,
    read_only: bool,
    urls: dict[str, str],
    name: str,
    query: Mapping[str, str],
) -> dict[str, object]:
    """The compare page (see the module docstring). Runs measured in rounds are compared
    as their cells (runs/analysis/cells.py), each cell's timelines one line per round."""
    min_effect, min_effect_error = min_effect_from(query.get("min_effect"))
    margin, margin_error = margin_from(query.get("margin"))
    baseline, baseline_error = baseline_from(runs, baseline, query.get("baseline"))
    overview = trace_budget(len(runs)) <= MIN_TRACE_SAMPLES
    loaded = load_inputs(runs, store.COMPARE_TRACES, overview)
    cells, results = loaded["cells"], loaded["results"]
    baseline = standing_for(baseline, cells)
    dims = dimensions(cells, {r.clients for rs in results.values() for r in rs})
    chart_layout, layout_errors = layout_from_query(dims, query)
    labels = cell_labels(cells, dims)
    keep_unsettled = query.get("keep_unsettled") == "1"
    table = table_of(loaded, baseline, min_effect, COMPARED_METRICS, margin, keep_unsettled)
    points = {m: placed_points(table, results, dims, chart_layout, m) for m in COMPARED_METRICS}
    repeats = {pk: list(dict.fromkeys(r.run_id for r in rs)) for pk, rs in results.items()}
    digests = loaded["digests"]
    return {
        "runs": cells,
        "baseline": baseline,
        "labels": labels,
        "metrics": METRICS,
        "table": table,
        "layout_controls": layout_controls(dims, chart_layout),
        "pivots": [pivot(points[m], chart_layout, dims, m) for m in COMPARED_METRICS],
        "errors": [
            e for e in (min_effect_error, margin_error, baseline_error, *layout_errors) if e
        ],
        "min_effect_error": min_effect_error,
        "margin_error": margin_error,
        "figures": {
            "tps": laid_out_figure(points["tps"], chart_layout, dims, "tps", name),
            "latency": laid_out_figure(
                points["latency_avg_ms"], chart_layout, dims, "latency_avg_ms", name
            ),
            "timelines": timeline_charts.overlaid_timelines(cells, digests, labels, name, repeats),
            "server": timeline_charts.overlaid_server(cells, digests, labels, name),
        },
        "movers": movers_by_run(movers_by_cell(table, results)),
        "cpu_profiles": cpu_profile_differences(cells, baseline, runs, labels, name),
        "has_server_samples": any(has_server_samples(digests[run.pk]) for run in cells),
        "differences": shown_differences(cells),
        "wal_warnings": wal_apart_on_data_device(cells, labels),
        "read_only": read_only,
        "urls": urls,
    }


def cpu_profile_differences(
    cells: list[Run], baseline: Run, runs: list[Run], labels: Mapping[int, str], name: str
) -> list[dict[str, object]]:
    """Each compared cell's CPU profile against the baseline's, as a differential flame graph."""
    panels: list[dict[str, object]] = []
    for pair in cpu_profile_pairs(cells, baseline, runs):
        base_label, label = labels[baseline.pk], labels[pair.cell.pk]
        tree = flame_tree(pair.other.folded, pair.base.folded)
        title = f"{label} against {base_label}, {pair.other.clients} clients"
        figure_name = f"{name}-cpu-profile-{pair.cell.pk}"
        changes = tree_changes(tree)
        figure = flames.diff_flame_figure(tree, base_label, label, title, figure_name, changes)
        panel_id = f"fig-cpu-profile-diff-{pair.cell.pk}"
        gone = [
            {
                "frame": found.node.label,
                "caller": found.node.parent.rpartition(";")[2] or "all",
                "points": found.change.points,
                "q": found.change.q,
            }
            for found in changed_frames(tree.gone, changes.gone)
        ]
        panels.append({"pair": pair, "figure": figure, "id": panel_id, "gone": gone})
    return panels


def saved_comparison_context(
    comparison: Comparison, read_only: bool, urls: dict[str, str], query: Mapping[str, str]
) -> dict[str, object]:
    runs = selectors.comparison_runs(comparison)
    baseline = comparison.baseline or runs[0]
    name = f"comparison-{comparison.pk}"
    context = comparison_context(runs, baseline, read_only, urls, name, query)
    return {**context, "comparison": comparison, "notes": notes_for_runs(runs)}
