"""The per-second timeline of a point, from pgbench's transaction log instead of `-P 1`.

`-P 1` makes pgbench's thread 0 wake on a timer: every loop it reads the
clock and waits with a timeout, which arms and cancels a kernel timer per
transaction. On the select-only worst case that costs about 10 % of
pgbench's CPU and 3 % of throughput (docs/benchmarks.md), three times the
lab's whole budget. The transaction log the point writes anyway for its
percentiles (agents/pgbench/latency_log.py) says when each logged
transaction completed, so the timeline is taken from it:

- bin k holds the transactions that completed in [start + k, start + k + 1),
  `start` being when the agent launched pgbench (bin 0 also holds the
  connecting); its line has t = k + 1, as `-P` prints the end of the second;
- from a sample (`--sampling-rate`), tps is the logged lines over the rate: an
  estimate whose relative error is about 1/sqrt(lines). Every such line says
  what it rests on (`sampled` lines, `sampling_rate`), and the latency is the
  mean and standard deviation of the sampled transactions, and its p50, p95 and
  p99 (nearest rank among them, `sampled` says how many they rest on, read from
  buckets 2 % wide so that memory does not grow with the transactions);
- only the seconds pgbench ran through whole are kept (none past its exit).

An aggregate log (`--aggregate-interval=1`) holds exact per-second counts and
latency sums per thread: its timeline is exact (`aggregate_timeline`), and is
known once pgbench ends (stdio holds a minute of those lines before writing).

agents/pgbench/log_tail.py reads a sampled log while pgbench writes it.
"""

import math
from dataclasses import dataclass, field

from agents.contract.reports.results import ProgressLine


@dataclass
class SecondBin:
    """The logged transactions that completed within one second."""

    latencies: int = 0
    sum_us: float = 0.0
    sum_squares_us: float = 0.0
    failed: int = 0
    # The second's latencies counted by bucket (`latency_bucket`), for its percentiles.
    buckets: dict[int, int] = field(default_factory=dict)


# The percentiles each second carries, and the width of the buckets they are read from:
# a bucket holds latencies within 2 % of each other, so a second holds a few hundred
# buckets however many transactions it logged.
SECOND_PERCENTILES = (50, 95, 99)
BUCKET_GROWTH = 1.02


def latency_bucket(latency_us: int) -> int:
    """The bucket of a latency: latencies within 2 % of each other share one."""
    return math.floor(math.log(max(latency_us, 1), BUCKET_GROWTH))


def bucket_value_us(bucket: int) -> float:
    """The middle (geometric) of a bucket's latencies, in microseconds."""
    return float(BUCKET_GROWTH ** (bucket + 0.5))


def second_percentiles(buckets: dict[int, int]) -> dict[str, float | None]:
    """`p50_ms`, `p95_ms`, `p99_ms` (nearest rank) of one second's bucketed latencies;
    None for a second with none."""
    total = sum(buckets.values())
    values: dict[str, float | None] = {f"p{p}_ms": None for p in SECOND_PERCENTILES}
    if not total:
        return values
    ordered = sorted(buckets.items())
    for percent in SECOND_PERCENTILES:
        rank, seen = max(math.ceil(percent / 100 * total), 1), 0
        for bucket, count in ordered:
            seen += count
            if seen >= rank:
                values[f"p{percent}_ms"] = round(bucket_value_us(bucket) / 1000, 3)
                break
    return values


@dataclass
class SecondBins:
    """Logged transactions binned by the second (since `start`, epoch seconds) they completed in."""

    start: float
    bins: dict[int, SecondBin] = field(default_factory=dict)

    def bin_at(self, completed_at: float) -> SecondBin | None:
        """The bin of a transaction completed at `completed_at`; None before `start`."""
        offset = completed_at - self.start
        if offset < 0:
            return None
        return self.bin_at_second(int(offset))

    def bin_at_second(self, second: int) -> SecondBin:
        """The bin of second `second` since `start` (made empty if new)."""
        found = self.bins.get(second)
        if found is None:
            found = self.bins[second] = SecondBin()
        return found

    def add_latency(self, completed_at: float, latency_us: int) -> None:
        found = self.bin_at(completed_at)
        if found is not None:
            found.latencies += 1
            found.sum_us += latency_us
            found.sum_squares_us += float(latency_us) ** 2
            bucket = latency_bucket(latency_us)
            found.buckets[bucket] = found.buckets.get(bucket, 0) + 1

    def add_failure(self, completed_at: float) -> None:
        found = self.bin_at(completed_at)
        if found is not None:
            found.failed += 1

    def line(self, second: int, sampling_rate: float) -> ProgressLine:
        """Second `second` as a progress line, scaled up by the sampling rate."""
        found = self.bins.get(second, SecondBin())
        mean_us = found.sum_us / found.latencies if found.latencies else 0.0
        variance = (
            found.sum_squares_us / found.latencies - mean_us**2 if found.latencies > 1 else 0.0
        )
        line = ProgressLine(
            t=float(second + 1),
            tps=round(found.latencies / sampling_rate, 3),
            latency_ms=round(mean_us / 1000, 3),
            stddev_ms=round(math.sqrt(max(variance, 0.0)) / 1000, 3),
            failed=round(found.failed / sampling_rate),
            sampled=found.latencies,
            sampling_rate=sampling_rate,
        )
        percentiles = second_percentiles(found.buckets)
        line["p50_ms"], line["p95_ms"] = percentiles["p50_ms"], percentiles["p95_ms"]
        line["p99_ms"] = percentiles["p99_ms"]
        return line

    def timeline(self, whole_seconds: int, sampling_rate: float) -> list[ProgressLine]:
        """Lines for seconds 0 to whole_seconds - 1 (a second with nothing logged reads 0 tps)."""
        return [self.line(second, sampling_rate) for second in range(max(whole_seconds, 0))]


def whole_seconds(elapsed_s: float) -> int:
    """The seconds pgbench ran through whole (the last, cut one is left out)."""
    return math.floor(elapsed_s)


def aggregate_timeline(rows: list[dict[str, int]]) -> list[ProgressLine]:
    """Exact per-second lines from merged `--aggregate-interval=1` rows
    (txlog.merge_aggregate_logs)."""
    if not rows:
        return []
    first = rows[0]["interval_start"]
    lines = []
    for row in rows:
        count = row["transactions"]
        mean_us = row["sum_latency_us"] / count if count else 0.0
        variance = row["sum_latency_2"] / count - mean_us**2 if count > 1 else 0.0
        lines.append(
            ProgressLine(
                t=float(row["interval_start"] - first + 1),
                tps=float(count),
                latency_ms=round(mean_us / 1000, 3),
                stddev_ms=round(math.sqrt(max(variance, 0.0)) / 1000, 3),
                failed=row["serialization_failures"] + row["deadlock_failures"],
                skipped=row["skipped"],
            )
        )
    return lines
