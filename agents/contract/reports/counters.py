"""A point's counters per transaction (the point's `counters`), and what each one is.

The agent reads PostgreSQL's cumulative statistics and the operating system's
counters at the measured window's start and end (agents/observe/point_counters.py),
keeps the differences (`deltas`) and divides them by the transactions pgbench
reported (`per_transaction`). A counter the server version does not have is
absent; one whose difference cannot be trusted (a statistics reset in the
window) is None. The lab stores the document as it comes, labels each key with
`COUNTERS` and ranks the keys that moved between two cells (runs/counters/movers.py).
"""

from collections.abc import Mapping
from typing import NamedTuple, NotRequired, TypedDict

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


class Counter(NamedTuple):
    """What a counter key means: the words engineers use, its unit, and where it is read."""

    label: str
    unit: str
    source: str


COUNTERS: dict[str, Counter] = {
    "wal.records": Counter("WAL records", "records", "pg_stat_wal.wal_records"),
    "wal.fpi": Counter("full-page images", "images", "pg_stat_wal.wal_fpi"),
    "wal.bytes": Counter(
        "WAL bytes", "bytes", "pg_stat_wal.wal_bytes (before 14: pg_current_wal_lsn())"
    ),
    "wal.buffers_full": Counter(
        "WAL writes because WAL buffers were full", "writes", "pg_stat_wal.wal_buffers_full"
    ),
    "wal.writes": Counter(
        "WAL writes", "writes", "pg_stat_wal.wal_write (18: pg_stat_io writes, object wal)"
    ),
    "wal.syncs": Counter(
        "WAL syncs (fsync)", "syncs", "pg_stat_wal.wal_sync (18: pg_stat_io fsyncs, object wal)"
    ),
    "wal.write_time_ms": Counter(
        "WAL write time",
        "ms",
        "pg_stat_wal.wal_write_time (18: pg_stat_io write_time, object wal); "
        "with track_wal_io_timing on",
    ),
    "wal.sync_time_ms": Counter(
        "WAL sync time",
        "ms",
        "pg_stat_wal.wal_sync_time (18: pg_stat_io fsync_time, object wal); "
        "with track_wal_io_timing on",
    ),
    "io.reads": Counter("relation blocks read", "blocks", "pg_stat_io.reads, object relation"),
    "io.hits": Counter("relation buffer hits", "blocks", "pg_stat_io.hits, object relation"),
    "io.writes": Counter("relation blocks written", "blocks", "pg_stat_io.writes, object relation"),
    "io.client_writes": Counter(
        "blocks written by client backends",
        "blocks",
        "pg_stat_io.writes, object relation, backend_type client backend",
    ),
    "io.extends": Counter("relation extends", "blocks", "pg_stat_io.extends, object relation"),
    "io.fsyncs": Counter("relation fsyncs", "fsyncs", "pg_stat_io.fsyncs, object relation"),
    "io.evictions": Counter("buffer evictions", "buffers", "pg_stat_io.evictions, object relation"),
    "checkpoints.timed": Counter(
        "timed checkpoints",
        "checkpoints",
        "pg_stat_bgwriter.checkpoints_timed (17: pg_stat_checkpointer.num_timed)",
    ),
    "checkpoints.requested": Counter(
        "requested checkpoints",
        "checkpoints",
        "pg_stat_bgwriter.checkpoints_req (17: pg_stat_checkpointer.num_requested)",
    ),
    "checkpoints.buffers_written": Counter(
        "buffers written by checkpoints",
        "buffers",
        "pg_stat_bgwriter.buffers_checkpoint (17: pg_stat_checkpointer.buffers_written)",
    ),
    "bgwriter.buffers_clean": Counter(
        "buffers written by the background writer", "buffers", "pg_stat_bgwriter.buffers_clean"
    ),
    "bgwriter.maxwritten_clean": Counter(
        "background writer stops (too many buffers)", "stops", "pg_stat_bgwriter.maxwritten_clean"
    ),
    "bgwriter.buffers_alloc": Counter(
        "buffers allocated", "buffers", "pg_stat_bgwriter.buffers_alloc"
    ),
    "bgwriter.buffers_backend": Counter(
        "buffers written by backends", "buffers", "pg_stat_bgwriter.buffers_backend (up to 16)"
    ),
    "db.xact_commit": Counter("commits", "transactions", "pg_stat_database.xact_commit"),
    "db.xact_rollback": Counter("rollbacks", "transactions", "pg_stat_database.xact_rollback"),
    "db.blks_read": Counter("blocks read", "blocks", "pg_stat_database.blks_read"),
    "db.blks_hit": Counter("blocks hit in shared buffers", "blocks", "pg_stat_database.blks_hit"),
    "db.tup_returned": Counter("rows scanned", "rows", "pg_stat_database.tup_returned"),
    "db.tup_fetched": Counter("rows fetched", "rows", "pg_stat_database.tup_fetched"),
    "db.tup_inserted": Counter("rows inserted", "rows", "pg_stat_database.tup_inserted"),
    "db.tup_updated": Counter("rows updated", "rows", "pg_stat_database.tup_updated"),
    "db.tup_deleted": Counter("rows deleted", "rows", "pg_stat_database.tup_deleted"),
    "db.temp_files": Counter("temporary files", "files", "pg_stat_database.temp_files"),
    "db.temp_bytes": Counter("temporary file bytes", "bytes", "pg_stat_database.temp_bytes"),
    "db.deadlocks": Counter("deadlocks", "deadlocks", "pg_stat_database.deadlocks"),
    "db.conflicts": Counter("recovery conflicts", "conflicts", "pg_stat_database.conflicts"),
    "os.server_cpu_s": Counter(
        "server CPU time", "s", "/proc/<pid>/stat utime+stime of the server's processes"
    ),
    "os.disk_read_bytes": Counter(
        "disk reads", "bytes", "/proc/diskstats sectors read by the data and WAL devices"
    ),
    "os.disk_write_bytes": Counter(
        "disk writes", "bytes", "/proc/diskstats sectors written by the data and WAL devices"
    ),
    "os.pgbench_cpu_s": Counter("pgbench CPU time", "s", "wait4() rusage of pgbench"),
    "os.pgbench_voluntary_switches": Counter(
        "pgbench voluntary context switches", "switches", "wait4() rusage ru_nvcsw of pgbench"
    ),
    "os.pgbench_involuntary_switches": Counter(
        "pgbench involuntary context switches", "switches", "wait4() rusage ru_nivcsw of pgbench"
    ),
    "os.host_context_switches": Counter(
        "context switches on the host", "switches", "/proc/stat ctxt"
    ),
}


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
