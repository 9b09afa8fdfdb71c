"""A capacity search of several cells read as a comparison: each cell's search
(runs/analysis/capacity.py), its label, and its capacity over the baseline's (the
first cell) with the verdict (runs/inference/capacity_compare.py)."""

from dataclasses import dataclass

from runs.analysis.capacity import CapacityReading, capacity_reading, searched_cells
from runs.analysis.chart_layout import cell_labels, dimensions
from runs.inference.capacity_compare import CapacityRatio, capacity_ratio
from runs.models import Experiment


@dataclass(frozen=True)
class CellCapacity:
    """One searched cell: its index, label, search and ratio to the baseline (None for
    the baseline itself)."""

    cell: int
    label: str
    reading: CapacityReading
    ratio: CapacityRatio | None


def capacity_comparison(experiment: Experiment) -> list[CellCapacity]:
    """Every searched cell in matrix order; one cell: no ratio at all."""
    cells = searched_cells(experiment) or [0]
    compared = len(cells) > 1
    readings = {cell: capacity_reading(experiment, cell, compared) for cell in cells}
    labels = _labels(experiment, cells)
    baseline = readings[cells[0]].capacity
    return [
        CellCapacity(
            cell=cell,
            label=labels.get(cell, f"cell {cell + 1}"),
            reading=readings[cell],
            ratio=(
                capacity_ratio(
                    readings[cell].capacity,
                    baseline,
                    experiment.margin_pct,
                    experiment.min_effect_pct,
                )
                if compared and cell != cells[0]
                else None
            ),
        )
        for cell in cells
    ]


def comparison_answer(compared: list[CellCapacity]) -> str:
    """The search's answer in one line: the capacity of a single cell; with several, each
    cell's capacity and each compared cell's verdict against the first."""
    if len(compared) == 1:
        return compared[0].reading.capacity.sentence
    parts = [f"{item.label}: {item.reading.capacity.sentence}" for item in compared]
    parts += [
        f"{item.label} against {compared[0].label}: {item.ratio.sentence}"
        for item in compared
        if item.ratio is not None
    ]
    return "; ".join(parts)


def _labels(experiment: Experiment, cells: list[int]) -> dict[int, str]:
    """Each cell's label from what varies between the cells' first probes."""
    firsts = [
        run
        for cell in cells
        if (run := experiment.runs.filter(cell=cell, round__isnull=False).order_by("pk").first())
    ]
    if len(firsts) < 2:
        return {}
    labels = cell_labels(firsts, dimensions(firsts, experiment.clients))
    return {run.cell: labels[run.pk] for run in firsts}
