"""The measured points of a comparison placed by its layout (runs/analysis/chart_layout.py):
each point with its value of every dimension, and the seed-style pivot table (rows one
dimension or several, columns another) of mean and CI with every repeat's value.
"""

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from runs.analysis.chart_layout import ChartLayout, Dimension, kept, point_values
from runs.analysis.compare import StatsTable, repeat_values
from runs.analysis.validity import ValidityWarning
from runs.inference.stats import Summary
from runs.models import Result, Run


@dataclass(frozen=True)
class PlacedPoint:
    """One cell at one client count, one metric: where the layout puts it and its numbers."""

    run: Run
    clients: int
    values: dict[str, str]
    summary: Summary | None
    repeats: list[float]
    warnings: list[ValidityWarning]

    def at(self, key: str | None) -> str:
        return self.values[key] if key else ""


def placed_points(
    table: StatsTable,
    results: Mapping[int, Sequence[Result]],
    dims: Mapping[str, Dimension],
    layout: ChartLayout,
    metric: str,
) -> list[PlacedPoint]:
    """The table's points that pass the layout's filters, with each repeat's value."""
    values_of = {pk: repeat_values(rs, metric) for pk, rs in results.items()}
    points = []
    for row in table.rows:
        values = point_values(row.run, row.clients, dims)
        if kept(values, layout):
            repeats = values_of.get(row.run.pk, {}).get(row.clients, [])
            summary = row.cells[metric].summary if metric in row.cells else None
            points.append(PlacedPoint(row.run, row.clients, values, summary, repeats, row.warnings))
    return points


@dataclass(frozen=True)
class PivotRow:
    label: str
    cells: list[PlacedPoint | None]


@dataclass(frozen=True)
class Pivot:
    """Rows: the values of `row_keys` together; columns: the values of `column_key`."""

    metric: str
    row_title: str
    column_title: str
    columns: list[str]
    rows: list[PivotRow]


def pivot(
    points: list[PlacedPoint], layout: ChartLayout, dims: Mapping[str, Dimension], metric: str
) -> Pivot:
    """Columns are the colour (else a facet), rows every other drawn dimension."""
    column_key = layout.colour or layout.facet_col or layout.facet_row
    row_keys = [
        key for key in (layout.facet_row, layout.facet_col, layout.x) if key and key != column_key
    ]
    columns = list(dims[column_key].values) if column_key else [""]
    by_place = {(tuple(p.at(k) for k in row_keys), p.at(column_key)): p for p in points}
    present = {place for place, _column in by_place}
    rows = []
    for place in itertools.product(*(dims[key].values for key in row_keys)):
        if place in present:
            cells = [by_place.get((place, column)) for column in columns]
            rows.append(PivotRow(" · ".join(place), cells))
    used = [n for n, column in enumerate(columns) if any(r.cells[n] for r in rows)]
    rows = [PivotRow(r.label, [r.cells[n] for n in used]) for r in rows]
    return Pivot(
        metric,
        " · ".join(dims[key].title for key in row_keys),
        dims[column_key].title if column_key else "",
        [columns[n] for n in used],
        rows,
    )
