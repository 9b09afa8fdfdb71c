"""Statistics tables as pages, the API and exports read them: one query per kind of
row for a set of runs, grouped by cell (runs/analysis/cells.py), then
`runs.analysis.compare.stats_table`."""

from collections.abc import Collection
from dataclasses import dataclass
from typing import TypedDict

from runs import selectors
from runs.analysis.cells import cell_runs, results_by_cell, standing_for
from runs.analysis.compare import COMPARED_METRICS, StatsTable, stats_table, table_records
from runs.analysis.validity import ValidityWarning
from runs.counters.points import movers_by_cell, movers_document
from runs.inference.equivalence import DEFAULT_MARGIN_PCT
from runs.inference.stats import CONFIDENCE
from runs.models import Comparison, Experiment, Result, Run
from runs.timelines import store


class StatsInputs(TypedDict):
    """What `load_inputs` read, each keyed by run id (`in_samples` by run id and point)."""

    cells: list[Run]
    results: dict[int, list[Result]]
    own_results: dict[int, list[Result]]
    digests: dict[int, store.Digest]
    in_samples: dict[tuple[int, int], list[ValidityWarning]]
    rounds: dict[int, int]


def load_inputs(
    runs: list[Run], traces: Collection[str] = (), overview: bool = False
) -> StatsInputs:
    """Everything the statistics of these runs read, in one query per kind.

    `cells` has one run per cell (runs/analysis/cells.py): its `results` are the points
    of every round of that cell. `own_results` are each given run's own points;
    the timeline digests (runs/timelines/store.py, with the `traces` named) are each
    run's own, for every run whose points count (`overview`: their overviews,
    runs.timelines.store.digests); `in_samples` is what each point's samples showed;
    `rounds` the round each run in rounds measured (to pair cells that share rounds).
    """
    cells = cell_runs(runs)
    own_results = selectors.results_by_run(runs)
    results = results_by_cell(cells, own_results)
    counted = {r.run_id for rs in results.values() for r in rs} - {run.pk for run in runs}
    counted_runs = selectors.runs_in_order(sorted(counted))
    digests = store.digests([*runs, *counted_runs], traces, overview)
    return {
        "cells": cells,
        "results": results,
        "own_results": own_results,
        "digests": digests,
        "in_samples": {
            (pk, point): found
            for pk, digest in digests.items()
            for point, found in digest.warnings.items()
        },
        # Every run whose points count is loaded above, with its round: no query of its own.
        "rounds": {run.pk: run.round for run in [*runs, *counted_runs] if run.round is not None},
    }


def table_of(
    loaded: StatsInputs,
    baseline: Run | None,
    min_effect_pct: float,
    metrics: tuple[str, ...],
    margin_pct: float = DEFAULT_MARGIN_PCT,
    keep_unsettled: bool = False,
) -> StatsTable:
    """The statistics table of loaded runs' cells, against the cell `baseline` belongs to;
    verdicts leave out points that never settled unless `keep_unsettled`."""
    cells = loaded["cells"]
    base = standing_for(baseline, cells) if baseline else None
    found = loaded["in_samples"]
    return stats_table(
        cells,
        base,
        loaded["results"],
        found,
        min_effect_pct,
        metrics,
        margin_pct,
        keep_unsettled,
        loaded["rounds"],
    )


def statistics_document(
    table: StatsTable, baseline: Run | None, results: dict[int, list[Result]]
) -> dict[str, object]:
    """A statistics table as the API and the JSON exports answer it, with each compared
    cell's top movers from the cells' `results` (`load_inputs`; runs/counters/movers.py)."""
    base_row = next((row for row in table.rows if row.is_baseline), None)
    movers = movers_document(movers_by_cell(table, results))
    return {
        "baseline_run_id": base_row.run.pk if base_row else baseline and baseline.pk,
        "min_effect_pct": table.min_effect_pct,
        "margin_pct": table.margin_pct,
        "confidence": CONFIDENCE,
        "comparisons": table.comparisons,
        "false_discovery_control": f"Benjamini-Hochberg, q={table.fdr_q:g}",
        "rows": table_records(table),
        "top_movers": movers,
    }


@dataclass(frozen=True)
class Statistics:
    """A set of runs' statistics: the document the API answers, and what it was made from
    (a report, runs/verdict_report/, reads all three)."""

    document: dict[str, object]
    loaded: StatsInputs
    table: StatsTable
    runs: list[Run]
    baseline: Run | None


def statistics_of(
    runs: list[Run],
    baseline: Run | None,
    min_effect_pct: float,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    keep_unsettled: bool = False,
) -> Statistics:
    """The statistics of `runs`' cells against the cell `baseline` belongs to."""
    loaded = load_inputs(runs)
    table = table_of(loaded, baseline, min_effect_pct, COMPARED_METRICS, margin_pct, keep_unsettled)
    document = statistics_document(table, baseline, loaded["results"])
    return Statistics(document, loaded, table, runs, baseline)


def comparison_statistics(
    comparison: Comparison,
    min_effect_pct: float,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    keep_unsettled: bool = False,
) -> Statistics:
    """The statistics of a saved comparison against its baseline."""
    runs = selectors.comparison_runs(comparison)
    baseline = comparison.baseline or (runs[0] if runs else None)
    return statistics_of(runs, baseline, min_effect_pct, margin_pct, keep_unsettled)


def experiment_statistics(
    experiment: Experiment,
    min_effect_pct: float,
    margin_pct: float = DEFAULT_MARGIN_PCT,
    keep_unsettled: bool = False,
) -> Statistics:
    """The statistics of an experiment's cells against its first cell (the cell an adaptive
    experiment compares every other with, runs/services/adaptive.py)."""
    runs = selectors.experiment_runs(experiment)
    baseline = selectors.in_cell_order(runs)[0] if runs else None
    return statistics_of(runs, baseline, min_effect_pct, margin_pct, keep_unsettled)
