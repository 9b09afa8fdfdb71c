"""Capacity under a latency objective: each probe's decision, and what the probes say.

A probe offers a rate with pgbench -R: transactions are scheduled at that rate and
each one's latency counts from its scheduled start, so time spent waiting behind a
stall counts against it (no coordinated omission; the latencies read here are the
logged ones, lag included). A probe at one offered rate (its repeats pooled) is:

- PASS when the upper end of its percentile's interval (runs/inference/quantiles.py)
  is within the limit, the rate it reached is within `RATE_TOLERANCE` of the offered
  one (or of a Poisson count's spread where that is wider: a schedule of random
  arrivals reaches its rate only on average), and no more transactions failed or were
  skipped (-L) than the objective allows;
- FAIL when the lower end of its interval is over the limit, the rate was not reached,
  or too many transactions failed or were skipped;
- UNDECIDED when its interval straddles the limit (or cannot bound it from above);
- limited by the load generator when pgbench's own CPUs were saturated: it cannot say
  whether the server would have kept the rate, so it never passes.
"""

import math
from dataclasses import dataclass
from enum import StrEnum

from runs.inference.quantiles import QuantileInterval

# The rate reached may fall short of the offered one by this share (or the count's spread).
RATE_TOLERANCE = 0.01
# Poisson spreads allowed before a shortfall counts (pgbench -R draws random arrivals).
POISSON_SPREADS = 3.0
# pgbench's CPU time over what its threads could use: above this, the generator limited it.
GENERATOR_BUSY_SHARE = 0.9


class Decision(StrEnum):
    PASS = "pass"
    FAIL = "fail"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class Objective:
    """The percentile (e.g. 99.0) that must stay within `limit_ms`, and the share of
    transactions (percent) that may fail or be skipped (-L)."""

    percentile: float
    limit_ms: float
    max_skipped_pct: float = 0.0
    max_failed_pct: float = 0.0

    @property
    def percentile_name(self) -> str:
        """The percentile as the answers write it: p99, p99.9."""
        return f"p{self.percentile:g}"

    def describe(self) -> str:
        return f"{self.percentile_name} <= {self.limit_ms:g} ms"


@dataclass(frozen=True)
class ProbeMeasure:
    """What one offered rate measured, its repeats pooled: the rate reached (tps), the
    transactions scheduled in all (run, failed and skipped), the failed and skipped ones,
    the seconds measured, the percentile's interval (None: nothing logged) and whether
    pgbench's CPUs were saturated."""

    offered_tps: float
    reached_tps: float
    transactions: int
    failed: int
    skipped: int
    seconds: float
    interval: QuantileInterval | None
    generator_busy: bool = False


@dataclass(frozen=True)
class ProbeVerdict:
    """A probe's decision, every reason it did not pass (empty for a pass), the rate it
    reached where that fell short of the offered one (the server's or the load
    generator's throughput; None where the rate was reached), and whether its
    percentile's interval (over the limit, or holding it) is its only reason."""

    decision: Decision
    reasons: tuple[str, ...]
    generator_limited: bool
    short_of_rate_tps: float | None = None
    percentile_only: bool = False


def rate_shortfall_allowed(offered_tps: float, seconds: float) -> float:
    """The share of the offered rate a probe may fall short of and still count as reached."""
    expected = offered_tps * seconds
    poisson = POISSON_SPREADS / math.sqrt(expected) if expected > 0 else 1.0
    return max(RATE_TOLERANCE, poisson)


def decide_probe(measure: ProbeMeasure, objective: Objective) -> ProbeVerdict:
    """PASS, FAIL or UNDECIDED for one offered rate (see the module's rules)."""
    failing: list[str] = []
    unsure: list[str] = []
    allowed = rate_shortfall_allowed(measure.offered_tps, measure.seconds)
    short_of_rate = measure.reached_tps < measure.offered_tps * (1 - allowed)
    if short_of_rate:
        reached = measure.reached_tps / measure.offered_tps * 100 if measure.offered_tps else 0.0
        failing.append(f"rate not reached ({reached:.1f} % of the offered rate)")
    scheduled = max(measure.transactions, 1)
    if measure.failed * 100 / scheduled > objective.max_failed_pct:
        failing.append(f"{measure.failed:,} transactions failed")
    if measure.skipped * 100 / scheduled > objective.max_skipped_pct:
        failing.append(f"{measure.skipped:,} transactions skipped (later than -L)")
    interval = measure.interval
    name = objective.percentile_name
    over_limit = False
    if interval is None:
        unsure.append("no latency logged")
    elif interval.lower is not None and interval.lower > objective.limit_ms:
        failing.append(f"{name} at least {interval.lower:g} ms")
        over_limit = True
    elif interval.upper is None:
        unsure.append(f"too few logged transactions ({interval.count:,}) to bound {name}")
    elif interval.upper > objective.limit_ms:
        held = f"[{_ms(interval.lower)}, {interval.upper:g}] ms"
        unsure.append(f"{name} interval {held} holds the limit")
        over_limit = True
    if measure.generator_busy:
        unsure.append("limited by the load generator (pgbench's CPUs saturated)")
    if failing and not measure.generator_busy:
        decision = Decision.FAIL
    elif failing or unsure:
        decision = Decision.UNDECIDED
    else:
        decision = Decision.PASS
    short_of = measure.reached_tps if short_of_rate else None
    reasons = tuple(failing + unsure)
    percentile_only = over_limit and len(reasons) == 1
    return ProbeVerdict(decision, reasons, measure.generator_busy, short_of, percentile_only)


def _ms(value: float | None) -> str:
    return "?" if value is None else f"{value:g}"
