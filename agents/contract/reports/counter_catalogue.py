"""What each point counter counts, where it is read on each PostgreSQL version, and its traps.

One entry per counter key (the keys of a point's `counters`,
agents/contract/reports/counters.py): the words engineers use, the unit, the
view and column it is read from from each major version on (`sources`), what it
means, the last major that has it, a setting it needs, and the trap it sets for
whoever reads it as per-transaction work. The agent's queries
(agents/observe/pg_counters.py) read exactly the keys `read_on` gives for a
version (checked against real servers 14 to 18 in tests/agents/observe), and the
lab names what a version or configuration could not collect from `missing_on`.

Traps in short (details on each entry): `pg_stat_bgwriter.buffers_backend`
before 17 counts writes and extends forwarded to the checkpointer and reaches
the view only when the checkpointer reports, at its checkpoints; checkpoint
counters reach the view when a checkpoint ends; the background writer and timed
checkpoints follow the clock, not the transactions (`per_window`: the lab compares
them per second of the window); full-page images follow
how many transactions a window holds after its checkpoint; WAL writes and
syncs moved to pg_stat_io in 18; times need their track_*_timing setting.
"""

from agents.contract.reports.counter_entry import (
    CHECKPOINTER,
    EVERY_VERSION,
    STAT_IO,
    STAT_WAL,
    WAL_IN_STAT_IO,
    Counter,
)
from agents.contract.reports.table_wait_counters import OS_COUNTERS, TABLE_COUNTERS, WAIT_COUNTERS

_WAL_TIMING = "track_wal_io_timing"
_IO_TIMING = "track_io_timing"
_CATALOG_READS = (
    "includes the system catalogs' rows every new connection reads: a fixed amount a "
    "window, so with few transactions a window (a slow query) it changes per transaction "
    "whenever tps does; compare points of a fixed transaction count"
)

COUNTERS: dict[str, Counter] = {
    "wal.records": Counter(
        "WAL records",
        "records",
        ((STAT_WAL, "pg_stat_wal.wal_records"),),
        "WAL records inserted, by every process",
    ),
    "wal.fpi": Counter(
        "full-page images",
        "images",
        ((STAT_WAL, "pg_stat_wal.wal_fpi"),),
        "whole pages written to WAL: the first change to each page after a checkpoint",
        trap="per checkpoint cycle: a window right after a checkpoint writes an image for "
        "every page it touches first, so the rate per transaction falls as the window holds "
        "more transactions (compare points of a fixed transaction count)",
    ),
    "wal.bytes": Counter(
        "WAL bytes",
        "bytes",
        ((EVERY_VERSION, "pg_current_wal_lsn() difference"), (STAT_WAL, "pg_stat_wal.wal_bytes")),
        "WAL volume, full-page images included",
        trap="follows the full-page images, so it shares their checkpoint cycle",
    ),
    "wal.buffers_full": Counter(
        "WAL writes because WAL buffers were full",
        "writes",
        ((STAT_WAL, "pg_stat_wal.wal_buffers_full"),),
        "times a backend had to write WAL itself because wal_buffers had no room",
    ),
    "wal.writes": Counter(
        "WAL writes",
        "writes",
        ((STAT_WAL, "pg_stat_wal.wal_write"), (WAL_IN_STAT_IO, "pg_stat_io.writes, object wal")),
        "write() calls of WAL buffers to disk",
        trap="18 moved it out of pg_stat_wal into pg_stat_io (object wal)",
    ),
    "wal.syncs": Counter(
        "WAL syncs (fsync)",
        "syncs",
        ((STAT_WAL, "pg_stat_wal.wal_sync"), (WAL_IN_STAT_IO, "pg_stat_io.fsyncs, object wal")),
        "WAL flushes to disk (commits wait for them with synchronous_commit on)",
        trap="18 moved it out of pg_stat_wal into pg_stat_io (object wal)",
    ),
    "wal.write_time_ms": Counter(
        "WAL write time",
        "ms",
        (
            (STAT_WAL, "pg_stat_wal.wal_write_time"),
            (WAL_IN_STAT_IO, "pg_stat_io.write_time, object wal"),
        ),
        "time spent writing WAL",
        needs=_WAL_TIMING,
        trap="reads 0 with track_wal_io_timing off, so it is left out then",
    ),
    "wal.sync_time_ms": Counter(
        "WAL sync time",
        "ms",
        (
            (STAT_WAL, "pg_stat_wal.wal_sync_time"),
            (WAL_IN_STAT_IO, "pg_stat_io.fsync_time, object wal"),
        ),
        "time spent flushing WAL",
        needs=_WAL_TIMING,
        trap="reads 0 with track_wal_io_timing off, so it is left out then",
    ),
    "io.reads": Counter(
        "relation blocks read",
        "blocks",
        ((STAT_IO, "pg_stat_io.reads, object relation"),),
        "relation blocks read into shared buffers by every process (the kernel's page "
        "cache may have served them)",
    ),
    "io.hits": Counter(
        "relation buffer hits",
        "blocks",
        ((STAT_IO, "pg_stat_io.hits, object relation"),),
        "relation blocks found in shared buffers",
    ),
    "io.writes": Counter(
        "relation blocks written",
        "blocks",
        ((STAT_IO, "pg_stat_io.writes, object relation"),),
        "relation blocks written by every process: checkpointer, background writer, backends",
        trap="the checkpointer's and background writer's rows reach the view when they "
        "report (the checkpointer at its checkpoints), so most of it is a checkpoint's",
    ),
    "io.client_writes": Counter(
        "blocks written by client backends",
        "blocks",
        ((STAT_IO, "pg_stat_io.writes, object relation, backend_type client backend"),),
        "dirty buffers a client backend had to write itself to get a free buffer",
    ),
    "io.extends": Counter(
        "relation extends",
        "blocks",
        ((STAT_IO, "pg_stat_io.extends, object relation"),),
        "blocks added to relations (inserts into full tables, new-page updates)",
    ),
    "io.fsyncs": Counter(
        "relation fsyncs",
        "fsyncs",
        ((STAT_IO, "pg_stat_io.fsyncs, object relation"),),
        "relation file fsyncs, nearly all the checkpointer's at checkpoints",
    ),
    "io.evictions": Counter(
        "buffer evictions",
        "buffers",
        ((STAT_IO, "pg_stat_io.evictions, object relation"),),
        "buffers taken from another block to hold a new one: shared_buffers too small",
    ),
    "checkpoints.timed": Counter(
        "timed checkpoints",
        "checkpoints",
        (
            (EVERY_VERSION, "pg_stat_bgwriter.checkpoints_timed"),
            (CHECKPOINTER, "pg_stat_checkpointer.num_timed"),
        ),
        "checkpoints started by checkpoint_timeout",
        trap="counts skipped checkpoints of an idle server too",
        per_window="a timed checkpoint comes every checkpoint_timeout, whatever the load",
    ),
    "checkpoints.requested": Counter(
        "requested checkpoints",
        "checkpoints",
        (
            (EVERY_VERSION, "pg_stat_bgwriter.checkpoints_req"),
            (CHECKPOINTER, "pg_stat_checkpointer.num_requested"),
        ),
        "checkpoints asked for: max_wal_size reached, or a CHECKPOINT command",
    ),
    "checkpoints.buffers_written": Counter(
        "buffers written by checkpoints",
        "buffers",
        (
            (EVERY_VERSION, "pg_stat_bgwriter.buffers_checkpoint"),
            (CHECKPOINTER, "pg_stat_checkpointer.buffers_written"),
        ),
        "dirty buffers checkpoints wrote",
        trap="counted when the checkpoint ends, so one that spans the window's end counts "
        "in the next window",
        per_window="a checkpoint writes what is dirty when its timer fires",
    ),
    "bgwriter.buffers_clean": Counter(
        "buffers written by the background writer",
        "buffers",
        ((EVERY_VERSION, "pg_stat_bgwriter.buffers_clean"),),
        "dirty buffers the background writer wrote ahead of the backends",
        trap="a short window holds a handful whatever the load",
        per_window="the background writer writes at most bgwriter_lru_maxpages every "
        "bgwriter_delay",
    ),
    "bgwriter.maxwritten_clean": Counter(
        "background writer stops (too many buffers)",
        "stops",
        ((EVERY_VERSION, "pg_stat_bgwriter.maxwritten_clean"),),
        "background writer rounds that stopped at bgwriter_lru_maxpages",
        per_window="counts the background writer's rounds that hit bgwriter_lru_maxpages",
    ),
    "bgwriter.buffers_alloc": Counter(
        "buffers allocated",
        "buffers",
        ((EVERY_VERSION, "pg_stat_bgwriter.buffers_alloc"),),
        "buffers handed out for blocks not in shared buffers",
    ),
    "bgwriter.buffers_backend": Counter(
        "writes and extends forwarded by backends (reported at checkpoints)",
        "buffers",
        ((EVERY_VERSION, "pg_stat_bgwriter.buffers_backend"),),
        "relation writes and extends by any process but the background writer, counted "
        "when they forward an fsync request to the checkpointer",
        last_major=16,
        trap="not the dirty buffers client backends had to write: it counts extends and "
        "autovacuum's writes too, and reaches the view only when the checkpointer reports "
        "(at its checkpoints), so a window reads earlier windows' writes or none. Never a "
        "mover; from 16 pg_stat_io's client backend writes say what backends wrote",
    ),
    "db.xact_commit": Counter(
        "commits",
        "transactions",
        ((EVERY_VERSION, "pg_stat_database.xact_commit"),),
        "commits in the benchmark database",
        trap="slightly above one per transaction: the agent's own readings commit too",
    ),
    "db.xact_rollback": Counter(
        "rollbacks",
        "transactions",
        ((EVERY_VERSION, "pg_stat_database.xact_rollback"),),
        "rollbacks in the benchmark database",
    ),
    "db.blks_read": Counter(
        "blocks read",
        "blocks",
        ((EVERY_VERSION, "pg_stat_database.blks_read"),),
        "blocks not in shared buffers, read from the kernel (its page cache or the disk)",
    ),
    "db.blks_hit": Counter(
        "blocks hit in shared buffers",
        "blocks",
        ((EVERY_VERSION, "pg_stat_database.blks_hit"),),
        "blocks found in shared buffers",
    ),
    "db.blk_read_time_ms": Counter(
        "block read time",
        "ms",
        ((EVERY_VERSION, "pg_stat_database.blk_read_time"),),
        "time backends spent reading blocks",
        needs=_IO_TIMING,
        trap="reads 0 with track_io_timing off, so it is left out then",
    ),
    "db.blk_write_time_ms": Counter(
        "block write time",
        "ms",
        ((EVERY_VERSION, "pg_stat_database.blk_write_time"),),
        "time backends spent writing blocks",
        needs=_IO_TIMING,
        trap="reads 0 with track_io_timing off, so it is left out then",
    ),
    "db.tup_returned": Counter(
        "rows scanned",
        "rows",
        ((EVERY_VERSION, "pg_stat_database.tup_returned"),),
        "rows read by sequential scans and index entries returned by index scans",
        trap=_CATALOG_READS,
    ),
    "db.tup_fetched": Counter(
        "rows fetched",
        "rows",
        ((EVERY_VERSION, "pg_stat_database.tup_fetched"),),
        "rows fetched by index scans",
        trap=_CATALOG_READS,
    ),
    "db.tup_inserted": Counter(
        "rows inserted",
        "rows",
        ((EVERY_VERSION, "pg_stat_database.tup_inserted"),),
        "rows inserted",
    ),
    "db.tup_updated": Counter(
        "rows updated",
        "rows",
        ((EVERY_VERSION, "pg_stat_database.tup_updated"),),
        "rows updated",
    ),
    "db.tup_deleted": Counter(
        "rows deleted",
        "rows",
        ((EVERY_VERSION, "pg_stat_database.tup_deleted"),),
        "rows deleted",
    ),
    "db.temp_files": Counter(
        "temporary files",
        "files",
        ((EVERY_VERSION, "pg_stat_database.temp_files"),),
        "temporary files of sorts and hashes that did not fit work_mem",
    ),
    "db.temp_bytes": Counter(
        "temporary file bytes",
        "bytes",
        ((EVERY_VERSION, "pg_stat_database.temp_bytes"),),
        "bytes written to those temporary files",
    ),
    "db.deadlocks": Counter(
        "deadlocks",
        "deadlocks",
        ((EVERY_VERSION, "pg_stat_database.deadlocks"),),
        "deadlocks detected",
    ),
    "db.conflicts": Counter(
        "recovery conflicts",
        "conflicts",
        ((EVERY_VERSION, "pg_stat_database.conflicts"),),
        "queries cancelled by recovery conflicts (standbys only)",
    ),
}

COUNTERS.update(TABLE_COUNTERS)
COUNTERS.update(WAIT_COUNTERS)
COUNTERS.update(OS_COUNTERS)


def major_of(server_version_num: int) -> int:
    """160015 -> 16; 90624 -> 9."""
    return server_version_num // 10000


def read_on(server_version_num: int, settings: frozenset[str] = frozenset()) -> set[str]:
    """The PostgreSQL counter keys a server of this version reads (not the os.* ones);
    `settings` names the timing settings that are on ("track_io_timing", ...)."""
    major = major_of(server_version_num)
    return {
        key
        for key, counter in COUNTERS.items()
        if not key.startswith("os.")
        and counter.source_on(major) is not None
        and (not counter.needs or counter.needs in settings)
    }


def missing_on(server_version_num: int, keys: set[str]) -> list[str]:
    """What a point of this version could not collect (`keys`: what it did), one phrase
    per cause: "pg_stat_io (from 16)", "WAL write time (track_wal_io_timing off)"; the
    operating system's counters and the wait events aside (these come from the server
    sampler's samples, every type present, 0 when unseen, once the window holds one)."""
    major = major_of(server_version_num)
    said: dict[str, None] = {}
    for key, counter in COUNTERS.items():
        if key in keys or key.startswith(("os.", "waits.")):
            continue
        if counter.last_major and major > counter.last_major:
            said[f"{counter.label} (up to {counter.last_major})"] = None
        elif major < counter.first_major:
            whole_view = key.startswith("io.")
            named = counter.sources[0][1].split(".")[0] if whole_view else counter.label
            said[f"{named} (from {counter.first_major})"] = None
        elif counter.needs:
            said[f"{counter.label} ({counter.needs} off)"] = None
    return list(said)
