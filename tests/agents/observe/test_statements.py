"""Statement statistics (`workload.track_statements`): the agent loads pg_stat_statements
itself, resets it at each point's start and reports pgbench's statements at its end, with
calls per transaction; the counter reader's own queries and other roles' are not counted."""

from dataclasses import replace
from pathlib import Path

import pytest

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.observe.pg_statements import check_available, statement_counters, statements_sql
from agents.postgres.installs.inventory import Install
from tests.agents.jobs import run, small_spec

SELECT = "SELECT abalance FROM pgbench_accounts WHERE aid = $1"


def test_select_only_reports_its_one_statement_once_a_transaction(config: AgentConfig) -> None:
    spec = small_spec(
        workload={"scripts": [{"builtin": "select-only", "weight": 1}], "track_statements": True},
        sweep={"clients": [2], "duration_s": 2, "repeats": 2},
    )
    document, _events = run(spec, config)
    assert document["status"] == "succeeded", document["error"]

    effective = {s["name"]: s["setting"] for s in document["settings"]["effective"]}
    assert effective["shared_preload_libraries"] == "pg_stat_statements"
    assert "shared_preload_libraries" not in document["settings"]["requested"]
    for point in document["points"]:
        counters = point["counters"]
        statements = counters["statements"]
        [select] = [s for s in statements if s["query"] == SELECT]
        # Each point counts only its own window: calls match its transactions.
        assert select["calls"] == counters["transactions"]
        assert select["calls_per_transaction"] == 1.0
        assert 0 < select["mean_ms"] < 50
        assert select["rows"] == select["calls"]
        assert select["shared_blks_hit"] >= select["calls"]
        assert not [s for s in statements if "pg_stat" in s["query"]], statements


def test_without_tracking_no_library_is_loaded_and_no_statements_are_read(
    config: AgentConfig,
) -> None:
    spec = small_spec(sweep={"clients": [1], "duration_s": 1})
    document, _events = run(spec, config)
    assert document["status"] == "succeeded", document["error"]
    effective = {s["name"]: s["setting"] for s in document["settings"]["effective"]}
    assert effective.get("shared_preload_libraries", "") == ""
    assert "statements" not in document["points"][0]["counters"]


def test_an_install_without_the_library_is_refused_naming_the_field(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    install = Install("15.18", 15, "build", tmp_path / "bin", "15.18", "15.18")
    with pytest.raises(JobError) as refused:
        check_available(install)
    assert refused.value.field == "workload.track_statements"
    assert "pg_stat_statements" in str(refused.value)
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / "pg_stat_statements.so").touch()
    check_available(replace(install))


def test_versions_before_13_read_total_time_and_statements_divide_by_transactions() -> None:
    assert "total_exec_time" in statements_sql(130000)
    assert "total_time" in statements_sql(120000) and "exec_time" not in statements_sql(120000)
    row = {
        "query": "SELECT 1",
        "calls": 300,
        "total_ms": 15.0,
        "rows": 300,
        "shared_blks_hit": 900,
        "shared_blks_read": 3,
        "shared_blks_dirtied": 0,
        "shared_blks_written": 0,
        "temp_blks_written": 0,
    }
    [found] = statement_counters([row], transactions=100)  # type: ignore[list-item]
    assert (found["calls_per_transaction"], found["mean_ms"]) == (3.0, 0.05)
    [unknown] = statement_counters([row], transactions=None)  # type: ignore[list-item]
    assert unknown["calls_per_transaction"] is None
