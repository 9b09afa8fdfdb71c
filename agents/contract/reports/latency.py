"""How a point's latency percentiles were obtained (the point's `latency_percentiles_ms`).

The agent fills it from pgbench's transaction log (agents/pgbench/latency_log.py);
the lab stores it as it comes and shows `describe_percentiles` beside the
numbers. docs/decisions.md says why the default is a sample.
"""

from typing import Literal, NotRequired, TypedDict

# Where the values come from: a random sample of the transactions, all of
# them, or the per-second aggregates (max only).
PercentileSource = Literal["sample", "full", "aggregate"]
# What the sampling rate was chosen from.
ExpectedFrom = Literal["warmup", "calibration", "previous_point", "rate_limit", "first_guess"]

FULL_LOG_WARNING = (
    "latency_log full: pgbench writes a line per transaction, which costs throughput "
    "(5 to 7 % for select-only at 2 clients on a small host): these tps are lower than plain "
    "pgbench's"
)


class LatencyPercentiles(TypedDict):
    """Latency percentiles of one point in milliseconds, and what they rest on.

    `p50`..`max` are None when nothing could be measured (no successful
    transaction, an unreadable log: then `error` says why). In a sample,
    `sampling_rate` is the fraction of transactions pgbench logged and
    `sampled_transactions` how many successful ones the values rest on; a
    full log has rate 1. `expected_tps` and `expected_from` say how the rate
    was chosen. A point with a rate (-R) also carries `histogram`: the logged
    latencies (µs) as an encoded HdrHistogram (base64 of its compressed form), from
    which the lab reads any percentile's interval and pools the points of one rate.
    """

    p50: float | None
    p90: float | None
    p95: float | None
    p99: float | None
    max: float | None
    source: PercentileSource
    sampling_rate: float | None
    sampled_transactions: int
    failed_count: int
    skipped_count: int
    expected_tps: NotRequired[float | None]
    expected_from: NotRequired[ExpectedFrom | None]
    error: NotRequired[str | None]
    warning: NotRequired[str | None]
    histogram: NotRequired[str | None]


def describe_percentiles(percentiles: LatencyPercentiles | None) -> str:
    """One line saying where a point's percentiles come from, e.g.
    "from a 2 % sample, 41,000 transactions"."""
    if not percentiles:
        return "no latency log"
    if "source" not in percentiles:
        return "source not recorded"
    if percentiles.get("error"):
        return f"no percentiles: {percentiles['error']}"
    count = f"{percentiles.get('sampled_transactions') or 0:,}"
    if percentiles["source"] == "aggregate":
        return f"max from per-second aggregates of {count} transactions; no percentiles"
    if percentiles["source"] == "full":
        return f"from every transaction, {count}"
    return f"from a {_percent(percentiles.get('sampling_rate') or 0)} sample, {count} transactions"


def _percent(rate: float) -> str:
    return f"{round(rate * 100, 3):g} %"
