"""How much a host's windows disagree at one rate (runs/inference/capacity_spread.py), and
seeded searches on hosts whose windows spread: where the answer's interval stops being
trustworthy, the answer says so."""

import math

import pytest

from runs.inference.capacity import Decision, ProbeVerdict
from runs.inference.capacity_search import Found, RateOutcome, SearchPlan, capacity_of
from runs.inference.capacity_spread import (
    SPREAD_SAID,
    WindowSpread,
    window_spread,
    window_spread_said,
)
from tests.runs.inference.simulated_hosts import P99_20, SimulatedHost, search_on

SEEDS = 30
PLAN = SearchPlan(low_tps=50.0, high_tps=5000.0, budget=24)


def test_the_spread_pools_the_rates_probed_more_than_once() -> None:
    # Two rates of two windows each, a factor e^0.2 apart within each: the logs differ
    # from their mean by 0.1 each, 4 squares of 0.01 over 2 degrees of freedom.
    spread = window_spread([[10.0, 10.0 * math.exp(0.2)], [30.0 * math.exp(0.2), 30.0], [5.0]])
    assert spread is not None
    assert spread.sd == pytest.approx(math.sqrt(0.04 / 2))
    assert (spread.windows, spread.rates) == (4, 2)
    assert spread.percent == pytest.approx(100 * math.expm1(spread.sd))


def test_no_spread_before_two_degrees_of_freedom_nor_from_windows_without_estimates() -> None:
    assert window_spread([[10.0, 12.0], [20.0]]) is None
    assert window_spread([[10.0, None, 12.0], [None, None]]) is None
    assert window_spread([[10.0, 12.0, 14.0]]) is not None


def test_only_a_spread_that_makes_the_interval_miss_is_said() -> None:
    assert window_spread_said(None, "p99") == ""
    assert window_spread_said(WindowSpread(SPREAD_SAID / 2, 6, 3), "p99") == ""
    said = window_spread_said(WindowSpread(0.4, 6, 3), "p99")
    assert said.startswith("the p99 of repeated windows at one rate spread 49 % here")
    assert "(6 windows at 3 rates)" in said and "the interval may miss it" in said


def test_the_answer_says_the_spread_beside_the_capacity() -> None:
    passed = ProbeVerdict(Decision.PASS, (), False, None, False)
    failed = ProbeVerdict(Decision.FAIL, ("p99 at least 31 ms",), False, None, True)
    pass_, fail = Decision.PASS, Decision.FAIL
    outcomes = [
        RateOutcome(100.0, passed, 3.0, 1, (pass_,), 0, (3.0,)),
        RateOutcome(1000.0, passed, 15.0, 2, (pass_, pass_), 0, (10.0, 18.0)),
        RateOutcome(1040.0, failed, 30.0, 2, (fail, fail), 0, (24.0, 40.0)),
        RateOutcome(5000.0, failed, 900.0, 1, (fail,), 0, (900.0,)),
    ]
    capacity = capacity_of(SearchPlan(100.0, 5000.0, budget=8), P99_20, outcomes)
    assert capacity.found == Found.FOUND
    first, spread = capacity.sentence.split("; ")
    assert first.endswith("[1,000, 1,040] at p99 <= 20 ms")
    assert spread.startswith("the p99 of repeated windows at one rate spread")


@pytest.mark.parametrize(("spread", "said_at_least", "said_at_most"), [(0.0, 0, 0), (0.3, 0.8, 1)])
def test_seeded_searches_say_the_spread_where_their_intervals_miss(
    spread: float, said_at_least: float, said_at_most: float
) -> None:
    # A host whose every window's latencies are scaled by e^N(0, spread). Over 100 seeds
    # at knees 1.5 to 2.5 the intervals held the true capacity in 100 % on a steady host,
    # 70 to 74 % at 0.3 (the 2-vCPU VM's windows at one rate spread about that much,
    # docs/benchmarks.md), where 92 to 95 % of the answers said so.
    said, inside = 0, 0
    for seed in range(SEEDS):
        host = SimulatedHost(seed, knee=2.0, spread=spread)
        outcomes, _windows = search_on(host, PLAN)
        capacity = capacity_of(PLAN, P99_20, outcomes)
        assert capacity.found == Found.FOUND, capacity.sentence
        said += "of repeated windows at one rate spread" in capacity.sentence
        lower, upper = capacity.lower, capacity.upper
        assert lower is not None and upper is not None
        inside += lower <= host.capacity(20.0) <= upper
    assert said_at_least * SEEDS <= said <= said_at_most * SEEDS, said
    if spread == 0.0:
        assert inside == SEEDS
