"""The search for a capacity: which rate to offer next, and the capacity the probes give.

The search brackets, then narrows (runs/inference/capacity.py decides each probe):

1. the lowest rate of the range, then the highest: a failing lowest rate, failing in
   `confirming_probes` windows, ends the search ("below the lowest probe"), a passing
   highest one too ("above the highest"; noise does not make a rate pass);
2. a rate whose verdict contradicts another's (a failing rate below a passing one) is
   probed again, up to `confirming_probes` times: on a noisy host one stalled window
   fails a rate the server can serve;
3. a rate whose probe was undecided (its percentile's interval holds the limit) is
   probed again, up to `max_repeats` times, its repeats pooled;
4. otherwise the widest gap, on the log of the rate, between the floor and the ceiling
   (below) is split, until every gap is within `precision`: a wide gap where the
   percentile's estimates cross the limit on a queue's latency curve through its ends
   (`_split`), a narrow one (within `INTERPOLATED_GAP_PRECISIONS` precisions) at its
   geometric middle, where a window's noise outweighs the curve;
5. then the floor and the ceiling are probed again until each was decided alone (as
   it was pooled) in `confirming_probes` windows, in later rounds: a failure in one
   window may be that window's stall, and a floor that passed once may have been
   spared the stalls that fail half the windows at its rate (one more window there
   measures the host's noise just under the capacity: a failure makes it mixed, and
   the search goes below it); an undecided window confirms nothing;
6. where the windows at one rate spread and a line through the windows near the
   capacity does not bound it on a side (runs/inference/capacity_crossing.py), a rate
   beyond the bracket on that side is probed again where a few more windows would make
   its windows lie clear of the limit (up to MAX_CLEARING_WINDOWS at a rate: a sharp
   knee, which no line fits), else that side's shoulder, up to MAX_SHOULDER_WINDOWS
   windows a side;
7. the search ends when the budget of probes is spent, whatever it found.

A window the host stalled in (runs/inference/stalls.py: its percentile over the limit
in a burst of a second or two only) is set aside, up to `MAX_STALLED_WINDOWS` a rate:
it counts towards the budget, not towards the rate's windows, so its rate is probed
again as if it had not been; beyond that bound every window of the rate counts as it
is, and the answer says the host's stalls decided that rate. The answer counts the
stalled windows.

A rate is decided on its probes pooled (runs/inference/capacity.py), and each probe is
also decided alone (its window): a rate one of whose windows passed and another failed
is mixed, the host's noise at that rate, and stays undecided however often it is probed.

The floor is the highest passing rate with no failing or mixed rate below it, the
ceiling the lowest failing rate with no passing or mixed rate above it, so that a
search whose verdicts contradict each other gives the whole span of the contradiction.
The capacity is the rate where the percentile's estimates cross the limit (interpolated
on log rate and log latency between the two probes around the crossing, stepping over
mixed rates), or where the windows spread and the line through them bounds both sides,
where the line meets the limit, if that lies between the floor and the ceiling (seeded
searches' estimates erred by a median 3 to 4 % instead of 5.5 to 7.5 % at a spread of
0.5, 200 seeds, docs/decisions.md); its interval runs from the floor to the ceiling (or
to the throughput a probe reached when it fell short of its offer, where that is lower:
the server cannot serve more on schedule), widened where the windows spread to the
line's crossing of the limit (or, on a side the line does not bound, to the nearest rate
beyond the bracket whose windows lie clear of the limit:
runs/inference/capacity_spread.py's `clear_of_limit`), and it is confirmed when the
floor passed, and the ceiling failed, in `confirming_probes` windows each. Nothing is
extrapolated past the probes: a capacity below the lowest or above the highest is said
to be so.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

from runs.inference.capacity import Decision, Objective, ProbeVerdict
from runs.inference.capacity_crossing import (
    CROSSING_BAND,
    MAX_SHOULDER_WINDOWS,
    Crossing,
    RateWindows,
    crossing_interval,
    shoulder_rate,
)
from runs.inference.capacity_spread import (
    SPREAD_WIDENS,
    WindowSpread,
    clear_of_limit,
    spread_widens,
    window_spread,
    window_spread_said,
    windows_to_clear,
)
from runs.inference.stalls import MAX_STALLED_WINDOWS, stalled_windows_said

DEFAULT_PRECISION = 0.05
DEFAULT_MAX_REPEATS = 3
# Windows the floor passes in and the ceiling (the failing end of a capacity's interval)
# fails in before the capacity is confirmed; a comparison asks for more
# (runs/inference/capacity_compare.py).
DEFAULT_CONFIRMING_PROBES = 2
# A gap wider than this many precisions is split where the latency curve crosses the
# limit; a narrower one is bisected. The probes an interpolating search takes to narrow
# a gap to that width (seeded queues from a flat curve to a steep knee,
# tests/runs/inference/test_capacity.py).
INTERPOLATED_GAP_PRECISIONS = 4.0
EXPECTED_INTERPOLATIONS = 3
# The probes a search takes beyond a steady host's where its windows' log percentile
# spreads by an sd: the median seeded search (range 50 to 5,000 tps, budget 24, 100 seeds,
# knees 1.5 and 2; tests/runs/inference/test_capacity_spread.py) took 7 probes at no
# spread, 9 at 0.1, 11.5 to 12 at 0.3 and 13.5 to 14 at 0.5 (mixed windows pushing the
# floor and the ceiling apart, their confirmations, the line's shoulders); constant beyond.
NOISE_PROBES = ((SPREAD_WIDENS, 0.0), (0.1, 2.0), (0.3, 5.0), (0.5, 7.0))
# The most windows a rate beyond the bracket takes to lie clear of the limit where the
# line does not bound that side (`_clearing_rate`): a floor's or a ceiling's confirming
# windows and three more.
MAX_CLEARING_WINDOWS = 5
# An interpolated probe aims at the limit less this many precisions (a share of it).
AIM_BELOW_LIMIT_PRECISIONS = 2.0
# Why a search ends at its lowest rate without saying the capacity is below it.
ENDED_LOW_GENERATOR = "the load generator could not offer the lowest rate"
ENDED_LOW_UNDECIDED = "the lowest rate stayed undecided after its repeats"
ENDED_LOW_MIXED = "the lowest rate's probes disagreed (one passed, one failed: the host's noise)"
ENDED_CONVERGED = "every gap within the precision, the floor and the ceiling confirmed"


class Found(StrEnum):
    FOUND = "found"
    BELOW = "below the lowest probe"
    ABOVE = "above the highest probe"
    AT_LEAST = "at least the highest passing probe"
    NONE = "not found"


@dataclass(frozen=True)
class SearchPlan:
    """The range of offered rates (tps), the most probes, and when to stop narrowing:
    every gap between the passing and the failing side within `precision` (a share);
    `confirming_probes`: the windows the floor must pass in and the ceiling (and a failing
    lowest rate) fail in."""

    low_tps: float
    high_tps: float
    budget: int
    precision: float = DEFAULT_PRECISION
    max_repeats: int = DEFAULT_MAX_REPEATS
    confirming_probes: int = DEFAULT_CONFIRMING_PROBES

    def __post_init__(self) -> None:
        if not 0 < self.low_tps < self.high_tps:
            raise ValueError(f"no range from {self.low_tps} to {self.high_tps} tps")
        if self.budget < 2:
            raise ValueError("a search needs at least two probes, the range's ends")


@dataclass(frozen=True)
class RateOutcome:
    """One offered rate's verdict (its counted repeats pooled), the percentile's estimate
    (ms), how many probes it took, each counted probe's own decision (`windows`, in order;
    empty where they were not decided alone) and how many of its probes the host stalled
    in (`stalled`, runs/inference/stalls.py; set aside, not pooled and not in `windows`,
    while at most MAX_STALLED_WINDOWS); `window_estimates_ms`: each counted probe's own
    estimate of the percentile, as `windows` (runs/inference/capacity_spread.py)."""

    offered_tps: float
    verdict: ProbeVerdict
    estimate_ms: float | None
    probes: int = 1
    windows: tuple[Decision, ...] = ()
    stalled: int = 0
    window_estimates_ms: tuple[float | None, ...] = ()

    @property
    def decision(self) -> Decision:
        return Decision.UNDECIDED if self.mixed else self.verdict.decision

    @property
    def stalls_counted(self) -> bool:
        """The host stalled in more of its windows than are set aside: all count as they are."""
        return self.stalled > MAX_STALLED_WINDOWS

    @property
    def counted(self) -> int:
        """Its probes that count: all but the stalled windows set aside."""
        return self.probes if self.stalls_counted else self.probes - self.stalled

    @property
    def mixed(self) -> bool:
        """One of its probes passed and another failed: the host's noise at this rate."""
        return Decision.PASS in self.windows and Decision.FAIL in self.windows

    @property
    def passing(self) -> bool:
        return self.decision == Decision.PASS and not self.failing

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
    where the probes give none), whether the load generator limited the probes above
    it, and for a found capacity whether its ceiling failed in the plan's
    `confirming_probes` windows, the sides ("below", "above") nothing bounded where its
    windows spread (there the interval runs to the probes' end), the sides a rate whose
    windows lie clear of the limit bounded where a line through the windows did not, and
    whether the estimate is where that line meets the limit (`_line_estimates`)."""

    found: Found
    estimate: float | None
    lower: float | None
    upper: float | None
    generator_limited: bool
    sentence: str
    confirmed: bool = True
    unbounded: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    line_estimated: bool = False


def next_step(plan: SearchPlan, objective: Objective, outcomes: Sequence[RateOutcome]) -> Step:
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
        return Step(plan.low_tps) if _unconfirmed(low, plan) else Step(None, Found.BELOW)
    if low.mixed:
        return Step(None, ENDED_LOW_MIXED)
    if low.decision == Decision.UNDECIDED:
        return Step(plan.low_tps) if _repeatable(low, plan) else Step(None, ENDED_LOW_UNDECIDED)
    if high is None:
        return Step(plan.high_tps)
    if high.passing:
        return Step(None, Found.ABOVE)
    floor, ceiling = _bracket(by_rate)
    assert floor is not None, "the lowest rate passed"
    ceiling = ceiling or by_rate[-1]
    between = [o for o in by_rate if floor.offered_tps <= o.offered_tps <= ceiling.offered_tps]
    for outcome in _contradicting(between):
        if _unconfirmed(outcome, plan):
            return Step(outcome.offered_tps)
    for outcome in between:
        if outcome.decision == Decision.UNDECIDED and _repeatable(outcome, plan):
            return Step(outcome.offered_tps)
    pairs = zip(between, between[1:], strict=False)
    gaps = [(math.log(b.offered_tps / a.offered_tps), a, b) for a, b in pairs]
    width, a, b = max(gaps, key=lambda gap: gap[0])
    if width > math.log1p(plan.precision):
        throughput = min(
            (
                o.verdict.short_of_rate_tps
                for o in by_rate
                if o.failing and o.verdict.short_of_rate_tps
            ),
            default=None,
        )
        return Step(_round_rate(_split(a, b, objective, plan.precision, throughput)))
    for end in (floor, ceiling):
        if _unconfirmed(end, plan):
            return Step(end.offered_tps)
    shoulder = _shoulder(objective, by_rate, floor, ceiling)
    if shoulder is not None:
        return Step(_round_rate(min(max(shoulder, plan.low_tps), plan.high_tps)))
    return Step(None, ENDED_CONVERGED)


def _shoulder(
    objective: Objective, by_rate: Sequence[RateOutcome], floor: RateOutcome, ceiling: RateOutcome
) -> float | None:
    """Where the windows spread and the line through them does not bound the capacity on a
    side, that side's shoulder rate (runs/inference/capacity_crossing.py), until the side's
    shoulders took MAX_SHOULDER_WINDOWS windows; None where nothing is left to bound. No
    shoulder above the throughput a probe reached: the line leaves out a rate the server
    could not reach, so a window there bounds nothing (it would cost a probe for no answer)."""
    spread = outcomes_spread(by_rate)
    if spread is None or not spread_widens(spread):
        return None
    between = _between(by_rate, floor, ceiling)
    estimate = _interpolated_estimate(between, objective.limit_ms)
    crossing = _line_crossing(objective, by_rate, estimate, spread)
    (below, above), _ = _bounds(crossing, objective, by_rate, estimate, spread)
    _, highest = _probed_ends(by_rate)
    low, high = floor.offered_tps, ceiling.offered_tps
    sides = (
        (-1, below, low / CROSSING_BAND, low),
        (1, above, high, high * CROSSING_BAND),
    )
    for side, bound, start, end in sides:
        if bound is not None:
            continue
        clearing = _clearing_rate(objective, by_rate, spread, estimate, side)
        if clearing is not None:
            return clearing
        shoulders = sum(
            o.counted
            for o in by_rate
            if start <= o.offered_tps <= end and o not in (floor, ceiling)
        )
        if shoulders >= MAX_SHOULDER_WINDOWS:
            continue
        rate = shoulder_rate(estimate, spread.sd, crossing.slope, side)
        if side < 0 or rate < highest:
            return rate
    return None


def _clearing_rate(
    objective: Objective,
    by_rate: Sequence[RateOutcome],
    spread: WindowSpread,
    estimate: float,
    side: int,
) -> float | None:
    """The rate beyond the bracket on `side` (`_beyond_bracket`) that the fewest more
    windows would make lie clear of the limit (`windows_to_clear`, up to
    MAX_CLEARING_WINDOWS at a rate; the nearer of two), or None: on a sharp knee its
    windows bound the side where shoulders, on the flat part or past the throughput, do
    not."""
    needs = []
    for outcome in _beyond_bracket(by_rate, estimate, side):
        if outcome.counted >= MAX_CLEARING_WINDOWS:
            # `windows_to_clear` counts the windows that gave an estimate; the bound is on
            # the windows probed.
            continue
        distance = abs(math.log(outcome.offered_tps / estimate))
        more = windows_to_clear(
            outcome.window_estimates_ms, objective.limit_ms, spread, side, MAX_CLEARING_WINDOWS
        )
        if more:
            needs.append((more, distance, outcome.offered_tps))
    return min(needs)[2] if needs else None


def expected_probes(plan: SearchPlan, spread: WindowSpread | None = None) -> int:
    """How many probes a search is expected to take: the range's two ends, the splits
    down to its precision (interpolations, then bisections; bisections alone where they
    take fewer), one repeat near the limit, the floor's and the ceiling's confirming
    windows, and on a host whose windows at one rate spread (`spread`, learned from its
    earlier searches) the probes that costs (`noise_probes`); its budget at most."""
    interpolated = 1 + INTERPOLATED_GAP_PRECISIONS * plan.precision
    splits = min(
        _halvings(plan.high_tps / plan.low_tps, plan.precision),
        EXPECTED_INTERPOLATIONS + _halvings(interpolated, plan.precision),
    )
    confirmations = 2 * (plan.confirming_probes - 1)
    steady = 2 + splits + 1 + confirmations
    return min(plan.budget, steady + noise_probes(spread))


def noise_probes(spread: WindowSpread | None) -> int:
    """The probes a search takes beyond a steady host's where its windows spread by
    `spread`: NOISE_PROBES interpolated, none below SPREAD_WIDENS."""
    if spread is None or not spread_widens(spread):
        return 0
    sds, probes = zip(*NOISE_PROBES, strict=True)
    return round(float(np.interp(spread.sd, sds, probes)))


def _halvings(ratio: float, precision: float) -> int:
    """The bisections on the log of the rate that narrow a gap of `ratio` to `precision`."""
    return max(0, math.ceil(math.log2(math.log(ratio) / math.log1p(precision))))


def capacity_of(
    plan: SearchPlan, objective: Objective, outcomes: Sequence[RateOutcome]
) -> Capacity:
    """The capacity the probes give (see the module's docstring), the windows the host
    stalled in, and for a capacity found where its windows at one rate spread, its interval
    widened by a line through them and how much they spread (runs/inference/capacity_spread.py,
    runs/inference/capacity_crossing.py)."""
    spread = outcomes_spread(outcomes)
    capacity = _capacity(plan, objective, outcomes, spread)
    said = [stalled_windows_said(outcomes)]
    if capacity.found == Found.FOUND and spread_widens(spread):
        said.append(
            window_spread_said(
                spread,
                objective.percentile_name,
                capacity.unbounded,
                capacity.cleared,
                capacity.line_estimated,
            )
        )
    sentence = "; ".join([capacity.sentence, *(part for part in said if part)])
    return replace(capacity, sentence=sentence)


def _widened(
    bracket: tuple[float, float],
    crossing: Crossing,
    estimate: float,
    objective: Objective,
    by_rate: Sequence[RateOutcome],
    spread: WindowSpread,
) -> tuple[tuple[float, float], tuple[str, ...], tuple[str, ...]]:
    """A found capacity's interval, the `bracket` [floor, ceiling] widened to the line's
    `crossing` of the limit or to the nearest rate beyond it whose windows lie clear of the
    limit (`_bounds`, within CROSSING_BAND of the `estimate`), the sides bounded by neither
    and the sides bounded by such a rate (`cleared`). Where neither bounds a side, the
    interval runs to the lowest probe (it passed) or to the highest one or the lowest the
    server fell short of (nothing is extrapolated past the probes)."""
    (below, above), cleared = _bounds(crossing, objective, by_rate, estimate, spread)
    lowest, highest = _probed_ends(by_rate)
    unbounded = tuple(side for side, end in (("below", below), ("above", above)) if end is None)
    lower = min(bracket[0], lowest if below is None else below)
    upper = max(bracket[1], highest if above is None else above)
    return (lower, upper), unbounded, cleared


def _bounds(
    crossing: Crossing,
    objective: Objective,
    by_rate: Sequence[RateOutcome],
    estimate: float,
    spread: WindowSpread,
) -> tuple[tuple[float | None, float | None], tuple[str, ...]]:
    """The capacity's bounds below and above (None where a side is not bounded), and the
    sides ("below", "above") a rate's windows bounded, not the line: the line's
    `crossing` within the probes (`_within_probes`), or where the line does not bound a
    side, the nearest rate on that side of the bracket whose windows lie clear of the limit
    (`_clear_rates`; a sharp knee: p99 flat at 5 to 10 ms up to 5,020 tps and 36 to 52 ms at
    5,210 on an EPYC VM, where no line fits both parts)."""
    lowest, highest = _probed_ends(by_rate)
    below, above = _within_probes(crossing, lowest, highest)
    cleared = []
    if below is None:
        below = max(_clear_rates(objective, by_rate, spread, estimate, -1), default=None)
        cleared += ["below"] if below is not None else []
    if above is None:
        above = min(_clear_rates(objective, by_rate, spread, estimate, 1), default=None)
        cleared += ["above"] if above is not None else []
    return (below, above), tuple(cleared)


def _beyond_bracket(
    by_rate: Sequence[RateOutcome], estimate: float, side: int
) -> list[RateOutcome]:
    """The rates on the curve from the floor down (`side` -1) or from the ceiling up (+1),
    within CROSSING_BAND of the estimate (a rate far off bounds nothing a user would want)."""
    floor, ceiling = _bracket(by_rate)
    end = floor if side < 0 else ceiling
    if end is None:
        return []
    return [
        o
        for o in by_rate
        if _on_the_curve(o)
        and side * (o.offered_tps - end.offered_tps) >= 0
        and abs(math.log(o.offered_tps / estimate)) <= math.log(CROSSING_BAND)
    ]


def _clear_rates(
    objective: Objective,
    by_rate: Sequence[RateOutcome],
    spread: WindowSpread,
    estimate: float,
    side: int,
) -> list[float]:
    """The rates beyond the bracket on `side` whose windows lie clear of the limit there: on
    a curve that grows with the rate, each bounds the capacity on that side."""
    return [
        o.offered_tps
        for o in _beyond_bracket(by_rate, estimate, side)
        if clear_of_limit(o.window_estimates_ms, objective.limit_ms, spread, side)
    ]


def _probed_ends(by_rate: Sequence[RateOutcome]) -> tuple[float, float]:
    """The lowest rate probed, and the highest the probes leave possible: the highest
    probed, or the least a server offered more reached where that is lower (its throughput:
    it cannot serve a higher rate on schedule). A rate whose windows disagree says nothing
    of the kind (one of them stalled), nor does a throughput under a rate that passed."""
    passed = max((o.offered_tps for o in by_rate if o.passing), default=0.0)
    reached = [
        o.verdict.short_of_rate_tps
        for o in by_rate
        if o.verdict.short_of_rate_tps is not None
        and not o.verdict.generator_limited
        and not o.mixed
    ]
    highest = min([by_rate[-1].offered_tps, *reached])
    return by_rate[0].offered_tps, max(highest, passed)


def _within_probes(
    crossing: Crossing, lowest: float, highest: float
) -> tuple[float | None, float | None]:
    """The line's bounds where they lie within the probed ends (`_probed_ends`; None
    elsewhere: nothing is extrapolated past the probes)."""
    below = crossing.lower if crossing.lower is not None and crossing.lower >= lowest else None
    above = crossing.upper if crossing.upper is not None and crossing.upper <= highest else None
    return below, above


def outcomes_spread(outcomes: Sequence[RateOutcome]) -> WindowSpread | None:
    """How much the windows at one rate spread, over the rates the server reached: past
    its throughput a window's percentile is how far the queue grew in it, not the host's
    noise (two windows at 5,960 tps, reached 5,854 and 5,885, gave 603 and 1,957 ms)."""
    return window_spread([o.window_estimates_ms for o in outcomes if _on_the_curve(o)])


def _on_the_curve(outcome: RateOutcome) -> bool:
    """Whether the server reached the rate and the load generator offered it: its windows'
    percentile is the latency curve's, not a growing queue's (the line and the spread)."""
    return outcome.verdict.short_of_rate_tps is None and not outcome.verdict.generator_limited


def _line_crossing(
    objective: Objective, by_rate: Sequence[RateOutcome], estimate: float, spread: WindowSpread
) -> Crossing:
    """The line's crossing through the counted windows of the rates the server reached
    (a rate short of its offer gives the queue's percentile, not the curve's)."""
    rates = [RateWindows(o.offered_tps, o.window_estimates_ms) for o in by_rate if _on_the_curve(o)]
    return crossing_interval(rates, objective.limit_ms, estimate, spread.sd)


def _between(
    by_rate: Sequence[RateOutcome], floor: RateOutcome, ceiling: RateOutcome
) -> list[RateOutcome]:
    """The counted rates from the floor to the ceiling."""
    return [
        o
        for o in by_rate
        if floor.offered_tps <= o.offered_tps <= ceiling.offered_tps and o.counted
    ]


def _capacity(
    plan: SearchPlan,
    objective: Objective,
    outcomes: Sequence[RateOutcome],
    spread: WindowSpread | None,
) -> Capacity:
    """The capacity the probes give, its interval widened where the windows `spread`
    (`_widened`), without what the host's stalls did nor what the spread was."""
    by_rate = sorted(outcomes, key=lambda outcome: outcome.offered_tps)
    at = f"at {objective.describe()}"
    passes = [o for o in by_rate if o.passing]
    if not by_rate:
        return _without_estimate(Found.NONE, f"no probe yet {at}")
    floor, ceiling = _bracket(by_rate)
    if passes and floor is None:
        # The lowest decided rate was mixed: the host's noise reaches down to it.
        disagreed = next(o for o in by_rate if o.mixed or o.failing)
        sentence = (
            f"not found {at}: the probes at {_tps(disagreed.offered_tps)} tps, below a passing "
            "rate, failed (the host's noise)"
        )
        return _without_estimate(Found.NONE, sentence)
    if by_rate[0].mixed:
        sentence = f"not found {at}: {ENDED_LOW_MIXED}"
        return _without_estimate(Found.NONE, sentence)
    if floor is None:
        upper = next((o for o in by_rate if o.failing), None)
        if upper is None:
            return _without_estimate(Found.NONE, f"no probe passed {at}")
        if upper.verdict.generator_limited:
            # The server was not what stopped it: nothing is known of its capacity.
            offered = _tps(upper.offered_tps)
            sentence = f"not found {at}: the load generator could not offer {offered} tps"
            return _without_estimate(Found.NONE, sentence, generator_limited=True)
        lowest = _tps(by_rate[0].offered_tps)
        sentence = f"below the lowest probe, {lowest} tps, {at}"
        return _without_estimate(Found.BELOW, sentence, upper=upper.offered_tps)
    if ceiling is None:
        highest = by_rate[-1]
        if highest is floor:
            sentence = f"above the highest probe, {_tps(floor.offered_tps)} tps, {at}"
            return _without_estimate(Found.ABOVE, sentence, lower=floor.offered_tps)
        above = [o for o in by_rate if o.offered_tps > floor.offered_tps]
        why = (
            "the probes above it disagree"
            if any(o.failing or o.mixed for o in above)
            else "no probe above failed"
        )
        sentence = f"at least {_tps(floor.offered_tps)} tps {at} ({why})"
        return _without_estimate(Found.AT_LEAST, sentence, lower=floor.offered_tps)
    if ceiling.verdict.generator_limited:
        sentence = (
            f"at least {_tps(floor.offered_tps)} tps {at}: the load generator could not "
            f"offer {_tps(ceiling.offered_tps)} tps"
        )
        return _without_estimate(
            Found.AT_LEAST, sentence, lower=floor.offered_tps, generator_limited=True
        )
    # The server cannot serve more on schedule than it reached when a rate was too much
    # (never less than the floor: `_probed_ends` keeps the highest rate that passed).
    _, throughput = _probed_ends(by_rate)
    bounds = (floor.offered_tps, min(ceiling.offered_tps, throughput))
    between = _between(by_rate, floor, ceiling)
    # Mixed rates are the host's noise at their rate: the estimate steps over them.
    decided = [o for o in between if not o.mixed]
    estimate = min(_interpolated_estimate(decided, objective.limit_ms), bounds[1])
    unbounded: tuple[str, ...] = ()
    cleared: tuple[str, ...] = ()
    line_estimated = False
    if spread_widens(spread):
        assert spread is not None
        # The line's windows are those near the first crossing above the floor, mixed
        # rates and all, as the search's shoulders take them.
        centre = min(_interpolated_estimate(between, objective.limit_ms), bounds[1])
        crossing = _line_crossing(objective, by_rate, centre, spread)
        bracket = bounds
        bounds, unbounded, cleared = _widened(bracket, crossing, centre, objective, by_rate, spread)
        line_estimated = _line_estimates(crossing, bracket, unbounded, cleared)
        if line_estimated:
            assert crossing.point is not None
            estimate = crossing.point
    interval = f"[{_tps(bounds[0])}, {_tps(bounds[1])}]"
    unconfirmed = [
        f"its {name} {verb} in {_windows(_agreeing_windows(end))} only"
        for name, verb, end in (("floor", "passed", floor), ("ceiling", "failed", ceiling))
        if _unconfirmed(end, plan)
    ]
    confirmed = not unconfirmed
    sentence = f"{_tps(estimate)} tps {interval} {at}"
    if unconfirmed:
        sentence += f" (not confirmed: {', '.join(unconfirmed)})"
    return Capacity(
        Found.FOUND,
        estimate,
        lower=bounds[0],
        upper=bounds[1],
        generator_limited=False,
        sentence=sentence,
        confirmed=confirmed,
        unbounded=unbounded,
        cleared=cleared,
        line_estimated=line_estimated,
    )


def _without_estimate(
    found: Found,
    sentence: str,
    lower: float | None = None,
    upper: float | None = None,
    generator_limited: bool = False,
) -> Capacity:
    """An answer with no estimate: none found, or a side (`lower`, `upper`) the probes
    bound; `generator_limited` where the load generator was what failed."""
    return Capacity(
        found,
        None,
        lower=lower,
        upper=upper,
        generator_limited=generator_limited,
        sentence=sentence,
    )


def _line_estimates(
    crossing: Crossing,
    bracket: tuple[float, float],
    unbounded: Sequence[str],
    cleared: Sequence[str],
) -> bool:
    """Whether the capacity is where the line meets the limit: it bounds both sides (from
    every window near the capacity, where the interpolation rests on two rates' windows)
    and meets the limit inside the `bracket` (beyond it, the line contradicts the floor's
    or the ceiling's own windows: a knee too sharp for it, as on the EPYC VM's search
    where it met the limit past a rate that failed in both its windows)."""
    point = crossing.point
    return point is not None and not unbounded and not cleared and bracket[0] < point < bracket[1]


def _interpolated_estimate(between: list[RateOutcome], limit_ms: float) -> float:
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


def _split(
    below: RateOutcome,
    above: RateOutcome,
    objective: Objective,
    precision: float,
    throughput: float | None,
) -> float:
    """The rate to probe between `below` and `above`. In a gap wider than
    `INTERPOLATED_GAP_PRECISIONS` precisions: where the latency curve through the two ends
    (`_modelled_crossing`) reaches the limit less `AIM_BELOW_LIMIT_PRECISIONS` precisions,
    so that the probe passes just under the capacity instead of landing on the limit,
    where a window cannot decide; kept a precision inside the gap, so that the side it
    leaves is narrowed at once. In a narrow gap, or where the ends give no curve, the
    geometric middle."""
    low, high = below.offered_tps, above.offered_tps
    if high / low <= 1 + INTERPOLATED_GAP_PRECISIONS * precision:
        return math.sqrt(low * high)
    aim = (1 + AIM_BELOW_LIMIT_PRECISIONS * precision) / objective.limit_ms
    crossing = _modelled_crossing(below, above, aim, throughput)
    if crossing is None:
        return math.sqrt(low * high)
    # Just under a precision, so that a rate rounded to three digits leaves a gap within it.
    step = (1 + precision) ** 0.95
    return min(max(crossing, low * step), high / step)


def _modelled_crossing(
    below: RateOutcome, above: RateOutcome, target: float, throughput: float | None
) -> float | None:
    """The rate where the inverse of the percentile's estimate (1/ms) falls to `target`.
    A queue's inverse latency falls to zero at its throughput as (throughput - rate) to a
    power (1 for one server; TPC-B at 4 clients on a 2-CPU VM gave 1.3 to 1.8 on one
    day's probes, 3 to 9 on another's, docs/decisions.md). With the throughput known (a
    failing probe that fell short of its offer), the power is fitted through the two ends
    (1 where the upper end gives no estimate under the throughput); without it, a
    straight line through the ends. The lower end where it is at the target already; None
    where nothing was estimated."""
    if below.estimate_ms is None or below.estimate_ms <= 0:
        return None
    rate_0, inverse_0 = below.offered_tps, 1 / below.estimate_ms
    if inverse_0 <= target:
        return rate_0
    rate_1 = above.offered_tps
    estimate_1 = above.estimate_ms
    inverse_1 = 1 / estimate_1 if estimate_1 is not None and estimate_1 > 0 else None
    if throughput is not None and throughput > rate_0:
        power = 1.0
        if inverse_1 is not None and inverse_1 < inverse_0 and rate_1 < throughput:
            power = math.log(inverse_0 / inverse_1) / math.log(
                (throughput - rate_0) / (throughput - rate_1)
            )
        return throughput - (throughput - rate_0) * (target / inverse_0) ** (1 / power)
    if inverse_1 is None or inverse_1 >= inverse_0:
        return None
    return rate_0 + (inverse_0 - target) / (inverse_0 - inverse_1) * (rate_1 - rate_0)


def _at(by_rate: Sequence[RateOutcome], tps: float) -> RateOutcome | None:
    return next((o for o in by_rate if math.isclose(o.offered_tps, tps, rel_tol=1e-6)), None)


def _repeatable(outcome: RateOutcome, plan: SearchPlan) -> bool:
    return (
        outcome.counted < plan.max_repeats
        and not outcome.verdict.generator_limited
        and not outcome.mixed
    )


def _unconfirmed(outcome: RateOutcome, plan: SearchPlan) -> bool:
    """A passing or failing rate the server decided in fewer windows than the plan asks:
    only its windows that passed (failed) alone count for a passing (failing) rate, an
    undecided window confirms nothing."""
    decided = outcome.passing or (outcome.failing and not outcome.verdict.generator_limited)
    return decided and _agreeing_windows(outcome) < plan.confirming_probes


def _agreeing_windows(outcome: RateOutcome) -> int:
    """The windows that decided alone as the rate did (all its counted probes, where they
    were not decided alone)."""
    if not outcome.windows:
        return outcome.counted
    return outcome.windows.count(Decision.PASS if outcome.passing else Decision.FAIL)


def _bracket(by_rate: Sequence[RateOutcome]) -> tuple[RateOutcome | None, RateOutcome | None]:
    """The floor (the highest passing rate with no failing or mixed rate below it) and the
    ceiling (the lowest failing rate with no passing or mixed rate above it), or None."""
    floor = None
    for outcome in by_rate:
        if outcome.failing or outcome.mixed:
            break
        if outcome.passing:
            floor = outcome
    ceiling = None
    for outcome in reversed(by_rate):
        if outcome.passing or outcome.mixed:
            break
        if outcome.failing:
            ceiling = outcome
    return floor, ceiling


def _contradicting(between: Sequence[RateOutcome]) -> list[RateOutcome]:
    """The rates whose verdict contradicts another's: failing below a passing rate, or
    passing above a failing one."""
    contradicting = []
    for index, outcome in enumerate(between):
        if outcome.failing and any(o.passing for o in between[index + 1 :]):
            contradicting.append(outcome)
        elif outcome.passing and any(o.failing for o in between[:index]):
            contradicting.append(outcome)
    return contradicting


def _round_rate(tps: float) -> float:
    """A rate with three significant digits (pgbench -R takes a decimal)."""
    return float(f"{tps:.3g}")


def _windows(count: int) -> str:
    return f"{count} window" + ("" if count == 1 else "s")


def _tps(tps: float) -> str:
    return f"{tps:,.0f}"
