"""The search for a capacity: which rate to offer next, and the capacity the probes give.

The search brackets, then narrows (runs/inference/capacity.py decides each probe):

1. the lowest rate of the range, then the highest: a failing lowest rate ends the
   search ("below the lowest probe"), a passing highest one too ("above the highest");
2. a rate whose probe was undecided (its percentile's interval holds the limit) is
   probed again, up to `max_repeats` times, its repeats pooled;
3. otherwise the widest gap, on the log of the rate, between the highest passing rate
   and the lowest failing one (undecided rates between them split it) is bisected at
   its geometric middle, until every gap is within `precision`;
4. the search ends when the budget of probes is spent, whatever it found.

The capacity is the rate where the percentile's estimates cross the limit
(interpolated on log rate and log latency between the two probes around the
crossing); its interval runs from the highest passing rate to the lowest failing
one: each end a probe decided by its own interval. Nothing is extrapolated past the
probes: a capacity below the lowest or above the highest is said to be so.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

from runs.inference.capacity import Decision, Objective, ProbeVerdict

DEFAULT_PRECISION = 0.05
DEFAULT_MAX_REPEATS = 3
# Why a search ends at its lowest rate without saying the capacity is below it.
ENDED_LOW_GENERATOR = "the load generator could not offer the lowest rate"
ENDED_LOW_UNDECIDED = "the lowest rate stayed undecided after its repeats"


class Found(StrEnum):
    FOUND = "found"
    BELOW = "below the lowest probe"
    ABOVE = "above the highest probe"
    AT_LEAST = "at least the highest passing probe"
    NONE = "not found"


@dataclass(frozen=True)
class SearchPlan:
    """The range of offered rates (tps), the most probes, and when to stop narrowing:
    every gap between the passing and the failing side within `precision` (a share)."""

    low_tps: float
    high_tps: float
    budget: int
    precision: float = DEFAULT_PRECISION
    max_repeats: int = DEFAULT_MAX_REPEATS

    def __post_init__(self) -> None:
        if not 0 < self.low_tps < self.high_tps:
            raise ValueError(f"no range from {self.low_tps} to {self.high_tps} tps")
        if self.budget < 2:
            raise ValueError("a search needs at least two probes, the range's ends")


@dataclass(frozen=True)
class RateOutcome:
    """One offered rate's verdict (its repeats pooled), the percentile's estimate (ms)
    and how many probes it took."""

    offered_tps: float
    verdict: ProbeVerdict
    estimate_ms: float | None
    probes: int = 1

    @property
    def decision(self) -> Decision:
        return self.verdict.decision

    @property
    def failing(self) -> bool:
        """Counts as the failing side: failed, or the load generator could not offer it."""
        return self.decision == Decision.FAIL or self.verdict.generator_limited


@dataclass(frozen=True)
class Step:
    """The rate to offer next, or why the search ends (`ended`)."""

    next_tps: float | None
    ended: str = ""


@dataclass(frozen=True)
class Capacity:
    """What the probes say: `found` (a Found), the estimate and its interval (tps; None
    where the probes give none), and whether the load generator limited the probes
    above it."""

    found: Found
    estimate: float | None
    lower: float | None
    upper: float | None
    generator_limited: bool
    sentence: str


def next_step(plan: SearchPlan, outcomes: Sequence[RateOutcome]) -> Step:
    """The next rate to offer after `outcomes` (each offered rate once), or the end."""
    spent = sum(outcome.probes for outcome in outcomes)
    by_rate = sorted(outcomes, key=lambda outcome: outcome.offered_tps)
    low = _at(by_rate, plan.low_tps)
    high = _at(by_rate, plan.high_tps)
    if spent >= plan.budget:
        return Step(None, "budget of probes spent")
    if low is None:
        return Step(plan.low_tps)
    if low.verdict.generator_limited:
        return Step(None, ENDED_LOW_GENERATOR)
    if low.failing:
        return Step(None, Found.BELOW)
    if low.decision == Decision.UNDECIDED:
        return Step(plan.low_tps) if _repeatable(low, plan) else Step(None, ENDED_LOW_UNDECIDED)
    if high is None:
        return Step(plan.high_tps)
    if high.decision == Decision.PASS:
        return Step(None, Found.ABOVE)
    floor = _highest_pass(by_rate)
    ceiling = _lowest_failing_above(by_rate, floor) or by_rate[-1]
    between = [o for o in by_rate if floor.offered_tps <= o.offered_tps <= ceiling.offered_tps]
    for outcome in between:
        if outcome.decision == Decision.UNDECIDED and _repeatable(outcome, plan):
            return Step(outcome.offered_tps)
    pairs = zip(between, between[1:], strict=False)
    gaps = [(math.log(b.offered_tps / a.offered_tps), a, b) for a, b in pairs]
    width, a, b = max(gaps, key=lambda gap: gap[0])
    if width <= math.log1p(plan.precision):
        return Step(None, "every gap within the precision")
    return Step(_round_rate(math.sqrt(a.offered_tps * b.offered_tps)))


def expected_probes(plan: SearchPlan) -> int:
    """How many probes a search is expected to take: the range's two ends, the bisections
    down to its precision, and one repeat near the limit; its budget at most."""
    halvings = math.log2(math.log(plan.high_tps / plan.low_tps) / math.log1p(plan.precision))
    return min(plan.budget, 2 + max(0, math.ceil(halvings)) + 1)


def capacity_of(
    plan: SearchPlan, objective: Objective, outcomes: Sequence[RateOutcome]
) -> Capacity:
    """The capacity the probes give (see the module's docstring)."""
    by_rate = sorted(outcomes, key=lambda outcome: outcome.offered_tps)
    at = f"at {objective.describe()}"
    passes = [o for o in by_rate if o.decision == Decision.PASS and not o.failing]
    if not by_rate:
        return Capacity(Found.NONE, None, None, None, False, f"no probe yet {at}")
    if not passes:
        upper = next((o for o in by_rate if o.failing), None)
        if upper is None:
            return Capacity(Found.NONE, None, None, None, False, f"no probe passed {at}")
        if upper.verdict.generator_limited:
            # The server was not what stopped it: nothing is known of its capacity.
            offered = _tps(upper.offered_tps)
            sentence = f"not found {at}: the load generator could not offer {offered} tps"
            return Capacity(Found.NONE, None, None, None, True, sentence)
        lowest = _tps(by_rate[0].offered_tps)
        sentence = f"below the lowest probe, {lowest} tps, {at}"
        return Capacity(Found.BELOW, None, None, upper.offered_tps, False, sentence)
    floor = _highest_pass(by_rate)
    ceiling = _lowest_failing_above(by_rate, floor)
    if ceiling is None:
        highest = by_rate[-1]
        if highest is floor:
            sentence = f"above the highest probe, {_tps(floor.offered_tps)} tps, {at}"
            return Capacity(Found.ABOVE, None, floor.offered_tps, None, False, sentence)
        sentence = f"at least {_tps(floor.offered_tps)} tps {at} (no probe above failed)"
        return Capacity(Found.AT_LEAST, None, floor.offered_tps, None, False, sentence)
    if ceiling.verdict.generator_limited:
        sentence = (
            f"at least {_tps(floor.offered_tps)} tps {at}: the load generator could not "
            f"offer {_tps(ceiling.offered_tps)} tps"
        )
        return Capacity(Found.AT_LEAST, None, floor.offered_tps, None, True, sentence)
    between = [o for o in by_rate if floor.offered_tps <= o.offered_tps <= ceiling.offered_tps]
    estimate = _crossing(between, objective.limit_ms)
    interval = f"[{_tps(floor.offered_tps)}, {_tps(ceiling.offered_tps)}]"
    sentence = f"{_tps(estimate)} tps {interval} {at}"
    return Capacity(Found.FOUND, estimate, floor.offered_tps, ceiling.offered_tps, False, sentence)


def _crossing(between: list[RateOutcome], limit_ms: float) -> float:
    """Where the estimates cross the limit, on log rate and log latency, between the last
    rate under it and the next; the geometric middle where an estimate is missing or the
    next rate failed for another reason than latency."""
    below = between[0]
    for outcome in between[1:]:
        over = outcome.estimate_ms is None or outcome.estimate_ms > limit_ms or outcome.failing
        if not over:
            below = outcome
            continue
        low, high = below.offered_tps, outcome.offered_tps
        a, b = below.estimate_ms, outcome.estimate_ms
        if a is None or b is None or not 0 < a < limit_ms < b:
            return math.sqrt(low * high)
        share = (math.log(limit_ms) - math.log(a)) / (math.log(b) - math.log(a))
        return math.exp(math.log(low) + share * math.log(high / low))
    return below.offered_tps


def _at(by_rate: Sequence[RateOutcome], tps: float) -> RateOutcome | None:
    return next((o for o in by_rate if math.isclose(o.offered_tps, tps, rel_tol=1e-6)), None)


def _repeatable(outcome: RateOutcome, plan: SearchPlan) -> bool:
    return outcome.probes < plan.max_repeats and not outcome.verdict.generator_limited


def _highest_pass(by_rate: Sequence[RateOutcome]) -> RateOutcome:
    return max(
        (o for o in by_rate if o.decision == Decision.PASS and not o.failing),
        key=lambda outcome: outcome.offered_tps,
    )


def _lowest_failing_above(by_rate: Sequence[RateOutcome], floor: RateOutcome) -> RateOutcome | None:
    return next((o for o in by_rate if o.offered_tps > floor.offered_tps and o.failing), None)


def _round_rate(tps: float) -> float:
    """A rate with three significant digits (pgbench -R takes a decimal)."""
    return float(f"{tps:.3g}")


def _tps(tps: float) -> str:
    return f"{tps:,.0f}"
