"""The server sampler against a real, throw-away PostgreSQL cluster."""

import logging
import threading
import time
from collections.abc import Iterator

import psycopg
import pytest

from agents.observe.server import (
    APPLICATION_NAME,
    COUNTERS,
    COUNTERS_SQL_9,
    COUNTERS_SQL_10_TO_13,
    COUNTERS_SQL_14_TO_16,
    COUNTERS_SQL_17_PLUS,
    ServerSampler,
    counters_sql,
    unavailable_measurements,
)
from agents.postgres.installs.ensure import ensure_install
from tests.agents.observe.fakes import FakeClock, wait_until

INTERVAL = 0.2
FAKE_INTERVAL = 0.25  # exact in binary, so fake-clock ticks are exact
SLEEPERS = 3


@pytest.fixture
def conninfo(pg_cluster) -> str:
    return pg_cluster.conninfo()


@pytest.fixture
def server_version_num(pg_cluster) -> int:
    return pg_cluster.install.version_num


@pytest.fixture
def sleeping_backends(conninfo: str) -> Iterator[None]:
    """SLEEPERS connections sitting in pg_sleep for a second and a half."""

    def sleep_once() -> None:
        with psycopg.connect(conninfo) as connection:
            connection.execute("SELECT pg_sleep(1.5)")

    sleepers = [threading.Thread(target=sleep_once) for _ in range(SLEEPERS)]
    for sleeper in sleepers:
        sleeper.start()
    yield
    for sleeper in sleepers:
        sleeper.join()


def test_wait_events_of_sleeping_backends_are_counted(
    conninfo: str, server_version_num: int, sleeping_backends: None
) -> None:
    sampler = ServerSampler(conninfo, server_version_num, interval=INTERVAL)
    sampler.start()
    time.sleep(1.0)
    samples = sampler.stop()
    assert sampler.error is None
    assert len(samples) >= 3
    busiest = max(samples, key=lambda sample: sample["wait_events"].get("Timeout:PgSleep", 0))
    assert busiest["wait_events"]["Timeout:PgSleep"] == SLEEPERS
    assert busiest["active_backends"] == sum(busiest["wait_events"].values())


def test_idle_server_shows_no_active_backend_not_even_the_sampler(
    conninfo: str, server_version_num: int
) -> None:
    clock = FakeClock()
    sampler = ServerSampler(conninfo, server_version_num, interval=FAKE_INTERVAL, clock=clock)
    sampler.start()
    clock.run_for(0.5)
    samples = sampler.stop()
    assert [sample["t"] for sample in samples] == [0.25, 0.5]
    assert all(sample["active_backends"] == 0 for sample in samples)
    assert all(sample["wait_events"] == {} for sample in samples)


def sample_around_writes(conninfo: str, server_version_num: int) -> list[dict]:
    """Two samples before and two after a table is written and a checkpoint requested."""
    clock = FakeClock()
    sampler = ServerSampler(conninfo, server_version_num, interval=FAKE_INTERVAL, clock=clock)
    sampler.start()
    clock.run_for(0.5)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute("CREATE TABLE sampled AS SELECT g FROM generate_series(1, 50000) g")
        connection.execute("CHECKPOINT")
        connection.execute("DROP TABLE sampled")
    clock.run_for(0.5)
    samples = sampler.stop()
    assert sampler.error is None
    assert len(samples) == 4
    return samples


def assert_writes_counted(samples: list[dict]) -> None:
    first, last = samples[0], samples[-1]
    assert last["checkpoints_req"] > first["checkpoints_req"]
    assert last["buffers_checkpoint"] > first["buffers_checkpoint"]
    assert last["wal_bytes"] > first["wal_bytes"]
    wal_during_writes = samples[2]["wal_bytes"] - samples[1]["wal_bytes"]
    assert samples[2]["wal_bytes_per_s"] == wal_during_writes / FAKE_INTERVAL
    for sample in samples:
        assert all(isinstance(sample[name], int) for name in COUNTERS)


def test_writes_show_up_as_wal_and_buffer_counters(conninfo: str, server_version_num: int) -> None:
    assert_writes_counted(sample_around_writes(conninfo, server_version_num))


def test_server_going_away_is_recorded_once_and_stops_quietly(
    conninfo: str, server_version_num: int
) -> None:
    clock = FakeClock()
    sampler = ServerSampler(conninfo, server_version_num, interval=FAKE_INTERVAL, clock=clock)
    sampler.start()
    clock.run_for(0.5)
    with psycopg.connect(conninfo, autocommit=True) as connection:
        connection.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (APPLICATION_NAME,),
        )
    clock.allow(10 * FAKE_INTERVAL)
    wait_until(lambda: not sampler.running)
    samples = sampler.stop()
    assert [sample["t"] for sample in samples] == [0.25, 0.5]
    assert "terminating connection" in sampler.error


def test_unreachable_server_is_an_error_not_an_exception() -> None:
    sampler = ServerSampler("host=127.0.0.1 port=1 connect_timeout=2", 160000, interval=INTERVAL)
    sampler.start()
    assert sampler.stop() == []
    assert "connection" in sampler.error.lower()


def test_counter_sql_is_chosen_by_version() -> None:
    assert counters_sql(140000) == counters_sql(160009) == COUNTERS_SQL_14_TO_16
    assert counters_sql(170000) == counters_sql(180006) == COUNTERS_SQL_17_PLUS
    assert counters_sql(100000) == counters_sql(130016) == COUNTERS_SQL_10_TO_13
    assert counters_sql(90200) == counters_sql(90624) == COUNTERS_SQL_9
    with pytest.raises(ValueError, match="9.2 or later"):
        counters_sql(90124)


def test_wait_events_are_said_unavailable_before_9_6() -> None:
    assert unavailable_measurements(90600) == []
    assert "9.6" in unavailable_measurements(90524)[0]


def test_sql_of_the_wrong_version_stops_sampling_with_a_logged_error(
    conninfo: str, server_version_num: int, caplog: pytest.LogCaptureFixture
) -> None:
    wrong_version = 170000 if server_version_num < 170000 else 160000
    sampler = ServerSampler(conninfo, wrong_version, interval=INTERVAL)
    with caplog.at_level(logging.ERROR, logger="agents.observe.periodic"):
        sampler.start()
        samples = sampler.stop()
    assert samples == []
    assert sampler.error.startswith("Undefined")
    assert caplog.records[0].exc_info is not None


def test_counters_of_postgresql_18_come_from_the_views_it_moved_them_to(
    make_cluster, agent_cache_dir
) -> None:
    cluster = make_cluster(install=ensure_install("18.6", "prebuilt", agent_cache_dir))
    cluster.initdb()
    cluster.start()
    assert_writes_counted(sample_around_writes(cluster.conninfo(), 180000))
