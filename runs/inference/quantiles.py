"""A latency percentile with a distribution-free interval, from logged transactions.

The interval of a quantile q from n logged latencies is the order-statistic one:
the number of latencies below the true quantile is binomial(n, q), so the latencies
of ranks `lower` and `upper` (its 2.5 % and 97.5 % points, `upper` one past) hold
the quantile with at least the confidence asked, whatever the distribution. With a
sampled log (`--sampling-rate`) n is the sample's size, not the transactions run:
a small sample widens the interval, and one too small for the rank has no upper
bound at all (`QuantileInterval.upper` None).

The binomial count assumes the latencies independent of each other. A queue's are
not (a stall delays a run of consecutive transactions), so the interval is narrower
than the percentile's spread between runs (docs/decisions.md, "A capacity probe is
decided by an order-statistic interval of its percentile").

The latencies come as an HdrHistogram (agents/pgbench/txlog.py; every value within
0.1 % of a measured one, the upper end of its bucket), so the repeats of one offered
rate pool by adding their histograms.
"""

import math
from dataclasses import dataclass
from typing import Protocol

from hdrh.histogram import HdrHistogram
from scipy import stats

CONFIDENCE = 0.95


class LatencySample(Protocol):
    """Logged latencies (ms) that can be read by rank."""

    @property
    def count(self) -> int: ...

    def at_rank(self, rank: int) -> float:
        """The latency of 1-based `rank` in increasing order."""
        ...


@dataclass(frozen=True)
class SortedSample:
    """Latencies held in a list (tests, small samples)."""

    values: tuple[float, ...]

    @classmethod
    def of(cls, values: list[float]) -> "SortedSample":
        return cls(tuple(sorted(values)))

    @property
    def count(self) -> int:
        return len(self.values)

    def at_rank(self, rank: int) -> float:
        return self.values[rank - 1]


class HistogramSample:
    """Latencies in HdrHistograms in microseconds (encoded as the agent sends them), pooled."""

    def __init__(self, encoded: list[str]) -> None:
        if not encoded:
            raise ValueError("no histogram to read latencies from")
        self.histogram = HdrHistogram.decode(encoded[0])
        for more in encoded[1:]:
            self.histogram.decode_and_add(more)

    @property
    def count(self) -> int:
        return int(self.histogram.get_total_count())

    def at_rank(self, rank: int) -> float:
        total = self.count
        if not 1 <= rank <= total:
            raise ValueError(f"rank {rank} outside 1..{total}")
        # HdrHistogram counts up to int(p / 100 * total + 0.5): the percentile of the rank.
        value = self.histogram.get_value_at_percentile(100.0 * (rank - 0.25) / total)
        return float(value) / 1000.0

    def percentile(self, percent: float) -> float:
        return float(self.histogram.get_value_at_percentile(percent)) / 1000.0


@dataclass(frozen=True)
class QuantileInterval:
    """A percentile's estimate (ms) and its interval; `upper` None when the sample holds
    too few latencies above the quantile to bound it, `lower` None likewise below."""

    percentile: float
    estimate: float
    lower: float | None
    upper: float | None
    count: int
    confidence: float


def order_statistic_ranks(
    count: int, quantile: float, confidence: float = CONFIDENCE
) -> tuple[int | None, int | None]:
    """The 1-based ranks whose latencies bound the `quantile` (0..1) of `count` latencies
    with `confidence` (two-sided, distribution-free); None for a side the sample cannot
    bound (the rank would fall outside 1..count)."""
    if count < 1 or not 0 < quantile < 1 or not 0 < confidence < 1:
        raise ValueError(f"no interval for quantile {quantile} of {count} at {confidence}")
    tail = (1 - confidence) / 2
    # P(B < lower) <= tail and P(B >= upper) <= tail for B ~ binomial(count, quantile):
    # the quantile lies in [X(lower), X(upper)] with probability >= confidence.
    lower = int(stats.binom.ppf(tail, count, quantile))
    upper = int(stats.binom.ppf(1 - tail, count, quantile)) + 1
    return (lower if lower >= 1 else None, upper if upper <= count else None)


def percentile_interval(
    sample: LatencySample, percentile: float, confidence: float = CONFIDENCE
) -> QuantileInterval:
    """The `percentile` (0..100) of the sample with its order-statistic interval."""
    count = sample.count
    if count < 1:
        raise ValueError("no latencies logged")
    quantile = percentile / 100.0
    lower, upper = order_statistic_ranks(count, quantile, confidence)
    estimate = sample.at_rank(min(count, max(1, math.ceil(quantile * count))))
    return QuantileInterval(
        percentile=percentile,
        estimate=estimate,
        lower=sample.at_rank(lower) if lower is not None else None,
        upper=sample.at_rank(upper) if upper is not None else None,
        count=count,
        confidence=confidence,
    )
