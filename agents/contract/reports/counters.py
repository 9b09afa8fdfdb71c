"""A point's counters per transaction (the point's `counters`), and what each one is.

The agent reads PostgreSQL's cumulative statistics and the operating system's
counters at the measured window's start and end (agents/observe/point_counters.py),
keeps the differences (`deltas`) and divides them by the transactions pgbench
reported (`per_transaction`). What each key counts, and where, is in
agents/contract/reports/counter_catalogue.py. A counter the server version does not have is
absent; one whose difference cannot be trusted (a statistics reset in the
window) is None. The lab stores the document as it comes, labels each key from the
catalogue and ranks the keys that moved between two cells (runs/counters/movers.py).
"""

from collections.abc import Mapping
from typing import NotRequired, TypedDict

Number = int | float


class StatementCounters(TypedDict):
    """One statement's pg_stat_statements counters over a point's window (the view was
    reset at the window's start): its normalised text, calls, execution time and rows,
    and its shared and temporary blocks; `calls_per_transaction` divides by pgbench's
    transactions (None when it reported none)."""

    query: str
    calls: int
    calls_per_transaction: float | None
    total_ms: float
    mean_ms: float
    rows: int
    shared_blks_hit: int
    shared_blks_read: int
    shared_blks_dirtied: int
    shared_blks_written: int
    temp_blks_written: int


class PointCounters(TypedDict):
    """The counters of one point: `deltas` over the window and `per_transaction` values.

    `transactions` is the count they are divided by (pgbench's, None when pgbench
    reported none: then every per-transaction value is None); `server_version_num`
    the server they were read from; `notes` what could not be read and why;
    `statements` pgbench's statements by pg_stat_statements, most time first, when the
    workload tracks statements (`workload.track_statements`).
    """

    transactions: int | None
    server_version_num: int
    deltas: dict[str, Number | None]
    per_transaction: dict[str, float | None]
    notes: NotRequired[list[str]]
    statements: NotRequired[list[StatementCounters]]


def counter_deltas(
    before: Mapping[str, Number], after: Mapping[str, Number]
) -> dict[str, Number | None]:
    """after - before for the keys read both times; None for a counter that went down
    (its statistics were reset in the window)."""
    deltas: dict[str, Number | None] = {}
    for key, start in before.items():
        if key not in after:
            continue
        difference = after[key] - start
        deltas[key] = difference if difference >= 0 else None
    return deltas


def per_transaction(
    deltas: Mapping[str, Number | None], transactions: int | None
) -> dict[str, float | None]:
    """Each difference over the point's transactions, to 6 significant digits;
    None when either is unknown (or no transaction completed)."""
    values: dict[str, float | None] = {}
    for key, delta in deltas.items():
        if delta is None or not transactions or transactions < 0:
            values[key] = None
        else:
            values[key] = float(f"{delta / transactions:.6g}")
    return values
