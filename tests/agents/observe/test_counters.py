"""A point's counters without a server: the SQL each version gets, differences per
transaction, pgbench's totals, and the server's processes read from a /proc tree."""

from pathlib import Path

import pytest

from agents.contract.reports.counter_catalogue import COUNTERS, missing_on, read_on
from agents.contract.reports.counters import counter_deltas, per_transaction
from agents.contract.reports.table_wait_counters import WAIT_TYPES
from agents.observe.os_counters import (
    CLOCK_TICKS_PER_S,
    disk_counters,
    host_context_switches,
    server_counters,
)
from agents.observe.pg_counters import (
    BGWRITER_SQL_17_PLUS,
    BGWRITER_SQL_UP_TO_16,
    CLIENTS_SQL_9,
    CLIENTS_SQL_10_PLUS,
    IO_SQL_16_PLUS,
    WAL_SQL_9,
    WAL_SQL_10_TO_13,
    WAL_SQL_14_TO_17,
    WAL_SQL_18_PLUS,
    clients_sql,
    counter_queries,
    tables_sql,
    timing_settings,
)
from agents.observe.point_counters import CounterWindow, point_counters
from agents.observe.wait_counters import wait_counters


@pytest.mark.parametrize(
    ("version_num", "wal", "bgwriter", "has_io"),
    [
        (90624, WAL_SQL_9, BGWRITER_SQL_UP_TO_16, False),
        (130016, WAL_SQL_10_TO_13, BGWRITER_SQL_UP_TO_16, False),
        (140023, WAL_SQL_14_TO_17, BGWRITER_SQL_UP_TO_16, False),
        (150019, WAL_SQL_14_TO_17, BGWRITER_SQL_UP_TO_16, False),
        (160015, WAL_SQL_14_TO_17, BGWRITER_SQL_UP_TO_16, True),
        (170011, WAL_SQL_14_TO_17, BGWRITER_SQL_17_PLUS, True),
        (180006, WAL_SQL_18_PLUS, BGWRITER_SQL_17_PLUS, True),
    ],
)
def test_each_version_reads_the_views_it_has(
    version_num: int, wal: str, bgwriter: str, has_io: bool
) -> None:
    queries = counter_queries(version_num)
    assert queries[:2] == [wal, bgwriter]
    assert (IO_SQL_16_PLUS in queries) is has_io
    assert any("pg_stat_database" in query for query in queries)


def test_wal_writes_come_from_pg_stat_io_in_18_and_checkpoints_from_the_checkpointer_in_17() -> (
    None
):
    assert "pg_stat_io" in WAL_SQL_18_PLUS and "wal_write" not in WAL_SQL_18_PLUS
    assert "pg_stat_checkpointer" in BGWRITER_SQL_17_PLUS
    assert "buffers_backend" not in BGWRITER_SQL_17_PLUS
    assert "track_wal_io_timing" in timing_settings(140000)
    assert list(timing_settings(130016)) == ["track_io_timing"]
    assert clients_sql(90624) == CLIENTS_SQL_9 and clients_sql(100000) == CLIENTS_SQL_10_PLUS


def _keys(query: str) -> set[str]:
    return {part.split('"')[0] for part in query.split('AS "')[1:]}


def test_every_key_a_query_reads_is_labelled() -> None:
    for version_num in (90624, 130016, 140023, 160015, 170011, 180006):
        for query in [*counter_queries(version_num), tables_sql(version_num)]:
            assert _keys(query) <= set(COUNTERS)


@pytest.mark.parametrize("version_num", [140023, 150019, 160015, 170011, 180006])
def test_the_catalogue_names_exactly_what_each_versions_queries_read(version_num: int) -> None:
    read = set().union(*map(_keys, [*counter_queries(version_num), tables_sql(version_num)]))
    timed = frozenset(timing_settings(version_num))
    waits = {key for key in COUNTERS if key.startswith("waits.")}
    assert read | waits == read_on(version_num, timed)
    untimed = read_on(version_num)
    assert "wal.sync_time_ms" not in untimed and "db.blk_read_time_ms" not in untimed


def test_what_a_version_cannot_collect_is_said_once_per_cause() -> None:
    missing = missing_on(150019, read_on(150019))
    assert "pg_stat_io (from 16)" in missing
    assert "updates to a new page (from 16)" in missing
    assert "block read time (track_io_timing off)" in missing
    assert not any("forwarded by backends" in said for said in missing)
    on_17 = missing_on(170011, read_on(170011, frozenset(timing_settings(170011))))
    assert on_17 == [
        "writes and extends forwarded by backends (reported at checkpoints) (up to 16)"
    ]
    assert COUNTERS["bgwriter.buffers_backend"].source_on(17) is None
    assert COUNTERS["wal.syncs"].source_on(18) == "pg_stat_io.fsyncs, object wal"
    assert COUNTERS["wal.syncs"].source_on(17) == "pg_stat_wal.wal_sync"
    assert COUNTERS["checkpoints.timed"].source_on(17) == "pg_stat_checkpointer.num_timed"


def test_sampled_wait_events_become_backend_seconds_per_type() -> None:
    samples = [
        {"t": 1.0, "wait_events": {"Lock:transactionid": 2, "CPU": 1}},
        {"t": 2.0, "wait_events": {"Lock:tuple": 1, "IO:WALSync": 1, "Unknown:x": 4}},
        {"t": 3.0, "wait_events": None},
    ]
    waits = wait_counters(samples)
    assert waits["waits.lock"] == 3 and waits["waits.cpu"] == 1 and waits["waits.io"] == 1
    assert waits["waits.lwlock"] == 0 and set(waits) == set(WAIT_TYPES.values())
    assert wait_counters([{"t": 1.0, "wait_events": None}]) == {} == wait_counters(None)


def test_a_difference_is_divided_by_the_transactions() -> None:
    deltas = counter_deltas({"wal.bytes": 1000, "wal.fpi": 5}, {"wal.bytes": 5000, "wal.fpi": 5})
    assert deltas == {"wal.bytes": 4000, "wal.fpi": 0}
    assert per_transaction(deltas, 3) == {"wal.bytes": 1333.33, "wal.fpi": 0.0}


def test_a_reset_counter_or_no_transaction_gives_none_never_a_negative_or_infinite_value() -> None:
    deltas = counter_deltas({"db.blks_hit": 900, "wal.bytes": 1}, {"db.blks_hit": 10})
    assert deltas == {"db.blks_hit": None}
    assert per_transaction({"wal.bytes": 10}, 0) == {"wal.bytes": None}
    assert per_transaction({"wal.bytes": 10}, None) == {"wal.bytes": None}


def test_pgbench_totals_join_the_window_and_notes_travel_along() -> None:
    window = CounterWindow(160015, {"wal.bytes": 100}, {"wal.bytes": 300}, ["late"])
    point = {"transactions": 100, "pgbench_cpu_s": 0.5, "pgbench_voluntary_switches": 250}
    counters = point_counters(window, point)
    assert counters["per_transaction"] == {
        "wal.bytes": 2.0,
        "os.pgbench_cpu_s": 0.005,
        "os.pgbench_voluntary_switches": 2.5,
    }
    assert counters["transactions"] == 100 and counters["notes"] == ["late"]
    assert counters["server_version_num"] == 160015


def _process(proc: Path, pid: int, parent: int, ticks: tuple[int, int, int, int]) -> None:
    directory = proc / str(pid)
    directory.mkdir()
    utime, stime, cutime, cstime = ticks
    rest = " ".join(["0"] * 9)  # pgrp to cmajflt
    (directory / "stat").write_text(
        f"{pid} (postgres: a (b)) S {parent} {rest} {utime} {stime} {cutime} {cstime} 20 0\n"
    )


def test_the_servers_cpu_is_its_postmaster_with_reaped_children_plus_its_live_children(
    tmp_path: Path,
) -> None:
    _process(tmp_path, 100, 1, (10, 5, 300, 100))
    _process(tmp_path, 101, 100, (20, 5, 0, 0))
    _process(tmp_path, 102, 100, (1, 1, 0, 0))
    _process(tmp_path, 200, 1, (999, 999, 0, 0))
    assert server_counters(100, tmp_path) == {"os.server_cpu_s": round(442 / CLOCK_TICKS_PER_S, 2)}
    assert server_counters(999, tmp_path) == {}


def test_disk_bytes_are_the_data_and_wal_devices_sectors_together(tmp_path: Path) -> None:
    stats = tmp_path / "diskstats"
    stats.write_text(
        "   8       0 sda 10 0 100 0 20 0 400 0 0 0 0\n"
        "   8      16 sdb 1 0 8 0 2 0 16 0 0 0 0\n"
        "   8      32 sdc 1 0 999 0 2 0 999 0 0 0 0\n"
    )
    assert disk_counters({"sda", "sdb"}, str(stats)) == {
        "os.disk_read_bytes": 108 * 512,
        "os.disk_write_bytes": 416 * 512,
    }
    assert disk_counters(set(), str(stats)) == {}
    assert disk_counters({"nvme9n1"}, str(stats)) == {}


def test_host_context_switches_come_from_proc_stat(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  1 2 3\nctxt 123456\nbtime 1\n")
    assert host_context_switches(tmp_path / "stat") == {"os.host_context_switches": 123456}
    assert host_context_switches(tmp_path / "missing") == {}
