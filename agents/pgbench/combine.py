"""Several pgbench processes measured together as one point (preset 3: one process per table).

The processes start together and measure the same window. The point's tps,
transactions, failure, skipped and late counts are the sums of what each process printed,
its average latency the transaction-weighted mean, its standard deviation the
pooled one (within and between processes), and its timeline the sum of the
processes' `-P` lines second by second.
"""

import math
from collections.abc import Mapping, Sequence
from typing import Any

from agents.contract.reports.results import ProgressLine

SUMMED_COUNTS = ("transactions", "failed", "retried", "aborted_clients", "skipped", "late")


def combine_processes(processes: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """The point summary of parsed processes (`parse_output` keys each); None where any lacks it."""
    tps = [process.get("tps") for process in processes]
    combined: dict[str, Any] = {
        "tps": None if None in tps else round(sum(value or 0.0 for value in tps), 6),
        "duration_s": max((p.get("duration_s") or 0 for p in processes), default=None) or None,
        "aborted": any(process.get("aborted") for process in processes),
        "progress": sum_progress([process.get("progress") or [] for process in processes]),
        "scripts": [
            {**script, "process": number}
            for number, process in enumerate(processes, start=1)
            for script in process.get("scripts") or []
        ],
    }
    for key in SUMMED_COUNTS:
        values = [process.get(key) for process in processes]
        combined[key] = None if None in values else sum(values)
    combined.update(_latency(processes))
    for key in ("errors", "notices", "messages"):
        combined[key] = [line for process in processes for line in process.get(key) or []]
    return combined


def _latency(processes: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """Transaction-weighted mean latency and the pooled standard deviation."""
    weighted = [
        (p["transactions"], p["latency_avg_ms"], p.get("latency_stddev_ms"))
        for p in processes
        if p.get("transactions") and p.get("latency_avg_ms") is not None
    ]
    if len(weighted) != len(processes):
        return {"latency_avg_ms": None, "latency_stddev_ms": None}
    total = sum(count for count, _mean, _stddev in weighted)
    mean = sum(count * avg for count, avg, _stddev in weighted) / total
    stddevs = [stddev for _count, _avg, stddev in weighted if stddev is not None]
    if len(stddevs) != len(weighted):
        return {"latency_avg_ms": round(mean, 3), "latency_stddev_ms": None}
    variance = (
        sum(n * (s**2 + (m - mean) ** 2) for (n, m, _), s in zip(weighted, stddevs, strict=True))
        / total
    )
    return {"latency_avg_ms": round(mean, 3), "latency_stddev_ms": round(math.sqrt(variance), 3)}


def sum_progress(timelines: Sequence[Sequence[ProgressLine]]) -> list[ProgressLine]:
    """One line per second that every process reported: tps summed, latency tps-weighted."""
    by_second = [{round(line["t"]): line for line in timeline} for timeline in timelines]
    if not by_second:
        return []
    seconds = sorted(set.intersection(*(set(lines) for lines in by_second)))
    return [sum_lines([lines[second] for lines in by_second]) for second in seconds]


def sum_lines(lines: Sequence[ProgressLine]) -> ProgressLine:
    """The processes' `-P` lines of one second as one line."""
    tps = sum(line["tps"] for line in lines)
    if tps > 0:
        latency = sum(line["tps"] * line["latency_ms"] for line in lines) / tps
        variance = sum(
            line["tps"] * (line["stddev_ms"] ** 2 + (line["latency_ms"] - latency) ** 2)
            for line in lines
        )
        stddev = math.sqrt(variance / tps)
    else:
        latency = stddev = 0.0
    summed: ProgressLine = {
        "t": float(round(lines[0]["t"])),
        "tps": round(tps, 3),
        "latency_ms": round(latency, 3),
        "stddev_ms": round(stddev, 3),
    }
    failed = [line.get("failed") for line in lines]
    if all(count is not None for count in failed):
        summed["failed"] = sum(count or 0 for count in failed)
    return summed
