"""Points' counters per transaction as pages, the API and exports read them.

- `counter_table`: the run page's table, a row per counter and a column per point;
- `statement_points`: each point's statements, where the workload tracked them;
- `movers_by_cell`: how the counters of each compared cell of a statistics table
  moved against the baseline cell at the same client count (runs/counters/movers.py).
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from agents.contract.reports.counter_catalogue import COUNTERS, Counter
from agents.contract.reports.counters import StatementCounters
from runs.analysis.compare import StatsTable
from runs.counters.movers import CellCounters, CounterChanges, counter_changes
from runs.models import Result

# (run id, client count) of a compared cell -> how its counters moved.
CellMovers = dict[tuple[int, int], CounterChanges]


def per_transaction(result: Result) -> dict[str, float | None]:
    """The point's counters per transaction; {} for a point measured before
    the agent reported counters."""
    values = (result.counters or {}).get("per_transaction") or {}
    return dict(values)


@dataclass(frozen=True)
class CounterRow:
    """One counter on the run page: what it is and its value per transaction at each point."""

    key: str
    counter: Counter
    values: list[float | None]


def counter_table(results: Sequence[Result]) -> list[CounterRow]:
    """A row for each counter any of the points has, in the catalogue's order."""
    by_point = [per_transaction(result) for result in results]
    present = {key for values in by_point for key in values}
    return [
        CounterRow(key, counter, [values.get(key) for values in by_point])
        for key, counter in COUNTERS.items()
        if key in present
    ]


@dataclass(frozen=True)
class PointStatements:
    """One point's statements by pg_stat_statements, most execution time first."""

    result: Result
    statements: list[StatementCounters]


def statement_points(results: Sequence[Result]) -> list[PointStatements]:
    """The points that report statements (their workload tracked them), in order."""
    return [
        PointStatements(result, (result.counters or {})["statements"])
        for result in results
        if (result.counters or {}).get("statements")
    ]


def repeat_counters(results: Sequence[Result], clients: int) -> CellCounters:
    """Each counter's per-transaction value and raw count in every repeat at `clients`
    (None where a repeat lacks it), with the transactions each repeat's counters were
    divided by and the seconds of its window."""
    repeats = [result for result in results if result.clients == clients]
    by_repeat = [per_transaction(result) for result in repeats]
    deltas = [(result.counters or {}).get("deltas") or {} for result in repeats]
    keys = {key for values in by_repeat for key in values}
    versions = [(result.counters or {}).get("server_version_num") for result in repeats]
    return CellCounters(
        values={key: [values.get(key) for values in by_repeat] for key in keys},
        transactions=[(result.counters or {}).get("transactions") for result in repeats],
        counts={key: [found.get(key) for found in deltas] for key in keys},
        seconds=[result.duration_s for result in repeats],
        server_version_num=next((v for v in versions if isinstance(v, int)), None),
    )


def movers_by_cell(table: StatsTable, results: Mapping[int, Sequence[Result]]) -> CellMovers:
    """How the counters of every compared (non-baseline) cell of `table` moved; `results`
    are the points of each cell (runs.stats_tables.load_inputs' `results`)."""
    base_row = next((row for row in table.rows if row.is_baseline), None)
    if base_row is None:
        return {}
    base_results = results.get(base_row.run.pk, [])
    found: CellMovers = {}
    for row in table.rows:
        if row.is_baseline:
            continue
        values = repeat_counters(results.get(row.run.pk, []), row.clients)
        baseline = repeat_counters(base_results, row.clients)
        found[(row.run.pk, row.clients)] = counter_changes(values, baseline, table.min_effect_pct)
    return found


def movers_by_run(movers: CellMovers) -> dict[int, dict[int, CounterChanges]]:
    """run id -> client count -> how the cell's counters moved (for a page's two lookups);
    {} when no cell has counters on both sides (the page then leaves the column out: there
    is nothing to say). A cell whose counters did not move says so."""
    nested: dict[int, dict[int, CounterChanges]] = {}
    if not any(found.collected for found in movers.values()):
        return nested
    for (run_id, clients), found in movers.items():
        nested.setdefault(run_id, {})[clients] = found
    return nested


def movers_document(movers: CellMovers) -> list[dict[str, object]]:
    """How each compared cell's counters moved, as the API and JSON exports give it."""
    return [
        {"run_id": run_id, "clients": clients, **found.as_document()}
        for (run_id, clients), found in movers.items()
    ]
