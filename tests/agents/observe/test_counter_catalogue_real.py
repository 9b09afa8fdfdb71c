"""Every counter the catalogue names for a version moves when a workload makes it move, on a
real server of each major from 14 to 18 (one cluster per version, one test each, so the
suite's workers run them side by side).

The server is set so that a few seconds of work move each family: a tiny shared_buffers
(reads, evictions, backends writing dirty buffers, the background writer cleaning), tiny
WAL buffers (WAL writes because they were full), a small work_mem (temporary files),
every timing on, a short deadlock_timeout and autovacuum naptime. The workload, between
the counter reader's two readings (agents/observe/point_counters.py): tables with
fillfactor 70 (named pgbench_accounts, whose updates are also read alone) and 100
updated (HOT and new-page updates), a CHECKPOINT then updates
(full-page images), scans by sequence and by index, a sort, VACUUM and ANALYZE, a lock
wait and a deadlock while the server sampler watches (waits, rollbacks, deadlocks), and
autovacuum left to run once. What cannot move here is listed with its reason.
"""

import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path

import psycopg
import pytest

from agents.contract.reports.counter_catalogue import COUNTERS, read_on
from agents.observe.pg_counters import timing_settings
from agents.observe.point_counters import CounterReader, point_counters
from agents.observe.server import ServerSampler
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.ensure import ensure_install

SETTINGS = """
shared_buffers = 1MB
wal_buffers = 32kB
work_mem = 64kB
track_io_timing = on
deadlock_timeout = 20ms
bgwriter_delay = 10ms
bgwriter_lru_maxpages = 8
bgwriter_lru_multiplier = 10
autovacuum_naptime = 1
"""
# Counters no workload of seconds on a primary moves, and why.
NOT_MOVED_HERE = {
    "checkpoints.timed": "checkpoint_timeout is at least 30 s",
    "db.conflicts": "recovery conflicts happen on standbys only",
    "tables.autoanalyzes": "autovacuum analyzes after it vacuums, not within the wait",
}
BUSY_SQL = """DO $$ BEGIN
  WHILE clock_timestamp() < statement_timestamp() + interval '0.3 s' LOOP END LOOP;
END $$"""
# Sampled wait types the workload does not aim at (what a second's sample catches varies).
WAITS_AIMED_AT = {"waits.lock", "waits.cpu"}
WAIT_S = 20.0


class SeenWaits:
    """The wait-event types the server sampler has seen, to wait on."""

    def __init__(self) -> None:
        self.types: set[str] = set()
        self.changed = threading.Condition()

    def on_sample(self, sample: Mapping[str, object]) -> None:
        waits = sample.get("wait_events")
        with self.changed:
            self.types |= {str(key).split(":")[0] for key in (waits or {})}  # type: ignore[attr-defined]
            self.changed.notify_all()

    def wait_for(self, wait_type: str) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: wait_type in self.types, WAIT_S), wait_type


def _workload(cluster: Cluster, seen: SeenWaits) -> None:
    with cluster.connect() as connection:
        run = connection.execute
        columns = "(id int PRIMARY KEY, n int, pad text)"
        run(f"CREATE TABLE pgbench_accounts {columns} WITH (fillfactor = 70)")
        run(f"CREATE TABLE moved {columns} WITH (fillfactor = 100)")
        for table in ("pgbench_accounts", "moved"):
            run(
                f"INSERT INTO {table} SELECT g, 0, repeat('x', 100) FROM generate_series(1, 5000) g"
            )
            run(
                f"ALTER TABLE {table} SET (autovacuum_vacuum_threshold = 0, "
                "autovacuum_vacuum_scale_factor = 0)"
            )
        run("CHECKPOINT")
        run("UPDATE pgbench_accounts SET n = n + 1")
        run("UPDATE moved SET n = n + 1")
        run("INSERT INTO moved SELECT g, 0, repeat('y', 2000) FROM generate_series(5001, 6000) g")
        run("SELECT count(*) FROM pgbench_accounts WHERE pad <> ''")
        run("SELECT n FROM moved WHERE id = 42")
        run("SELECT * FROM moved ORDER BY pad DESC, n OFFSET 5000")
        run("VACUUM pgbench_accounts")
        run("ANALYZE pgbench_accounts")
        run("BEGIN")
        run("INSERT INTO pgbench_accounts VALUES (-1, 0, '')")
        run("ROLLBACK")
        run("DELETE FROM pgbench_accounts WHERE id > 4900")
        # CPU: a statement busy until the sampler has seen a backend run with no wait.
        while "CPU" not in seen.types:
            run(BUSY_SQL)
    _lock_wait_and_deadlock(cluster, seen)


def _lock_wait_and_deadlock(cluster: Cluster, seen: SeenWaits) -> None:
    """Two sessions lock rows 1 and 2 in opposite orders: the second waits (a Lock wait
    held for a couple of the sampler's seconds), then the cycle is a deadlock."""
    first, second = cluster.connect(), cluster.connect()
    first.autocommit = second.autocommit = False
    errors: list[BaseException] = []
    try:
        first.execute("UPDATE moved SET n = n + 1 WHERE id = 1")
        second.execute("UPDATE moved SET n = n + 1 WHERE id = 2")

        def cross() -> None:
            try:
                second.execute("UPDATE moved SET n = n + 1 WHERE id = 1")
            except psycopg.errors.DeadlockDetected as error:
                errors.append(error)

        crossing = threading.Thread(target=cross)
        crossing.start()
        _wait_for(
            cluster, "SELECT count(*) > 0 FROM pg_stat_activity WHERE wait_event_type = 'Lock'"
        )
        time.sleep(2.5)  # two of the sampler's once-a-second looks at the wait
        try:
            first.execute("UPDATE moved SET n = n + 1 WHERE id = 2")
        except psycopg.errors.DeadlockDetected as error:
            errors.append(error)
        first.rollback()
        crossing.join()
        second.rollback()
    finally:
        first.close()
        second.close()
    assert len(errors) == 1


def _wait_for(cluster: Cluster, condition: str) -> None:
    deadline = time.monotonic() + WAIT_S
    with cluster.connect() as connection:
        while not connection.execute(condition).fetchone()[0]:  # type: ignore[index]
            assert time.monotonic() < deadline, condition
            time.sleep(0.1)
            connection.execute("SELECT pg_stat_clear_snapshot()")


@pytest.mark.parametrize("version", ["14", "15", "16", "17", "18"])
def test_every_counter_of_the_version_moves_when_made_to(
    version: str, make_cluster: Callable[..., Cluster], agent_cache_dir: Path
) -> None:
    cluster = make_cluster(install=ensure_install(version, "prebuilt", agent_cache_dir))
    version_num = cluster.install.version_num
    settings = timing_settings(version_num)
    cluster.initdb()
    cluster.write_settings_file(SETTINGS + "".join(f"{name} = on\n" for name in settings))
    cluster.start()
    reader = CounterReader(
        cluster.conninfo(), version_num, "postgres", cluster.postmaster_pid, set(), None
    )
    window = reader.start()
    seen = SeenWaits()
    sampler = ServerSampler(cluster.conninfo(), version_num, on_sample=seen.on_sample)
    sampler.start()
    try:
        _workload(cluster, seen)
        _wait_for(cluster, "SELECT sum(autovacuum_count) > 0 FROM pg_stat_user_tables")
    finally:
        samples = sampler.stop()
    counters = point_counters(reader.finish(window), {"transactions": 1, "server_samples": samples})
    deltas = counters["deltas"]
    assert "notes" not in counters
    catalogued = read_on(version_num, frozenset(settings))
    assert {key for key in deltas if not key.startswith("os.")} == catalogued
    aimed = {key for key in catalogued if not key.startswith("waits.")} | WAITS_AIMED_AT
    still = sorted(key for key in aimed - set(NOT_MOVED_HERE) if not deltas[key])
    assert still == [], {key: COUNTERS[key].source_on(version_num // 10000) for key in still}
    assert deltas["os.server_cpu_s"] > 0


def test_a_reading_commits_once_in_the_benchmark_database(
    make_cluster: Callable[..., Cluster],
) -> None:
    # The tables' counters are read over a connection to the benchmark database: its
    # settings go with the connection, so the start reading adds two commits to the window
    # (the connection's start and its query; with a SET each, three).
    cluster = make_cluster()
    cluster.initdb()
    cluster.write_settings_file("autovacuum = off\n")
    cluster.start()
    with cluster.connect() as connection:
        connection.autocommit = True
        connection.execute("CREATE DATABASE bench")
    reader = CounterReader(
        cluster.conninfo(), cluster.install.version_num, "bench", None, set(), None
    )
    deltas = point_counters(reader.finish(reader.start()), {"transactions": 1})["deltas"]
    assert deltas["db.xact_commit"] == 2
