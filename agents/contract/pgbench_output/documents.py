"""The documents `parse_output` and `parse_init_progress` return (their readers are
agents/contract/pgbench_output/parse.py and init_progress.py).

Every key is always present (None or an empty list when pgbench did not print
it), except `zipfian_overflows`, which only some runs print.
"""

from typing import Literal, NotRequired, TypedDict

from agents.contract.reports.results import ProgressLine, StatementLatency

# The counters and times both the summary and a per-script block print.
SharedCount = Literal[
    "failed", "serialization_failures", "deadlock_failures", "retried", "retries", "skipped"
]
SharedTime = Literal["latency_avg_ms", "latency_stddev_ms"]
# Those only the summary prints.
SummaryCount = Literal[
    "scale",
    "partitions",
    "clients",
    "threads",
    "max_tries",
    "transactions_per_client",
    "duration_s",
    "zipfian_overflows",
]
SummaryTime = Literal["initial_connection_ms", "average_connection_ms"]
SummaryText = Literal["transaction_type", "partition_method", "query_mode"]
TpsKey = Literal["tps", "tps_including_connections"]
SummaryCountKey = Literal[SummaryCount, SharedCount]
SummaryTimeKey = Literal[SummaryTime, SharedTime]


class FailureCounts(TypedDict):
    """The failure counters (`SharedCount`) both the summary and a per-script block print."""

    failed: int | None
    serialization_failures: int | None
    deadlock_failures: int | None
    retried: int | None
    retries: int | None
    skipped: int | None


class ScriptSummary(FailureCounts):
    """One per-script block (`SQL script N: name`, or 9.x's `script statistics:`)."""

    number: int
    name: str | None
    weight: int | None
    weight_percent: float | None
    transactions: int | None
    percent_of_total: float | None
    processed: int | None
    tps: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None


class PgbenchOutput(FailureCounts):
    """What `parse_output` read (the document `python -m agents parse` prints)."""

    pgbench_version: str | None
    server_version: str | None
    transaction_type: str | None
    scale: int | None
    partition_method: str | None
    partitions: int | None
    query_mode: str | None
    clients: int | None
    threads: int | None
    max_tries: int | None
    duration_s: int | None
    transactions_per_client: int | None
    transactions: int | None
    transactions_planned: int | None
    late: int | None
    latency_limit_ms: float | None
    latency_avg_ms: float | None
    latency_stddev_ms: float | None
    lag_avg_ms: float | None
    lag_max_ms: float | None
    initial_connection_ms: float | None
    average_connection_ms: float | None
    tps: float | None
    tps_including_connections: float | None
    latency_includes_failures: bool
    statements: list[StatementLatency]
    scripts: list[ScriptSummary]
    progress: list[ProgressLine]
    aborted: bool
    aborted_clients: int
    errors: list[str]
    notices: list[str]
    messages: list[str]
    zipfian_overflows: NotRequired[int]


class InitProgress(TypedDict):
    """One `pgbench -i` stderr line: see `parse_init_progress`."""

    percent: float | None
    table: str | None
    message: str
    step_seconds: dict[str, float]


NO_FAILURE_COUNTS: FailureCounts = {
    "failed": None,
    "serialization_failures": None,
    "deadlock_failures": None,
    "retried": None,
    "retries": None,
    "skipped": None,
}


def empty_output() -> PgbenchOutput:
    """The document before any line is read: every value None, every list empty."""
    return {
        "pgbench_version": None,
        "server_version": None,
        "transaction_type": None,
        "scale": None,
        "partition_method": None,
        "partitions": None,
        "query_mode": None,
        "clients": None,
        "threads": None,
        "max_tries": None,
        "duration_s": None,
        "transactions_per_client": None,
        "transactions": None,
        "transactions_planned": None,
        **NO_FAILURE_COUNTS,
        "late": None,
        "latency_limit_ms": None,
        "latency_avg_ms": None,
        "latency_stddev_ms": None,
        "lag_avg_ms": None,
        "lag_max_ms": None,
        "initial_connection_ms": None,
        "average_connection_ms": None,
        "tps": None,
        "tps_including_connections": None,
        "latency_includes_failures": False,
        "statements": [],
        "scripts": [],
        "progress": [],
        "aborted": False,
        "aborted_clients": 0,
        "errors": [],
        "notices": [],
        "messages": [],
    }


def empty_script(number: int, name: str | None) -> ScriptSummary:
    """A per-script block before its ` - ` lines are read."""
    return {
        "number": number,
        "name": name,
        "weight": None,
        "weight_percent": None,
        "transactions": None,
        "percent_of_total": None,
        "processed": None,
        "tps": None,
        **NO_FAILURE_COUNTS,
        "latency_avg_ms": None,
        "latency_stddev_ms": None,
    }
