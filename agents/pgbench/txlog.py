"""Latency percentiles from pgbench per-transaction logs (`-l`).

pgbench writes one file per thread, `<prefix>.<pid>` for thread 0 and
`<prefix>.<pid>.<k>` for thread k; each line is one transaction:
`client_id transaction_no time script_no time_epoch time_us [lag] [retries]`
(../shared/pgbench-notes.md section 7). `time` is the latency in
microseconds, or `skipped` (-R with -L), `failed`, `serialization` or
`deadlock` (15+) for transactions that have no latency.

Aggregated logs (`--aggregate-interval`) hold no single latencies; they are
merged by `merge_aggregate_logs`.
"""

import logging
import math
from array import array
from pathlib import Path

log = logging.getLogger(__name__)

FAILURE_WORDS = {b"failed", b"serialization", b"deadlock"}
PERCENTILES = (50, 90, 95, 99)
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


class TransactionLogError(ValueError):
    """A log line that is not a per-transaction log line (`path`, 1-based `line_no`)."""

    def __init__(self, path: Path, line_no: int, line: str):
        self.path = path
        self.line_no = line_no
        self.line = line
        super().__init__(f'{path}:{line_no}: not a pgbench per-transaction log line "{line}"')


def _is_transaction_line(fields: list[bytes]) -> bool:
    """6 to 8 fields whose fifth is epoch seconds (an aggregate line has a latency there)."""
    return 6 <= len(fields) <= 8 and len(fields[4]) >= 10 and fields[4].isdigit()


def _read_latencies(path: Path, latencies: array, counts: dict[str, int]) -> None:
    """Append the latencies (µs) of one file to `latencies`; count failed and skipped lines."""
    with open(path, "rb") as stream:
        for line_no, line in enumerate(stream, start=1):
            fields = line.split()
            if not _is_transaction_line(fields):
                if line.endswith(b"\n"):
                    raise TransactionLogError(path, line_no, line.decode(errors="replace").rstrip())
                log.warning("%s:%d: ignoring a cut-off last line", path, line_no)
            elif fields[2].isdigit():
                latencies.append(int(fields[2]))
            elif fields[2] in FAILURE_WORDS:
                counts["failed"] += 1
            elif fields[2] == b"skipped":
                counts["skipped"] += 1
            else:
                raise TransactionLogError(path, line_no, line.decode(errors="replace").rstrip())


def _nearest_rank(ordered: list[int], percent: int) -> int:
    """The smallest value with at least `percent`% of the values at or below it."""
    return ordered[max(math.ceil(percent / 100 * len(ordered)), 1) - 1]


def latency_percentiles(paths: list[Path]) -> dict:
    """Latency percentiles in milliseconds over per-transaction log files, by nearest rank.

    Returns {"p50", "p90", "p95", "p99", "max", "count", "failed_count",
    "skipped_count"}: `count` is the number of transactions with a latency
    (successful ones), the percentiles are the nearest-rank values of those
    (no interpolation: each is a latency pgbench measured), None when there is
    none. Files are read line by line and only the latencies are kept, as
    64-bit integers. Raises TransactionLogError on a line of another format;
    a cut-off last line (pgbench killed) is skipped with a warning.
    """
    latencies = array("q")
    counts = {"failed": 0, "skipped": 0}
    for path in paths:
        _read_latencies(Path(path), latencies, counts)
    result: dict = {f"p{p}": None for p in PERCENTILES}
    result.update(
        max=None,
        count=len(latencies),
        failed_count=counts["failed"],
        skipped_count=counts["skipped"],
    )
    if latencies:
        ordered = sorted(latencies)
        del latencies
        result.update({f"p{p}": _nearest_rank(ordered, p) / 1000 for p in PERCENTILES})
        result["max"] = ordered[-1] / 1000
    return result


AGGREGATE_FIELDS = (
    "interval_start transactions sum_latency_us sum_latency_2 min_latency_us max_latency_us"
    " sum_lag_us sum_lag_2 min_lag_us max_lag_us skipped retried retries"
    " serialization_failures deadlock_failures"
).split()


def _aggregate_row(path: Path, line_no: int, line: str) -> dict:
    """One aggregate line; columns the version or options leave out (lag, 15+ counts) are 0."""
    fields = line.split()
    if len(fields) not in (6, 10, 11, 15) or not all(field.isdigit() for field in fields):
        raise TransactionLogError(path, line_no, line.rstrip())
    values = [int(field) for field in fields]
    values += [0] * (len(AGGREGATE_FIELDS) - len(values))
    return dict(zip(AGGREGATE_FIELDS, values, strict=True))


def merge_aggregate_logs(paths: list[Path]) -> list[dict]:
    """Merge `--aggregate-interval` files of all threads into one row per interval, in order.

    Counts and sums are added; minima and maxima are combined over the threads
    that finished a transaction in the interval (pgbench prints 0 for the
    others). The last, partial interval is never in the files (notes §7).
    """
    merged: dict[int, dict] = {}
    for path in paths:
        with open(path) as stream:
            for line_no, line in enumerate(stream, start=1):
                if line.strip():
                    _merge_row(merged, _aggregate_row(Path(path), line_no, line))
    return [merged[start] for start in sorted(merged)]


def _merge_row(merged: dict[int, dict], row: dict) -> None:
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
