"""Latency percentiles from pgbench transaction logs (`-l`), in bounded memory.

pgbench writes one file per thread, `<prefix>.<pid>` for thread 0 and
`<prefix>.<pid>.<k>` for thread k; each line is one transaction:
`client_id transaction_no time script_no time_epoch time_us [lag] [retries]`
(docs/pgbench.md#transaction-logs). `time` is the latency in
microseconds, or `skipped` (-R with -L), `failed`, `serialization` or
`deadlock` (15+) for transactions that have no latency. With
`--sampling-rate` the lines are a random sample of the transactions, in the
same format.

The files are read line by line into an HdrHistogram covering 1 µs to 1 h
with 3 significant digits: its size is fixed by those bounds (a few hundred
kilobytes), not by the number of transactions, and every value it reports is
within 0.1 % of a latency pgbench measured.

Aggregated logs (`--aggregate-interval`) hold no single latencies; they are
merged by `merge_aggregate_logs`.
"""

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple, TypedDict

from hdrh.histogram import HdrHistogram

from agents.pgbench.log_timeline import SecondBins

log = logging.getLogger(__name__)

FAILURE_WORDS = {b"failed", b"serialization", b"deadlock"}
PERCENTILES = (50, 90, 95, 99)
LOWEST_US = 1
HIGHEST_US = 3_600_000_000
SIGNIFICANT_FIGURES = 3
AGGREGATE_SUMS = (
    "transactions",
    "sum_latency_us",
    "sum_latency_2",
    "sum_lag_us",
    "sum_lag_2",
    "skipped",
    "retried",
    "retries",
    "serialization_failures",
    "deadlock_failures",
)


class LogPercentiles(TypedDict):
    """Percentiles (ms) of the transactions a log holds, and how many it holds."""

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    sampled_transactions: int
    failed_count: int
    skipped_count: int


class TransactionLogError(ValueError):
    """A log line that is not a per-transaction log line (`path`, 1-based `line_no`)."""

    def __init__(self, path: Path, line_no: int, line: str):
        self.path = path
        self.line_no = line_no
        self.line = line
        super().__init__(f'{path}:{line_no}: not a pgbench per-transaction log line "{line}"')


def new_histogram() -> HdrHistogram:
    """An empty latency histogram in microseconds (1 µs to 1 h, 3 significant digits)."""
    return HdrHistogram(LOWEST_US, HIGHEST_US, SIGNIFICANT_FIGURES)


class TransactionLine(NamedTuple):
    """One per-transaction log line: when it completed (epoch seconds) and its latency
    (µs), or None with the word pgbench wrote instead (`failed`, `skipped`, ...)."""

    completed_at: float
    latency_us: int | None
    word: bytes


def parse_line(path: Path, line_no: int, line: bytes) -> TransactionLine | None:
    """One line of `path`. Raises TransactionLogError on a line of another format;
    a cut-off last line (no newline: pgbench killed) gives None, with a warning."""
    fields = line.split()
    # 6 to 8 fields whose fifth is epoch seconds and sixth microseconds (an aggregate
    # line has a latency there); tested inline: the live tail reads every line.
    if not (
        6 <= len(fields) <= 8
        and len(fields[4]) >= 10
        and fields[4].isdigit()
        and fields[5].isdigit()
    ):
        if line.endswith(b"\n"):
            raise TransactionLogError(path, line_no, line.decode(errors="replace").rstrip())
        log.warning("%s:%d: ignoring a cut-off last line", path, line_no)
        return None
    completed_at = int(fields[4]) + int(fields[5]) / 1e6
    if fields[2].isdigit():
        return TransactionLine(completed_at, int(fields[2]), b"")
    if fields[2] in FAILURE_WORDS or fields[2] == b"skipped":
        return TransactionLine(completed_at, None, fields[2])
    raise TransactionLogError(path, line_no, line.decode(errors="replace").rstrip())


def add_to_bins(bins: SecondBins, line: TransactionLine) -> None:
    """Count one transaction in the second it completed in (skipped ones never ran)."""
    if line.latency_us is not None:
        bins.add_latency(line.completed_at, line.latency_us)
    elif line.word in FAILURE_WORDS:
        bins.add_failure(line.completed_at)


@dataclass
class LogReading:
    """What the transaction log files of one point hold: latencies, failures, and the
    transactions binned by the second they completed in (agents/pgbench/log_timeline.py)."""

    histogram: HdrHistogram = field(default_factory=new_histogram)
    failed: int = 0
    skipped: int = 0
    bins: SecondBins = field(default_factory=lambda: SecondBins(start=0.0))

    def record(self, latency_us: int) -> None:
        """Record one latency; one above an hour counts as an hour (HdrHistogram's range)."""
        self.histogram.record_value(min(max(latency_us, LOWEST_US), HIGHEST_US))

    def add_line(self, path: Path, line_no: int, line: bytes) -> None:
        """One line of `path` (see `parse_line`)."""
        parsed = parse_line(path, line_no, line)
        if parsed is None:
            return
        add_to_bins(self.bins, parsed)
        if parsed.latency_us is not None:
            self.record(parsed.latency_us)
        elif parsed.word in FAILURE_WORDS:
            self.failed += 1
        else:
            self.skipped += 1


def read_transaction_logs(paths: list[Path], start: float = 0.0) -> LogReading:
    """Stream per-transaction log files into one reading; its second bins count from
    `start` (epoch seconds: when pgbench was launched).

    Raises TransactionLogError on a line of another format; a cut-off last
    line (pgbench killed) is skipped with a warning.
    """
    reading = LogReading(bins=SecondBins(start=start))
    for path in map(Path, paths):
        with open(path, "rb") as stream:
            for line_no, line in enumerate(stream, start=1):
                reading.add_line(path, line_no, line)
    return reading


def percentiles_of(reading: LogReading) -> LogPercentiles:
    """p50/p90/p95/p99/max in milliseconds of the successful transactions read.

    `sampled_transactions` counts the latencies the values rest on; the
    values are None when there is none.
    """
    histogram = reading.histogram
    count = histogram.get_total_count()
    values: dict[str, float | None] = {f"p{p}": None for p in PERCENTILES}
    values["max"] = None
    if count:
        at = histogram.get_percentile_to_value_dict(list(PERCENTILES))
        values.update({f"p{p}": _ms(at[p]) for p in PERCENTILES})
        values["max"] = _ms(histogram.get_max_value())
    return LogPercentiles(
        p50=values["p50"],
        p90=values["p90"],
        p95=values["p95"],
        p99=values["p99"],
        max=values["max"],
        sampled_transactions=count,
        failed_count=reading.failed,
        skipped_count=reading.skipped,
    )


def latency_percentiles(paths: list[Path]) -> LogPercentiles:
    """Percentiles over per-transaction log files (see `percentiles_of`)."""
    return percentiles_of(read_transaction_logs(paths))


def _ms(microseconds: int) -> float:
    return round(microseconds / 1000, 3)


AGGREGATE_FIELDS = (
    "interval_start transactions sum_latency_us sum_latency_2 min_latency_us max_latency_us"
    " sum_lag_us sum_lag_2 min_lag_us max_lag_us skipped retried retries"
    " serialization_failures deadlock_failures"
).split()


def _aggregate_row(path: Path, line_no: int, line: str) -> dict[str, int]:
    """One aggregate line; columns the version or options leave out (lag, 15+ counts) are 0."""
    fields = line.split()
    if len(fields) not in (6, 10, 11, 15) or not all(field.isdigit() for field in fields):
        raise TransactionLogError(path, line_no, line.rstrip())
    values = [int(field) for field in fields]
    values += [0] * (len(AGGREGATE_FIELDS) - len(values))
    return dict(zip(AGGREGATE_FIELDS, values, strict=True))


def merge_aggregate_logs(paths: list[Path]) -> list[dict[str, int]]:
    """Merge `--aggregate-interval` files of all threads into one row per interval, in order.

    Counts and sums are added; minima and maxima are combined over the threads
    that finished a transaction in the interval (pgbench prints 0 for the
    others). The last, partial interval is never in the files (notes §7).
    """
    merged: dict[int, dict[str, int]] = {}
    for path in paths:
        with open(path) as stream:
            for line_no, line in enumerate(stream, start=1):
                if line.strip():
                    _merge_row(merged, _aggregate_row(Path(path), line_no, line))
    return [merged[start] for start in sorted(merged)]


def _merge_row(merged: dict[int, dict[str, int]], row: dict[str, int]) -> None:
    current = merged.get(row["interval_start"])
    if current is None:
        merged[row["interval_start"]] = row
        return
    if row["transactions"]:
        for kind in ("latency", "lag"):
            low, high = f"min_{kind}_us", f"max_{kind}_us"
            current[low] = min(current[low], row[low]) if current["transactions"] else row[low]
            current[high] = max(current[high], row[high])
    for key in AGGREGATE_SUMS:
        current[key] += row[key]
