"""PostgreSQL's cumulative statistics as a point's counters, read with the SQL of each version.

Every query returns one row whose column names are counter keys
(agents/contract/reports/counters.py). Which views and columns exist depends
on the major version, so the queries are chosen by version, explicitly, as
agents/observe/server.py does for its per-second samples:

- pg_stat_wal from 14 (before: the WAL position only); 18 moved its write and
  sync counts and times to pg_stat_io (object `wal`);
- pg_stat_io from 16;
- checkpoint counters in pg_stat_bgwriter up to 16, in pg_stat_checkpointer from 17;
- pg_stat_database of the benchmark database in every version;
- the benchmark database's user tables (pg_stat_user_tables, pg_statio_user_tables)
  summed, and the HOT and new-page updates of pgbench_accounts (or its partitions)
  alone, read over a connection to that database (the views are per database);
  n_tup_newpage_upd from 16.

Which keys each version reads is the catalogue's (agents/contract/reports/counter_catalogue.py).
"""

from agents.contract.reports.counter_catalogue import COUNTERS, major_of
from agents.contract.reports.counter_entry import (
    CHECKPOINTER,
    STAT_IO,
    STAT_WAL,
    WAL_IN_STAT_IO,
)

# The catalogue's first majors with each view, as server_version_num.
FIRST_WITH_STAT_WAL = STAT_WAL * 10000
FIRST_WITH_STAT_IO = STAT_IO * 10000
FIRST_WITH_CHECKPOINTER = CHECKPOINTER * 10000
FIRST_WITH_WAL_IN_STAT_IO = WAL_IN_STAT_IO * 10000
FIRST_WITH_WAL_FUNCTIONS = 100000
FIRST_WITH_BACKEND_TYPE = 100000

WAL_SQL_9 = """
SELECT pg_xlog_location_diff(pg_current_xlog_location(), '0/0')::bigint AS "wal.bytes"
"""

WAL_SQL_10_TO_13 = """
SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS "wal.bytes"
"""

WAL_SQL_14_TO_17 = """
SELECT wal_records AS "wal.records", wal_fpi AS "wal.fpi", wal_bytes::bigint AS "wal.bytes",
       wal_buffers_full AS "wal.buffers_full", wal_write AS "wal.writes",
       wal_sync AS "wal.syncs", wal_write_time AS "wal.write_time_ms",
       wal_sync_time AS "wal.sync_time_ms"
FROM pg_stat_wal
"""

WAL_SQL_18_PLUS = """
SELECT w.wal_records AS "wal.records", w.wal_fpi AS "wal.fpi", w.wal_bytes::bigint AS "wal.bytes",
       w.wal_buffers_full AS "wal.buffers_full",
       coalesce(sum(io.writes), 0) AS "wal.writes", coalesce(sum(io.fsyncs), 0) AS "wal.syncs",
       coalesce(sum(io.write_time), 0) AS "wal.write_time_ms",
       coalesce(sum(io.fsync_time), 0) AS "wal.sync_time_ms"
FROM pg_stat_wal w LEFT JOIN pg_stat_io io ON io.object = 'wal'
GROUP BY w.wal_records, w.wal_fpi, w.wal_bytes, w.wal_buffers_full
"""

# Every backend type's I/O on relations (tables and indexes), summed; client backends'
# own writes apart: a backend that has to write dirty buffers itself waits for it.
IO_SQL_16_PLUS = """
SELECT coalesce(sum(reads), 0) AS "io.reads", coalesce(sum(hits), 0) AS "io.hits",
       coalesce(sum(writes), 0) AS "io.writes",
       coalesce(sum(writes) FILTER (WHERE backend_type = 'client backend'), 0)
         AS "io.client_writes",
       coalesce(sum(extends), 0) AS "io.extends", coalesce(sum(fsyncs), 0) AS "io.fsyncs",
       coalesce(sum(evictions), 0) AS "io.evictions"
FROM pg_stat_io WHERE object = 'relation'
"""

BGWRITER_SQL_UP_TO_16 = """
SELECT checkpoints_timed AS "checkpoints.timed", checkpoints_req AS "checkpoints.requested",
       buffers_checkpoint AS "checkpoints.buffers_written",
       buffers_clean AS "bgwriter.buffers_clean", maxwritten_clean AS "bgwriter.maxwritten_clean",
       buffers_alloc AS "bgwriter.buffers_alloc", buffers_backend AS "bgwriter.buffers_backend"
FROM pg_stat_bgwriter
"""

BGWRITER_SQL_17_PLUS = """
SELECT c.num_timed AS "checkpoints.timed", c.num_requested AS "checkpoints.requested",
       c.buffers_written AS "checkpoints.buffers_written",
       b.buffers_clean AS "bgwriter.buffers_clean",
       b.maxwritten_clean AS "bgwriter.maxwritten_clean",
       b.buffers_alloc AS "bgwriter.buffers_alloc"
FROM pg_stat_checkpointer c, pg_stat_bgwriter b
"""

DATABASE_SQL = """
SELECT xact_commit AS "db.xact_commit", xact_rollback AS "db.xact_rollback",
       blks_read AS "db.blks_read", blks_hit AS "db.blks_hit",
       tup_returned AS "db.tup_returned", tup_fetched AS "db.tup_fetched",
       tup_inserted AS "db.tup_inserted", tup_updated AS "db.tup_updated",
       tup_deleted AS "db.tup_deleted", temp_files AS "db.temp_files",
       temp_bytes AS "db.temp_bytes", deadlocks AS "db.deadlocks", conflicts AS "db.conflicts",
       blk_read_time AS "db.blk_read_time_ms", blk_write_time AS "db.blk_write_time_ms"
FROM pg_stat_database WHERE datname = %(dbname)s
"""

# pgbench_accounts, or its partitions with pgbench -i --partitions (the parent counts nothing).
_ACCOUNTS = "FILTER (WHERE t.relname ~ '^pgbench_accounts(_[0-9]+)?$')"
_TABLES_COLUMNS = f"""
SELECT coalesce(sum(t.n_tup_hot_upd), 0) AS "tables.hot_updates",
       coalesce(sum(t.n_tup_hot_upd) {_ACCOUNTS}, 0) AS "tables.accounts_hot_updates",
       coalesce(sum(t.seq_scan), 0) AS "tables.seq_scans",
       coalesce(sum(t.idx_scan), 0) AS "tables.idx_scans",
       coalesce(sum(t.vacuum_count), 0) AS "tables.vacuums",
       coalesce(sum(t.autovacuum_count), 0) AS "tables.autovacuums",
       coalesce(sum(t.analyze_count), 0) AS "tables.analyzes",
       coalesce(sum(t.autoanalyze_count), 0) AS "tables.autoanalyzes",
       coalesce(sum(io.heap_blks_read), 0) AS "tables.heap_blks_read",
       coalesce(sum(io.heap_blks_hit), 0) AS "tables.heap_blks_hit",
       coalesce(sum(io.idx_blks_read), 0) AS "tables.idx_blks_read",
       coalesce(sum(io.idx_blks_hit), 0) AS "tables.idx_blks_hit"
"""
_TABLES_FROM = """
FROM pg_stat_user_tables t JOIN pg_statio_user_tables io USING (relid)
"""
TABLES_SQL_UP_TO_15 = _TABLES_COLUMNS + _TABLES_FROM
TABLES_SQL_16_PLUS = (
    _TABLES_COLUMNS.rstrip()
    + f""",
       coalesce(sum(t.n_tup_newpage_upd), 0) AS "tables.newpage_updates",
       coalesce(sum(t.n_tup_newpage_upd) {_ACCOUNTS}, 0) AS "tables.accounts_newpage_updates"
"""
    + _TABLES_FROM
)

# Times are counted only with their timing setting on: off, they read 0 and mean nothing
# (which setting each time needs is the catalogue's `needs`, `timing_settings`).
TIMING_SQL = "SELECT current_setting(%(setting)s, true) = 'on' AS timed"

# The benchmark's client connections still open (pgbench's backends flush their
# statistics when they exit).
CLIENTS_SQL_10_PLUS = """
SELECT count(*) AS clients FROM pg_stat_activity
WHERE datname = %(dbname)s AND backend_type = 'client backend' AND pid <> pg_backend_pid()
"""

CLIENTS_SQL_9 = """
SELECT count(*) AS clients FROM pg_stat_activity
WHERE datname = %(dbname)s AND application_name = 'pgbench' AND pid <> pg_backend_pid()
"""


def wal_sql(server_version_num: int) -> str:
    """The WAL counters of this version."""
    if server_version_num < FIRST_WITH_WAL_FUNCTIONS:
        return WAL_SQL_9
    if server_version_num < FIRST_WITH_STAT_WAL:
        return WAL_SQL_10_TO_13
    if server_version_num < FIRST_WITH_WAL_IN_STAT_IO:
        return WAL_SQL_14_TO_17
    return WAL_SQL_18_PLUS


def bgwriter_sql(server_version_num: int) -> str:
    """The checkpoint and background writer counters of this version."""
    if server_version_num < FIRST_WITH_CHECKPOINTER:
        return BGWRITER_SQL_UP_TO_16
    return BGWRITER_SQL_17_PLUS


def tables_sql(server_version_num: int) -> str:
    """The benchmark database's tables' counters, summed (run in that database)."""
    if server_version_num < FIRST_WITH_STAT_IO:
        return TABLES_SQL_UP_TO_15
    return TABLES_SQL_16_PLUS


def counter_queries(server_version_num: int) -> list[str]:
    """The queries of every counter this version has, each returning one row."""
    queries = [wal_sql(server_version_num), bgwriter_sql(server_version_num), DATABASE_SQL]
    if server_version_num >= FIRST_WITH_STAT_IO:
        queries.append(IO_SQL_16_PLUS)
    return queries


def clients_sql(server_version_num: int) -> str:
    """How many of the benchmark database's client connections are still open."""
    if server_version_num < FIRST_WITH_BACKEND_TYPE:
        return CLIENTS_SQL_9
    return CLIENTS_SQL_10_PLUS


def timing_settings(server_version_num: int) -> dict[str, tuple[str, ...]]:
    """The timing settings this version has, each with the keys it switches on (the
    catalogue's counters that need it and that this version reads)."""
    major = major_of(server_version_num)
    settings: dict[str, tuple[str, ...]] = {}
    for key, counter in COUNTERS.items():
        if counter.needs and counter.source_on(major) is not None:
            settings[counter.needs] = (*settings.get(counter.needs, ()), key)
    return settings
