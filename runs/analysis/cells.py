"""The runs of an experiment in rounds, seen as the cells they measure.

In rounds every repeat of a cell is its own run (docs/decisions.md), but
people compare cells: every view that summarises repeats shows one entry
per cell whose repeats are the cell's rounds. A cell's rounds are the runs of
one experiment with the same `cell` and a `round`; the first of them in the
list given stands for the cell, and its entry in `results_by_cell` holds the
points of every round. A run in blocks mode is its own cell, as before.
"""

from collections.abc import Iterable

from runs import selectors
from runs.models import Result, Run

CellKey = tuple[int, int]


def cell_key(run: Run) -> CellKey | None:
    """(experiment id, cell) for a run measured in rounds; None for a run holding every repeat."""
    if run.round is None:
        return None
    return (run.experiment_id, run.cell)


def share_rounds(run: Run, baseline: Run) -> bool:
    """Both cells ran in the same rounds of one experiment on one host: each repeat has
    the baseline's repeat of its round beside it to be compared with
    (runs/inference/paired.py)."""
    return (
        run.pk != baseline.pk
        and run.round is not None
        and baseline.round is not None
        and run.experiment_id == baseline.experiment_id
        and run.host_id == baseline.host_id
    )


def cell_runs(runs: Iterable[Run]) -> list[Run]:
    """One run per cell, in the order given: the first run of each cell in rounds stands for it."""
    seen: set[CellKey | int] = set()
    kept = []
    for run in runs:
        key = cell_key(run) or run.pk
        if key not in seen:
            seen.add(key)
            kept.append(run)
    return kept


def standing_for(run: Run, cells: list[Run]) -> Run:
    """The run among `cells` (from `cell_runs`) that stands for `run`'s cell."""
    key = cell_key(run)
    return next((c for c in cells if c.pk == run.pk or (key and cell_key(c) == key)), run)


def results_by_cell(
    runs: list[Run], own_results: dict[int, list[Result]] | None = None
) -> dict[int, list[Result]]:
    """Run id -> its results; for a run in rounds, the results of every round of its cell.

    A cell's points come in repeat (round) order. When a round was re-run,
    the newest run of that round counts: a re-run replaces what it repeats.
    `own_results` (selectors.results_by_run of these runs or more), when
    already read, saves reading each run's own results again.
    """
    if own_results is None:
        own_results = selectors.results_by_run(runs)
    grouped = {run.pk: own_results[run.pk] for run in runs}
    keys = {key for run in runs if (key := cell_key(run)) is not None}
    if not keys:
        return grouped
    by_cell = _round_results(keys)
    for run in runs:
        key = cell_key(run)
        if key is not None:
            grouped[run.pk] = by_cell.get(key, [])
    return grouped


def _round_results(keys: set[CellKey]) -> dict[CellKey, list[Result]]:
    """Cell -> the results of the newest run of each of its rounds."""
    candidates = Run.objects.filter(
        experiment_id__in={experiment for experiment, _cell in keys},
        cell__in={cell for _experiment, cell in keys},
        round__isnull=False,
    ).values_list("pk", "experiment_id", "cell", "round")
    newest: dict[tuple[int, int, int | None], int] = {}
    for pk, experiment, cell, round_number in candidates.order_by("pk"):
        if (experiment, cell) in keys:
            newest[(experiment, cell, round_number)] = pk
    cell_of = {pk: (experiment, cell) for (experiment, cell, _round), pk in newest.items()}
    by_cell: dict[CellKey, list[Result]] = {}
    results = Result.objects.filter(run_id__in=cell_of).order_by("repeat", "index", "run_id")
    for result in results:
        by_cell.setdefault(cell_of[result.run_id], []).append(result)
    return by_cell
