"""The capacity statistics: a percentile's order-statistic interval, a probe's decision,
and the search on seeded simulated latency curves."""

import math
import random
from dataclasses import replace

import pytest
from hdrh.histogram import HdrHistogram

from runs.inference.capacity import (
    Decision,
    Objective,
    ProbeMeasure,
    decide_probe,
    rate_shortfall_allowed,
)
from runs.inference.capacity_search import (
    ENDED_CONVERGED,
    ENDED_LOW_GENERATOR,
    ENDED_LOW_MIXED,
    ENDED_LOW_UNDECIDED,
    Found,
    RateOutcome,
    SearchPlan,
    Step,
    capacity_of,
    next_step,
)
from runs.inference.quantiles import (
    HistogramSample,
    SortedSample,
    order_statistic_ranks,
    percentile_interval,
)
from tests.runs.inference.simulated_hosts import P99_20


def test_ranks_bound_the_quantile_as_the_binomial_says() -> None:
    # The textbook ranks for the median of 100: 40 and 61 (P(40 <= B <= 60) >= 0.95).
    assert order_statistic_ranks(100, 0.5) == (40, 61)
    # 200 latencies cannot bound p99 from above (its upper rank would pass 200).
    assert order_statistic_ranks(200, 0.99)[1] is None
    lower, upper = order_statistic_ranks(10_000, 0.99)
    assert lower is not None and upper is not None and lower < 9900 < upper <= 10_000


def test_interval_covers_the_true_quantile_at_its_confidence() -> None:
    rng = random.Random(7)
    true_p99 = math.exp(2.0 + 0.5 * 2.3263478740408408)  # lognormal(2, 0.5)'s p99
    trials, covered = 400, 0
    for _ in range(trials):
        sample = SortedSample.of([rng.lognormvariate(2.0, 0.5) for _ in range(2000)])
        interval = percentile_interval(sample, 99.0)
        assert interval.lower is not None and interval.upper is not None
        covered += interval.lower <= true_p99 <= interval.upper
    # At least 95 % by construction; 400 trials put 95 % within about +-2.2 points.
    assert covered / trials >= 0.92


def test_a_smaller_sample_gives_a_wider_interval() -> None:
    rng = random.Random(3)
    values = [rng.lognormvariate(2.0, 0.5) for _ in range(40_000)]
    full = percentile_interval(SortedSample.of(values), 99.0)
    sampled = percentile_interval(SortedSample.of(values[:2000]), 99.0)
    assert full.upper is not None and full.lower is not None
    assert sampled.upper is not None and sampled.lower is not None
    assert sampled.upper - sampled.lower > 2 * (full.upper - full.lower)


def test_histograms_pool_and_read_by_rank() -> None:
    halves = []
    for start in (1, 501):
        histogram = HdrHistogram(1, 3_600_000_000, 3)
        for value in range(start, start + 500):
            histogram.record_value(value * 1000)
        halves.append(histogram.encode().decode())
    pooled = HistogramSample(halves)
    assert pooled.count == 1000
    assert pooled.at_rank(1) == pytest.approx(1.0, rel=1e-3)
    assert pooled.at_rank(990) == pytest.approx(990.0, rel=1e-3)
    interval = percentile_interval(pooled, 99.0)
    assert interval.estimate == pytest.approx(990.0, rel=1e-3)


def _measure(p99_lower: float, p99_upper: float, **changes: object) -> ProbeMeasure:
    from runs.inference.quantiles import QuantileInterval

    interval = QuantileInterval(99.0, (p99_lower + p99_upper) / 2, p99_lower, p99_upper, 9000, 0.95)
    fields: dict[str, object] = {
        "offered_tps": 300.0,
        "reached_tps": 300.0,
        "transactions": 9000,
        "failed": 0,
        "skipped": 0,
        "seconds": 30.0,
        "interval": interval,
    }
    fields.update(changes)
    return ProbeMeasure(**fields)  # type: ignore[arg-type]


def test_a_probe_passes_only_with_its_whole_interval_within_the_limit() -> None:
    assert decide_probe(_measure(15, 19), P99_20).decision == Decision.PASS
    undecided = decide_probe(_measure(15, 21), P99_20)
    assert undecided.decision == Decision.UNDECIDED
    assert "holds the limit" in undecided.reasons[0]
    assert decide_probe(_measure(21, 30), P99_20).decision == Decision.FAIL


def test_a_probe_fails_on_its_rate_failures_or_skips() -> None:
    short = decide_probe(_measure(5, 6, reached_tps=280.0), P99_20)
    assert short.decision == Decision.FAIL and "rate not reached" in short.reasons[0]
    # 9,000 arrivals: a Poisson count's 3 spreads (3.2 %) allow more than 1 %.
    assert decide_probe(_measure(5, 6, reached_tps=292.0), P99_20).decision == Decision.PASS
    assert rate_shortfall_allowed(10_000, 100) == 0.01
    assert decide_probe(_measure(5, 6, failed=1), P99_20).decision == Decision.FAIL
    lenient = Objective(99.0, 20.0, max_skipped_pct=1.0)
    assert decide_probe(_measure(5, 6, skipped=50), lenient).decision == Decision.PASS
    assert decide_probe(_measure(5, 6, skipped=200), lenient).decision == Decision.FAIL


def test_a_probe_the_load_generator_limited_never_passes_or_fails() -> None:
    verdict = decide_probe(_measure(5, 30, reached_tps=200.0, generator_busy=True), P99_20)
    assert verdict.decision == Decision.UNDECIDED and verdict.generator_limited
    assert any("load generator" in reason for reason in verdict.reasons)


class SimulatedServer:
    """p99 grows as a queue's does towards saturation, base / (1 - rate / saturation), or
    with a steeper knee (`knee` > 1: TPC-B at 4 clients on a 2-CPU VM fitted 1.3 to 1.8
    one day, 3 to 9 another, docs/decisions.md); latencies lognormal with that p99,
    `sampling` of them logged."""

    def __init__(
        self, saturation: float, base_ms: float, seed: int, sampling: float = 0.2, knee: float = 1
    ):
        self.saturation, self.base_ms, self.sampling = saturation, base_ms, sampling
        self.knee = knee
        self.rng = random.Random(seed)

    def true_p99(self, rate: float) -> float:
        if rate >= self.saturation:
            return 1e6
        return self.base_ms / (1 - rate / self.saturation) ** self.knee

    def capacity(self, limit_ms: float) -> float:
        return self.saturation * (1 - (self.base_ms / limit_ms) ** (1 / self.knee))

    def probe(self, rate: float, seconds: float, repeats: int) -> ProbeMeasure:
        sigma = 0.6
        mu = math.log(self.true_p99(rate)) - 2.3263478740408408 * sigma
        reached = min(rate, self.saturation * 0.999)
        count = int(reached * seconds * repeats * self.sampling)
        values = [self.rng.lognormvariate(mu, sigma) for _ in range(count)]
        interval = percentile_interval(SortedSample.of(values), 99.0)
        total = int(reached * seconds * repeats)
        return ProbeMeasure(rate, reached, total, 0, 0, seconds * repeats, interval)


def _search(
    server: SimulatedServer, plan: SearchPlan, seconds: float = 20.0
) -> tuple[list[RateOutcome], str]:
    outcomes: dict[float, RateOutcome] = {}
    while True:
        step = next_step(plan, P99_20, list(outcomes.values()))
        if step.next_tps is None:
            return list(outcomes.values()), step.ended
        repeats = outcomes[step.next_tps].probes + 1 if step.next_tps in outcomes else 1
        measure = server.probe(step.next_tps, seconds, repeats)
        verdict = decide_probe(measure, P99_20)
        estimate = measure.interval.estimate if measure.interval else None
        outcomes[step.next_tps] = RateOutcome(step.next_tps, verdict, estimate, repeats)


@pytest.mark.parametrize("knee", [1.0, 1.5, 2.5])
@pytest.mark.parametrize("seed", range(8))
def test_the_search_finds_the_capacity_in_at_most_nine_probes(seed: int, knee: float) -> None:
    # The acceptance's search on this machine: 50 to 5,000 tps in 60 s probes, the server
    # saturating at about 3,900 (docs/benchmarks.md). Bisections alone took 12 probes
    # without a repeat, 16 with the real host's.
    server = SimulatedServer(saturation=3900.0, base_ms=2.7, seed=seed, sampling=0.15, knee=knee)
    plan = SearchPlan(low_tps=50.0, high_tps=5000.0, budget=24)
    outcomes, ended = _search(server, plan, seconds=60.0)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert sum(o.probes for o in outcomes) <= 9, [(o.offered_tps, o.probes) for o in outcomes]
    assert capacity.found == Found.FOUND and capacity.confirmed, (ended, capacity.sentence)
    assert capacity.lower is not None and capacity.upper is not None
    assert capacity.estimate is not None
    true = server.capacity(20.0)
    assert capacity.lower <= true <= capacity.upper
    assert capacity.lower <= capacity.estimate <= capacity.upper
    assert capacity.upper / capacity.lower < 1.15
    assert capacity.sentence.endswith("at p99 <= 20 ms")


def test_a_capacity_below_the_lowest_probe_is_said_so() -> None:
    server = SimulatedServer(saturation=500.0, base_ms=15.0, seed=1)
    plan = SearchPlan(low_tps=400.0, high_tps=5000.0, budget=10)
    outcomes, ended = _search(server, plan)
    # The lowest rate failed in two windows: one may have been a stall.
    assert ended == Found.BELOW and len(outcomes) == 1 and outcomes[0].probes == 2
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.BELOW and capacity.estimate is None
    assert capacity.sentence == "below the lowest probe, 400 tps, at p99 <= 20 ms"


def test_a_capacity_above_the_highest_probe_is_said_so() -> None:
    server = SimulatedServer(saturation=30_000.0, base_ms=2.0, seed=1)
    plan = SearchPlan(low_tps=100.0, high_tps=2000.0, budget=10)
    outcomes, ended = _search(server, plan)
    assert ended == Found.ABOVE
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.ABOVE and capacity.estimate is None
    assert capacity.sentence == "above the highest probe, 2,000 tps, at p99 <= 20 ms"


def test_the_budget_ends_the_search() -> None:
    server = SimulatedServer(saturation=3000.0, base_ms=4.0, seed=5)
    plan = SearchPlan(low_tps=100.0, high_tps=5000.0, budget=4)
    outcomes, ended = _search(server, plan)
    assert ended == "budget of probes spent"
    assert sum(o.probes for o in outcomes) == 4


def test_the_throughput_a_probe_reached_short_of_its_offer_caps_the_interval() -> None:
    # Three probes: 100 and 2,000 tps pass, 5,000 (the ceiling) reaches 2,997 tps. The
    # server cannot serve more than that on schedule, so the interval stops there.
    server = SimulatedServer(saturation=3000.0, base_ms=2.0, seed=5)
    plan = SearchPlan(low_tps=100.0, high_tps=5000.0, budget=4)
    outcomes = []
    for rate in (100.0, 2000.0, 5000.0):
        measure = server.probe(rate, 20.0, 1)
        outcomes.append(RateOutcome(rate, decide_probe(measure, P99_20), 5.0))
    assert outcomes[2].verdict.short_of_rate_tps == pytest.approx(2997.0)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.FOUND and capacity.estimate is not None
    assert (capacity.lower, capacity.upper) == (2000.0, pytest.approx(2997.0))
    assert capacity.estimate <= capacity.upper
    assert "[2,000, 2,997]" in capacity.sentence


def test_probes_the_generator_limited_cap_the_answer() -> None:
    def outcome(rate: float, measure: ProbeMeasure) -> RateOutcome:
        return RateOutcome(rate, decide_probe(measure, P99_20), 5.0)

    outcomes = [
        outcome(100.0, _measure(4, 6, offered_tps=100.0, reached_tps=100.0)),
        outcome(
            5000.0, _measure(4, 6, offered_tps=5000.0, reached_tps=3000.0, generator_busy=True)
        ),
    ]
    plan = SearchPlan(100.0, 5000.0, 10)
    step = next_step(plan, P99_20, outcomes)
    # Where a line from 100 tps's 5 ms to no inverse latency at the 3,000 tps the load
    # generator reached crosses the limit less two precisions (20 / 1.1 ms):
    # 100 + 2,900 * (1/5 - 1.1/20) / (1/5).
    assert step.next_tps == pytest.approx(2200.0)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.generator_limited and capacity.found == Found.AT_LEAST
    assert "load generator could not offer 5,000 tps" in capacity.sentence


def test_a_lowest_rate_the_generator_could_not_offer_says_nothing_of_the_server() -> None:
    busy = _measure(4, 6, offered_tps=100.0, reached_tps=60.0, generator_busy=True)
    outcomes = [RateOutcome(100.0, decide_probe(busy, P99_20), 5.0)]
    plan = SearchPlan(100.0, 5000.0, 10)
    assert next_step(plan, P99_20, outcomes) == Step(None, ENDED_LOW_GENERATOR)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.NONE and capacity.generator_limited
    assert capacity.upper is None
    assert capacity.sentence == (
        "not found at p99 <= 20 ms: the load generator could not offer 100 tps"
    )


def _outcome(rate: float, *windows: Decision) -> RateOutcome:
    """A rate whose probes were decided `windows`, pooled to the first one's decision."""
    low, high = {Decision.PASS: (4, 6), Decision.FAIL: (40, 60)}[windows[0]]
    verdict = decide_probe(_measure(low, high, offered_tps=rate, reached_tps=rate), P99_20)
    return RateOutcome(rate, verdict, (low + high) / 2, len(windows), windows)


PASS, FAIL, UNDECIDED = Decision.PASS, Decision.FAIL, Decision.UNDECIDED


def test_a_rate_one_window_passed_and_another_failed_is_mixed_and_undecided() -> None:
    mixed = _outcome(1000.0, FAIL, PASS)
    assert mixed.mixed and mixed.decision == Decision.UNDECIDED
    assert not mixed.passing and not mixed.failing
    plan = SearchPlan(100.0, 5000.0, 20)
    outcomes = [_outcome(100.0, PASS), mixed, _outcome(1030.0, FAIL, FAIL), _outcome(5000.0, FAIL)]
    # Not repeated however often: more windows would not settle the host's noise. The gap
    # below it is split where the line through 100 tps's 5 ms and its 50 ms crosses the
    # limit less two precisions (20 / 1.1 ms).
    assert next_step(plan, P99_20, outcomes).next_tps == pytest.approx(825.0)
    capacity = capacity_of(plan, P99_20, outcomes)
    # The interval spans the mixed rate: from the last rate with nothing mixed below it.
    assert (capacity.lower, capacity.upper) == (100.0, 1030.0)


def test_a_failing_rate_below_a_passing_one_is_probed_again_and_widens_the_interval() -> None:
    plan = SearchPlan(100.0, 5000.0, 20)
    outcomes = [
        _outcome(100.0, PASS),
        _outcome(1000.0, FAIL),
        _outcome(2000.0, PASS),
        _outcome(2050.0, FAIL, FAIL),
        _outcome(5000.0, FAIL),
    ]
    assert next_step(plan, P99_20, outcomes).next_tps == 1000.0
    outcomes[1] = _outcome(1000.0, FAIL, FAIL)
    # Both confirmed: the contradiction stands, and so does the wide interval.
    assert next_step(plan, P99_20, outcomes).next_tps == 2000.0
    outcomes[2] = _outcome(2000.0, PASS, PASS)
    capacity = capacity_of(plan, P99_20, outcomes)
    # From below the first failure to above the last pass: the whole contradiction.
    assert (capacity.lower, capacity.upper) == (100.0, 2050.0)


def test_both_ends_are_probed_again_before_the_search_ends_and_until_then_not_confirmed() -> None:
    plan = SearchPlan(100.0, 5000.0, 20)
    outcomes = [
        _outcome(100.0, PASS),
        _outcome(2000.0, PASS),
        _outcome(2040.0, FAIL),
        _outcome(5000.0, FAIL),
    ]
    assert next_step(plan, P99_20, outcomes) == Step(2000.0)
    unconfirmed = capacity_of(plan, P99_20, outcomes)
    assert not unconfirmed.confirmed
    assert unconfirmed.sentence.endswith(
        "(not confirmed: its floor passed in 1 window only, its ceiling failed in 1 window only)"
    )
    outcomes[1] = _outcome(2000.0, PASS, PASS)
    assert next_step(plan, P99_20, outcomes) == Step(2040.0)
    outcomes[2] = _outcome(2040.0, FAIL, FAIL)
    assert next_step(plan, P99_20, outcomes) == Step(None, ENDED_CONVERGED)
    assert capacity_of(plan, P99_20, outcomes).confirmed
    outcomes[1] = _outcome(2000.0, PASS, FAIL)
    # The floor's second window failed: the host's noise reaches down to it, and the
    # search goes on below it.
    assert next_step(plan, P99_20, outcomes).next_tps == pytest.approx(447.0)
    outcomes[1] = _outcome(2000.0, PASS, PASS)
    outcomes[2] = _outcome(2040.0, FAIL, PASS)
    # The ceiling's second window passed: the ceiling was a stall, the search goes above
    # it, a precision above it since its pooled estimate is over the limit already.
    assert next_step(plan, P99_20, outcomes).next_tps == pytest.approx(2140.0)


def test_an_undecided_window_confirms_nothing() -> None:
    plan = SearchPlan(100.0, 5000.0, 20, confirming_probes=3)
    ceiling = replace(_outcome(2040.0, FAIL, FAIL, FAIL), windows=(UNDECIDED, FAIL, FAIL))
    floor = _outcome(2000.0, PASS, PASS, PASS)
    outcomes = [_outcome(100.0, PASS, PASS, PASS), floor, ceiling, _outcome(5000.0, FAIL)]
    assert next_step(plan, P99_20, outcomes) == Step(2040.0)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.sentence.endswith("(not confirmed: its ceiling failed in 2 windows only)")


def test_a_lowest_rate_whose_windows_disagree_ends_the_search_saying_so() -> None:
    plan = SearchPlan(100.0, 5000.0, 20)
    outcomes = [_outcome(100.0, FAIL)]
    assert next_step(plan, P99_20, outcomes) == Step(100.0)
    outcomes = [_outcome(100.0, FAIL, PASS)]
    assert next_step(plan, P99_20, outcomes) == Step(None, ENDED_LOW_MIXED)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.NONE and capacity.sentence.endswith("the host's noise)")


def test_a_lowest_rate_undecided_after_its_repeats_is_not_called_below() -> None:
    unsure = decide_probe(_measure(15, 21, offered_tps=100.0, reached_tps=100.0), P99_20)
    plan = SearchPlan(100.0, 5000.0, 10)
    outcomes = [RateOutcome(100.0, unsure, 19.0, plan.max_repeats)]
    assert next_step(plan, P99_20, outcomes) == Step(None, ENDED_LOW_UNDECIDED)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.found == Found.NONE
    assert capacity.sentence == "no probe passed at p99 <= 20 ms"
