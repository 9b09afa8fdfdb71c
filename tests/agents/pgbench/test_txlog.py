"""Percentiles and counts from real pgbench -l logs of 14-18."""

from pathlib import Path

import pytest

from agents.pgbench.parse import parse_output
from agents.pgbench.txlog import TransactionLogError, latency_percentiles, merge_aggregate_logs
from tests.agents.pgbench.captures import VERSIONS, all_captures, capture

PER_TRANSACTION = [case for case in all_captures("log_") if case[1] != "log_aggregate_T2"]


@pytest.mark.parametrize(("label", "scenario"), PER_TRANSACTION)
def test_log_holds_every_transaction_of_the_summary(label: str, scenario: str) -> None:
    run = capture(label, scenario)
    summary = parse_output(run.text)
    percentiles = latency_percentiles(run.log_files)

    assert len(run.log_files) == 2
    assert percentiles["count"] == summary["transactions"]
    assert percentiles["failed_count"] == (summary["failed"] or 0)
    assert percentiles["skipped_count"] == (summary["skipped"] or 0)
    logged = percentiles["count"] + percentiles["failed_count"] + percentiles["skipped_count"]
    assert logged == summary["transactions_planned"]


@pytest.mark.parametrize(("label", "scenario"), PER_TRANSACTION)
def test_percentiles_are_ordered_latencies_from_the_log(label: str, scenario: str) -> None:
    run = capture(label, scenario)
    result = latency_percentiles(run.log_files)
    ordered = [result[key] for key in ("p50", "p90", "p95", "p99", "max")]
    assert ordered == sorted(ordered) and ordered[0] > 0
    logged = {
        int(line.split()[2]) / 1000
        for path in run.log_files
        for line in path.read_text().splitlines()
        if line.split()[2].isdigit()
    }
    assert set(ordered) <= logged
    assert result["max"] == max(logged)


def test_failed_transactions_are_counted_not_measured_in_15_and_later() -> None:
    for label in ["pg15", "pg16", "pg17", "pg18"]:
        detailed = capture(label, "log_failures_maxtries2_detailed_t100")
        assert " serialization " in detailed.log_files[0].read_text()
        assert latency_percentiles(detailed.log_files)["failed_count"] > 0
        plain = capture(label, "log_failures_t100")
        assert " failed " in plain.log_files[0].read_text()


def test_nearest_rank_on_one_to_hundred_milliseconds(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("".join(f"0 {i} {i * 1000} 0 1795315403 {i}\n" for i in range(100, 0, -1)))
    result = latency_percentiles([log])
    assert result == {
        "p50": 50.0,
        "p90": 90.0,
        "p95": 95.0,
        "p99": 99.0,
        "max": 100.0,
        "count": 100,
        "failed_count": 0,
        "skipped_count": 0,
    }


def test_no_successful_transaction_gives_none(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("0 1 failed 0 1795316149 314233\n0 2 skipped 0 1795316149 314299\n")
    result = latency_percentiles([log])
    assert result["p50"] is result["max"] is None
    assert (result["count"], result["failed_count"], result["skipped_count"]) == (0, 1, 1)


def test_cut_off_last_line_of_a_killed_run_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("0 1 534 0 1795315403 517576\n0 2 5")
    assert latency_percentiles([log])["count"] == 1


@pytest.mark.parametrize("label", VERSIONS)
def test_aggregate_log_is_refused_for_percentiles(label: str) -> None:
    with pytest.raises(TransactionLogError, match="agg"):
        latency_percentiles(capture(label, "log_aggregate_T2").log_files)


@pytest.mark.parametrize("label", VERSIONS)
def test_aggregate_logs_merge_threads_by_interval(label: str) -> None:
    run = capture(label, "log_aggregate_T2")
    rows = merge_aggregate_logs(run.log_files)
    per_file = [[line.split() for line in path.read_text().splitlines()] for path in run.log_files]
    starts = sorted({int(fields[0]) for lines in per_file for fields in lines})
    assert [row["interval_start"] for row in rows] == starts
    total = sum(int(fields[1]) for lines in per_file for fields in lines)
    assert sum(row["transactions"] for row in rows) == total
    # The last, partial interval is never written: the logs hold fewer than the summary.
    assert 0 < total < parse_output(run.text)["transactions"]
    maxima = [int(fields[5]) for lines in per_file for fields in lines]
    assert max(row["max_latency_us"] for row in rows) == max(maxima)
    assert all(row["min_latency_us"] <= row["max_latency_us"] for row in rows)
