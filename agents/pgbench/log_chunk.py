"""Binning a chunk of transaction log lines in a few array operations: the live tail's fast path.

The live tail (agents/pgbench/log_tail.py) reads about 500 sampled lines a
second while pgbench measures, so every microsecond it spends on a line is
taken from the CPUs pgbench and the server share. Parsed line by line in
Python a line costs about 4 µs; here a chunk is checked and read by a few
numpy calls (its bytes, its spaces per line, then numpy's text parser), about
0.4 µs a line.

Only the common chunk takes this path: complete lines of one field count
(6 to 8), every field digits, single spaces. A chunk holding anything else (a
failed or skipped transaction, a line of another format) gives None and is
read line by line, where every rule and error message of agents/pgbench/txlog.py
applies. Both paths bin a latency into the same second and bucket.
"""

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from agents.pgbench.log_timeline import BUCKET_GROWTH, SecondBins

SPACE, NEWLINE, ZERO, NINE = ord(" "), ord("\n"), ord("0"), ord("9")
PLAIN_BYTES = np.zeros(256, dtype=np.bool_)
PLAIN_BYTES[[SPACE, NEWLINE, *range(ZERO, NINE + 1)]] = True
FIELDS = range(6, 9)
LATENCY, EPOCH_SECONDS, EPOCH_MICROSECONDS = 2, 4, 5
# Epoch seconds have ten digits until 2286 (parse_line asks for at least ten).
SMALLEST_EPOCH = 10**9
# Eighteen digits always fit an int64 (the text parser saturates beyond).
MOST_DIGITS = 18

Integers = npt.NDArray[np.int64]


@dataclass(frozen=True)
class ChunkColumns:
    """The fields of a chunk's lines the timeline needs: each transaction's latency (µs) and
    when it completed (epoch seconds, microseconds)."""

    latency_us: Integers
    epoch_s: Integers
    epoch_us: Integers

    @property
    def lines(self) -> int:
        return len(self.latency_us)

    def last_completed_at(self) -> float:
        """When the chunk's last line's transaction completed (epoch seconds)."""
        return int(self.epoch_s[-1]) + int(self.epoch_us[-1]) / 1e6


def plain_columns(chunk: bytes) -> ChunkColumns | None:
    """The columns of `chunk` (complete lines, ending in a newline) when every line is a plain
    successful transaction of one field count; None for anything else."""
    raw = np.frombuffer(chunk, dtype=np.uint8)
    if not len(raw) or raw[-1] != NEWLINE or not bool(PLAIN_BYTES[raw].all()):
        return None
    # Spaces and newlines are the only plain bytes below "0": a field runs between two.
    separators = np.flatnonzero(raw < ZERO)
    if int(np.diff(separators, prepend=-1).max()) > MOST_DIGITS + 1:
        return None
    newlines = np.flatnonzero(raw == NEWLINE)
    spaces_per_line = np.diff(np.cumsum(raw == SPACE)[newlines], prepend=0)
    fields = int(spaces_per_line[0]) + 1
    if fields not in FIELDS or not bool((spaces_per_line == fields - 1).all()):
        return None
    # Digits and single spaces only, so the text parser reads every field (a field left
    # empty by two spaces shows as one value too few).
    values = np.fromstring(chunk, dtype=np.int64, sep=" ")
    if len(values) != len(newlines) * fields:
        return None
    table = values.reshape(-1, fields)
    if not bool((table[:, EPOCH_SECONDS] >= SMALLEST_EPOCH).all()):
        return None
    return ChunkColumns(
        latency_us=table[:, LATENCY],
        epoch_s=table[:, EPOCH_SECONDS],
        epoch_us=table[:, EPOCH_MICROSECONDS],
    )


def add_columns_to_bins(bins: SecondBins, columns: ChunkColumns) -> None:
    """Count the chunk's transactions in the seconds they completed in (as
    SecondBins.add_latency does one at a time)."""
    offsets = (columns.epoch_s - bins.start) + columns.epoch_us / 1e6
    counted = offsets >= 0
    seconds = np.floor(offsets[counted]).astype(np.int64)
    latencies = columns.latency_us[counted]
    buckets = np.floor(np.log(np.maximum(latencies, 1)) / np.log(BUCKET_GROWTH)).astype(np.int64)
    if not len(seconds):
        return
    first = int(seconds.min())
    for second in range(first, int(seconds.max()) + 1):
        in_second = seconds == second
        second_latencies = latencies[in_second]
        if not len(second_latencies):
            continue
        found = bins.bin_at_second(second)
        found.latencies += len(second_latencies)
        found.sum_us += float(second_latencies.sum())
        found.sum_squares_us += float(np.square(second_latencies.astype(np.float64)).sum())
        second_buckets = buckets[in_second]
        lowest = int(second_buckets.min())
        counts = np.bincount(second_buckets - lowest)
        for offset in np.flatnonzero(counts).tolist():
            bucket = lowest + offset
            found.buckets[bucket] = found.buckets.get(bucket, 0) + int(counts[offset])
