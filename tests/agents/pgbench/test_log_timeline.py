"""The per-second timeline read from transaction logs: binning, scaling by the sampling
rate, aggregate rows, and the live tail's rule for when a second is complete."""

import math
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from agents.contract.reports.results import ProgressLine
from agents.pgbench.latency_log import ExpectedThroughput, LogPlan
from agents.pgbench.log_tail import MAX_LIVE_LAG_S, LogTail
from agents.pgbench.log_timeline import SecondBins, aggregate_timeline, whole_seconds
from agents.pgbench.txlog import merge_aggregate_logs, read_transaction_logs
from tests.agents.pgbench.captures import capture

START = 1_795_315_400.25


def log_line(completed_at: float, latency_us: int | str, client: int = 0) -> str:
    seconds = math.floor(completed_at)
    micros = round((completed_at - seconds) * 1e6)
    return f"{client} 1 {latency_us} 0 {seconds} {micros}\n"


def test_transactions_are_binned_by_the_second_after_launch_they_completed_in(tmp_path: Path):
    log = tmp_path / "pgbench_log.1"
    log.write_text(
        log_line(START + 0.10, 1000)
        + log_line(START + 0.90, 3000)
        + log_line(START + 1.00, 2000)
        + log_line(START + 1.50, "failed")
        + log_line(START + 2.99, 500)
    )
    reading = read_transaction_logs([log], start=START)

    first, second, third = reading.bins.timeline(3, sampling_rate=1.0)
    assert first == ProgressLine(
        t=1.0,
        tps=2.0,
        latency_ms=2.0,
        stddev_ms=1.0,
        failed=0,
        sampled=2,
        sampling_rate=1.0,
        p50_ms=pytest.approx(1.0, rel=0.01),
        p95_ms=pytest.approx(3.0, rel=0.01),
        p99_ms=pytest.approx(3.0, rel=0.01),
    )
    assert (second["t"], second["tps"], second["latency_ms"], second["failed"]) == (2.0, 1, 2, 1)
    assert (third["tps"], third["stddev_ms"], third["sampled"]) == (1.0, 0.0, 1)


def test_a_sample_is_scaled_up_by_its_rate_and_says_what_it_rests_on():
    bins = SecondBins(start=START)
    for number in range(250):
        bins.add_latency(START + 0.5 + number / 1000, 400)
    bins.add_failure(START + 0.7)

    (line,) = bins.timeline(1, sampling_rate=0.005)
    assert line["tps"] == pytest.approx(50_000.0)
    assert line["failed"] == 200
    assert (line["sampled"], line["sampling_rate"]) == (250, 0.005)


def test_each_second_has_its_percentiles_within_one_percent_and_an_empty_one_has_none():
    bins = SecondBins(start=START)
    for latency_us in range(1000, 101_000, 1000):  # 100 latencies, 1 to 100 ms
        bins.add_latency(START + 0.5, latency_us)
    first, empty = bins.timeline(2, sampling_rate=0.01)
    # Read from buckets 2 % wide: within 1 % of the exact nearest-rank values.
    assert (first["p50_ms"], first["p95_ms"], first["p99_ms"]) == pytest.approx(
        (50.0, 95.0, 99.0), rel=0.01
    )
    assert first["sampled"] == 100
    assert (empty["p50_ms"], empty["p95_ms"], empty["p99_ms"], empty["sampled"]) == (
        None,
        None,
        None,
        0,
    )


def test_seconds_without_a_logged_transaction_read_zero_and_cut_seconds_are_left_out():
    bins = SecondBins(start=START)
    bins.add_latency(START + 0.5, 100)
    bins.add_latency(START + 2.5, 100)
    bins.add_latency(START + 3.2, 100)  # the cut last second of a 3.4 s run

    timeline = bins.timeline(whole_seconds(3.4), sampling_rate=1.0)
    assert [line["tps"] for line in timeline] == [1.0, 0.0, 1.0]


def test_aggregate_rows_give_an_exact_timeline_summed_over_threads():
    rows = merge_aggregate_logs(capture("pg16", "log_aggregate_T2").log_files)
    timeline = aggregate_timeline(rows)

    assert [line["t"] for line in timeline] == [float(n + 1) for n in range(len(rows))]
    for row, line in zip(rows, timeline, strict=True):
        assert line["tps"] == row["transactions"]
        mean_ms = row["sum_latency_us"] / row["transactions"] / 1000
        assert line["latency_ms"] == pytest.approx(mean_ms, abs=0.001)
        assert 0 <= line["stddev_ms"] <= row["max_latency_us"] / 1000
        assert "sampled" not in line, "an aggregate log counts every transaction"


def test_a_malformed_line_loses_the_timeline_and_percentiles_with_a_message_not_the_point(
    tmp_path: Path,
):
    log = tmp_path / "pgbench_log.7"
    log.write_text(log_line(START + 0.2, 900) + "this is not a log line\n")
    plan = LogPlan.for_point("sampled", ExpectedThroughput(100.0, "warmup"))

    read = plan.read([log], start=START, whole_seconds=1)
    assert read.timeline == [] and read.percentiles["p99"] is None
    assert "not a pgbench per-transaction log line" in read.percentiles["error"]


class Emitted(list):
    def __call__(self, line: ProgressLine) -> None:
        self.append(line)


TailOf = Callable[..., tuple[LogTail, Emitted]]


@pytest.fixture
def tail_of() -> Iterator[TailOf]:
    """Makes tails of a directory (optionally at a sampling rate); closes their files after."""
    made: list[LogTail] = []

    def make(directory: Path, rate: float = 1.0) -> tuple[LogTail, Emitted]:
        emitted = Emitted()
        made.append(LogTail(directory, "pgbench_log", START, rate, emitted))
        return made[-1], emitted

    yield make
    for tail in made:
        tail.close()


def test_a_second_is_emitted_once_every_thread_log_has_passed_it(tmp_path: Path, tail_of: TailOf):
    thread0, thread1 = tmp_path / "pgbench_log.10", tmp_path / "pgbench_log.10.1"
    thread0.write_text(log_line(START + 0.4, 100) + log_line(START + 1.2, 100))
    thread1.write_text(log_line(START + 0.6, 300))
    tail, emitted = tail_of(tmp_path)

    tail.read_new_lines()
    tail.emit_passed_seconds(now=START + 1.5)
    assert emitted == [], "thread 1 may still hold lines of second 0 in its buffer"

    with thread1.open("a") as out:
        out.write(log_line(START + 0.9, 500) + log_line(START + 1.1, 100))
    tail.read_new_lines()
    tail.emit_passed_seconds(now=START + 1.6)
    assert [(line["t"], line["tps"], line["latency_ms"]) for line in emitted] == [(1.0, 3.0, 0.3)]


def test_a_thread_that_logs_nothing_holds_a_second_back_at_most_the_live_lag(
    tmp_path: Path, tail_of: TailOf
):
    (tmp_path / "pgbench_log.10").write_text(log_line(START + 0.4, 100))
    (tmp_path / "pgbench_log.10.1").write_text("")
    tail, emitted = tail_of(tmp_path)
    tail.read_new_lines()

    tail.emit_passed_seconds(now=START + 1 + MAX_LIVE_LAG_S - 0.1)
    assert emitted == []
    tail.emit_passed_seconds(now=START + 1 + MAX_LIVE_LAG_S + 0.1)
    assert [line["tps"] for line in emitted] == [1.0]


def test_a_line_being_written_is_read_once_it_is_complete(tmp_path: Path, tail_of: TailOf):
    log = tmp_path / "pgbench_log.10"
    whole = log_line(START + 0.4, 100)
    log.write_text(whole[:9])
    tail, _ = tail_of(tmp_path)
    tail.read_new_lines()
    assert tail.bins.bins == {} and tail.lines_read == {log: 0}

    with log.open("a") as out:
        out.write(whole[9:] + log_line(START + 0.8, 200)[:5])
    tail.read_new_lines()
    assert tail.bins.bins[0].latencies == 1
    assert tail.lines_read[log] == 1


def test_the_seconds_emitted_live_are_those_the_whole_files_give(tmp_path: Path, tail_of: TailOf):
    log = tmp_path / "pgbench_log.10"
    log.write_text(log_line(START + 0.4, 100) + log_line(START + 0.8, 200)[:7])
    tail, emitted = tail_of(tmp_path, rate=0.5)
    tail.read_new_lines()
    with log.open("a") as out:
        out.write(log_line(START + 0.8, 200)[7:] + log_line(START + 1.3, 300))
    tail.read_new_lines()
    tail.emit_passed_seconds(now=START + 1.5)
    plan = LogPlan("sampled", 0.5, ExpectedThroughput(1000.0, "warmup"))

    read = plan.read([log], start=START, whole_seconds=2)
    assert read.percentiles["sampled_transactions"] == 3
    assert [line["tps"] for line in read.timeline] == [4.0, 2.0]
    assert emitted == read.timeline[:1]
