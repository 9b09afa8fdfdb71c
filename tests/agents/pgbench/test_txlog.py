"""Percentiles and counts from real pgbench -l logs of 14-18, in bounded memory."""

import ctypes
import tracemalloc
from pathlib import Path

import pytest

from agents.contract.pgbench_output.parse import parse_output
from agents.pgbench.txlog import (
    TransactionLogError,
    latency_percentiles,
    merge_aggregate_logs,
    read_transaction_logs,
)
from tests.agents.pgbench.captures import VERSIONS, all_captures, capture

PER_TRANSACTION = [case for case in all_captures("log_") if case[1] != "log_aggregate_T2"]


@pytest.mark.parametrize(("label", "scenario"), PER_TRANSACTION)
def test_log_holds_every_transaction_of_the_summary(label: str, scenario: str) -> None:
    run = capture(label, scenario)
    summary = parse_output(run.text)
    percentiles = latency_percentiles(run.log_files)

    assert len(run.log_files) == 2
    assert percentiles["sampled_transactions"] == summary["transactions"]
    assert percentiles["failed_count"] == (summary["failed"] or 0)
    assert percentiles["skipped_count"] == (summary["skipped"] or 0)
    logged = (
        percentiles["sampled_transactions"]
        + percentiles["failed_count"]
        + percentiles["skipped_count"]
    )
    assert logged == summary["transactions_planned"]


def within_resolution(reported: float, measured: float) -> bool:
    """HdrHistogram with 3 significant digits reports within 0.1 % of the value (µs rounding)."""
    return abs(reported - measured) <= measured * 0.001 + 0.001


@pytest.mark.parametrize(("label", "scenario"), PER_TRANSACTION)
def test_percentiles_are_ordered_latencies_from_the_log(label: str, scenario: str) -> None:
    run = capture(label, scenario)
    result = latency_percentiles(run.log_files)
    ordered = [result[key] for key in ("p50", "p90", "p95", "p99", "max")]
    assert ordered == sorted(ordered) and ordered[0] > 0
    logged = sorted(
        int(line.split()[2]) / 1000
        for path in run.log_files
        for line in path.read_text().splitlines()
        if line.split()[2].isdigit()
    )
    assert all(any(within_resolution(value, seen) for seen in logged) for value in ordered)
    assert within_resolution(result["max"], logged[-1])


def test_failed_transactions_are_counted_not_measured_in_15_and_later() -> None:
    for label in ["pg15", "pg16", "pg17", "pg18"]:
        detailed = capture(label, "log_failures_maxtries2_detailed_t100")
        assert " serialization " in detailed.log_files[0].read_text()
        assert latency_percentiles(detailed.log_files)["failed_count"] > 0
        plain = capture(label, "log_failures_t100")
        assert " failed " in plain.log_files[0].read_text()


def test_percentiles_of_one_to_hundred_milliseconds_within_resolution(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("".join(f"0 {i} {i * 1000} 0 1795315403 {i}\n" for i in range(100, 0, -1)))
    result = latency_percentiles([log])
    expected = {"p50": 50.0, "p90": 90.0, "p95": 95.0, "p99": 99.0, "max": 100.0}
    assert all(within_resolution(result[key], value) for key, value in expected.items())
    assert (result["sampled_transactions"], result["failed_count"], result["skipped_count"]) == (
        100,
        0,
        0,
    )


def write_log(path: Path, transactions: int) -> Path:
    with open(path, "w") as stream:
        for number in range(transactions):
            latency = 50 + (number * 7919) % 20_000
            stream.write(f"{number % 8} {number} {latency} 0 1795315403 {number % 999_999}\n")
    return path


def test_memory_does_not_grow_with_the_number_of_transactions(tmp_path: Path) -> None:
    small = write_log(tmp_path / "small.1", 1_000)
    large = write_log(tmp_path / "large.1", 50_000)

    footprints, peaks = [], []
    for path in (small, large):
        tracemalloc.start()
        reading = read_transaction_logs([path])
        peaks.append(tracemalloc.get_traced_memory()[1])
        tracemalloc.stop()
        footprints.append((reading.histogram.counts_len, ctypes.sizeof(reading.histogram.counts)))

    assert reading.histogram.get_total_count() == 50_000
    assert footprints[0] == footprints[1]
    assert footprints[1][1] < 512 * 1024
    # Keeping every latency would add 400 kB (an int64 array) to 1.8 MB (a list).
    assert peaks[1] < peaks[0] + 64 * 1024


def test_latency_beyond_an_hour_counts_as_an_hour(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("0 1 534 0 1795315403 517576\n0 2 7200000000 0 1795315403 517577\n")
    result = latency_percentiles([log])
    assert result["sampled_transactions"] == 2
    assert within_resolution(result["max"], 3_600_000.0)


def test_no_successful_transaction_gives_none(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("0 1 failed 0 1795316149 314233\n0 2 skipped 0 1795316149 314299\n")
    result = latency_percentiles([log])
    assert result["p50"] is result["max"] is None
    counts = (result["sampled_transactions"], result["failed_count"], result["skipped_count"])
    assert counts == (0, 1, 1)


def test_cut_off_last_line_of_a_killed_run_is_skipped(tmp_path: Path) -> None:
    log = tmp_path / "tx.1"
    log.write_text("0 1 534 0 1795315403 517576\n0 2 5")
    assert latency_percentiles([log])["sampled_transactions"] == 1


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
