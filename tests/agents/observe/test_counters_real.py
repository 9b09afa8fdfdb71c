"""A real point's counters, from real servers: one with pg_stat_io (16), one without (14).
Every version's queries against its own server: test_counter_catalogue_real.py."""



from agents.config import AgentConfig
from tests.agents.jobs import run, small_spec


def _only_point(version: str, builtin: str, config: AgentConfig) -> dict:
    spec = small_spec(
        postgres={"version": version, "source": "prebuilt"},
        workload={"scripts": [{"builtin": builtin, "weight": 1}]},
        sweep={"clients": [2], "duration_s": 2, "warmup_s": 0},
    )
    document, _events = run(spec, config)
    assert document["status"] == "succeeded", document["error"]
    [point] = document["points"]
    return dict(point)


def test_a_tpcb_point_on_16_counts_wal_and_io_per_transaction(config: AgentConfig) -> None:
    point = _only_point("16", "tpcb-like", config)
    counters = point["counters"]
    per_transaction = counters["per_transaction"]
    assert counters["transactions"] == point["transactions"] > 0
    assert counters["server_version_num"] // 10000 == 16
    # tpcb-like: 3 updates, 1 insert, 1 select and a commit per transaction.
    assert 100 < per_transaction["wal.bytes"] < 20000
    assert per_transaction["wal.records"] >= 5
    assert 2.9 <= per_transaction["db.tup_updated"] <= 3.1
    assert 0.99 <= per_transaction["db.xact_commit"] <= 1.1
    assert per_transaction["io.hits"] > 0
    assert per_transaction["os.server_cpu_s"] > 0
    assert per_transaction["os.disk_write_bytes"] > 0  # the commits' WAL fsyncs
    assert per_transaction["os.pgbench_cpu_s"] > 0
    assert "bgwriter.buffers_backend" in per_transaction
    assert "wal.write_time_ms" not in per_transaction  # track_wal_io_timing is off


def test_a_select_only_point_on_14_counts_hits_without_pg_stat_io(config: AgentConfig) -> None:
    point = _only_point("14", "select-only", config)
    per_transaction = point["counters"]["per_transaction"]
    assert per_transaction["db.blks_hit"] >= 1
    assert 0.99 <= per_transaction["db.tup_fetched"] <= 1.1
    assert per_transaction["wal.fpi"] is not None
    assert not any(key.startswith("io.") for key in per_transaction)
    assert per_transaction["db.tup_updated"] < 0.01
