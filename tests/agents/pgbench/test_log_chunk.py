"""The live tail's fast path: a chunk of plain log lines binned with array operations gives
the bins the line-by-line reading gives, and anything else is left to that reading."""

import math
import random
from pathlib import Path

import pytest

from agents.pgbench.log_chunk import add_columns_to_bins, plain_columns
from agents.pgbench.log_tail import LogTail
from agents.pgbench.log_timeline import SecondBins, latency_bucket
from agents.pgbench.txlog import TransactionLogError, add_to_bins, parse_line

START = 1_795_315_400.25


def lines_of(count: int, seed: int, extra_fields: int = 0, before_start: int = 0) -> list[str]:
    """`count` log lines completing every ~3 ms from START (the first `before_start` before
    it), latencies spread over five decades, `extra_fields` more fields (lag, retries)."""
    rng = random.Random(seed)
    completed = START - 0.003 * before_start
    lines = []
    for number in range(count):
        completed += rng.uniform(0.0, 0.006)
        seconds = math.floor(completed)
        micros = min(round((completed - seconds) * 1e6), 999_999)
        latency = round(10 ** rng.uniform(1, 6))
        extra = "".join(f" {rng.randrange(0, 5000)}" for _ in range(extra_fields))
        lines.append(f"{number % 4} {number} {latency} 0 {seconds} {micros}{extra}\n")
    return lines


def bins_line_by_line(lines: list[str]) -> SecondBins:
    bins = SecondBins(start=START)
    for number, line in enumerate(lines, start=1):
        parsed = parse_line(Path("log"), number, line.encode())
        assert parsed is not None
        add_to_bins(bins, parsed)
    return bins


@pytest.mark.parametrize("extra_fields", [0, 1, 2])
def test_a_plain_chunk_gives_the_bins_line_by_line_reading_gives(extra_fields: int):
    lines = lines_of(2_000, seed=extra_fields, extra_fields=extra_fields, before_start=30)
    columns = plain_columns("".join(lines).encode())
    assert columns is not None and columns.lines == len(lines)
    fast = SecondBins(start=START)
    add_columns_to_bins(fast, columns)

    slow = bins_line_by_line(lines)
    assert fast.bins.keys() == slow.bins.keys() and len(fast.bins) >= 5
    for second, expected in slow.bins.items():
        found = fast.bins[second]
        assert (found.latencies, found.buckets) == (expected.latencies, expected.buckets)
        assert found.sum_us == pytest.approx(expected.sum_us, rel=1e-12)
        assert found.sum_squares_us == pytest.approx(expected.sum_squares_us, rel=1e-12)
    last = lines[-1].split()
    assert columns.last_completed_at() == int(last[4]) + int(last[5]) / 1e6


def test_the_bucket_of_a_latency_is_the_line_by_line_one_across_the_whole_range():
    rng = random.Random(7)
    latencies = [*range(1, 5_000), *(rng.randrange(1, 3_600_000_000) for _ in range(20_000))]
    chunk = "".join(f"0 1 {latency} 0 {int(START)} 500000\n" for latency in latencies)
    columns = plain_columns(chunk.encode())
    assert columns is not None
    bins = SecondBins(start=START)
    add_columns_to_bins(bins, columns)

    expected: dict[int, int] = {}
    for latency in latencies:
        expected[latency_bucket(latency)] = expected.get(latency_bucket(latency), 0) + 1
    assert bins.bins[0].buckets == expected


@pytest.mark.parametrize(
    "odd_line",
    [
        "0 7 failed 0 1795315401 120000\n",
        "0 7 skipped 0 1795315401 120000 25000\n",
        "1795315401 3 3100 3217091 1400 1500\n",  # an aggregate line: too few fields for one
        "0 7 1200 0 1795315401  120000\n",  # two spaces
        " 0 7 1200 0 1795315401\n",  # a leading space, a field short
        "0 7 1200 0 1795315401 \n",  # a trailing space, a field short
        "\n",
        "0 7 1200 0 1795315401 120000 0 0 0\n",  # nine fields
        "0 7 1234567890123456789 0 1795315401 120000\n",  # more digits than an int64 holds
        "0 7 1200 0 179531540 120000\n",  # nine-digit epoch seconds
    ],
)
def test_a_chunk_with_anything_but_plain_lines_is_left_to_the_line_by_line_reading(
    odd_line: str,
):
    lines = lines_of(50, seed=1)
    assert plain_columns("".join([*lines[:20], odd_line, *lines[20:]]).encode()) is None


def test_a_chunk_must_end_with_a_whole_line():
    chunk = "".join(lines_of(10, seed=2)).encode()
    assert plain_columns(chunk[:-1]) is None
    assert plain_columns(b"") is None


def test_the_tail_bins_failures_and_meets_a_malformed_line_as_the_whole_files_would(
    tmp_path: Path,
):
    log = tmp_path / "pgbench_log.10"
    plain = lines_of(100, seed=3)
    log.write_text("".join(plain))
    tail = LogTail(tmp_path, "pgbench_log", START, 1.0, lambda line: None)
    tail.read_new_lines()
    assert tail.lines_read[log] == 100

    with log.open("a") as out:
        out.write(f"0 7 failed 0 {int(START) + 2} 120000\n" + "".join(lines_of(5, seed=4)))
    tail.read_new_lines()
    assert tail.lines_read[log] == 106
    assert tail.bins.bins[1].failed == 1

    with log.open("a") as out:
        out.write("1795315401 3 3100 3217091 1400 1500\n")
    with pytest.raises(TransactionLogError, match=r"pgbench_log.10:107: not a pgbench"):
        tail.read_new_lines()
    tail.close()
