"""How much a host's windows disagree at one rate (runs/inference/capacity_spread.py), and
seeded searches on hosts whose windows spread: the interval, widened by a line through
the windows (runs/inference/capacity_crossing.py), still holds the capacity, and the
answer says how it was found."""

import math

import pytest

from runs.inference.capacity import Decision, ProbeVerdict
from runs.inference.capacity_search import (
    ENDED_CONVERGED,
    Found,
    RateOutcome,
    SearchPlan,
    capacity_of,
    expected_probes,
    next_step,
    noise_probes,
    outcomes_spread,
)
from runs.inference.capacity_spread import (
    MEDIAN_ABSOLUTE_NORMAL,
    SPREAD_WIDENS,
    WindowSpread,
    clear_of_limit,
    window_spread,
    window_spread_said,
    windows_to_clear,
)
from tests.runs.inference.simulated_hosts import (
    P99_20,
    SimulatedHost,
    search_on,
    sharp_knee_host,
)

SEEDS = 30
PLAN = SearchPlan(low_tps=50.0, high_tps=5000.0, budget=24)
# A rate's pooled verdicts and its windows' own decisions, for outcomes built by hand.
passed = ProbeVerdict(Decision.PASS, (), False, None, False)
failed = ProbeVerdict(Decision.FAIL, ("p99 over 20 ms",), False, None, True)
pass_, fail = Decision.PASS, Decision.FAIL
# A search converged at [1,000, 1,040], both ends confirmed, two windows each spreading
# near the limit; its highest rate fell short of its offer at 3,900 tps (the server's
# throughput).
SHOULDER_PLAN = SearchPlan(50.0, 5000.0, budget=24)
short = ProbeVerdict(Decision.FAIL, ("rate not reached",), False, 3900.0, False)
CONVERGED_AT_1000 = (
    RateOutcome(50.0, passed, 3.0, 1, (pass_,), 0, (3.0,)),
    RateOutcome(1000.0, passed, 15.0, 2, (pass_, pass_), 0, (10.0, 18.0)),
    RateOutcome(1040.0, failed, 30.0, 2, (fail, fail), 0, (24.0, 40.0)),
    RateOutcome(5000.0, short, 900.0, 1, (fail,), 0, (900.0,)),
)


def test_the_spread_pools_the_rates_probed_more_than_once_robust_to_one_stalled_window() -> None:
    # Three rates of two windows a factor e^0.2 apart: each log is 0.1 from its rate's
    # mean, sd x sqrt(1/2) for a pair, so each says sd = 0.1 / sqrt(1/2) over a normal's
    # median absolute value. A fourth pair, one window ten times the other (a stall the
    # stall rule could not tell), does not move the median of eight.
    clean = [
        [10.0, 10.0 * math.exp(0.2)],
        [30.0 * math.exp(0.2), 30.0],
        [20.0, 20.0 * math.exp(0.2)],
    ]
    spread = window_spread([*clean, [5.0, 50.0], [7.0]])
    assert spread is not None
    assert spread.sd == pytest.approx(0.1 / math.sqrt(0.5) / MEDIAN_ABSOLUTE_NORMAL)
    assert (spread.windows, spread.rates) == (8, 4)
    assert spread.percent == pytest.approx(100 * math.expm1(spread.sd))


def test_no_spread_before_two_degrees_of_freedom_nor_from_windows_without_estimates() -> None:
    assert window_spread([[10.0, 12.0], [20.0]]) is None
    assert window_spread([[10.0, None, 12.0], [None, None]]) is None
    assert window_spread([[10.0, 12.0, 14.0]]) is not None


def test_only_a_spread_that_widens_the_interval_is_said() -> None:
    assert window_spread_said(None, "p99") == ""
    assert window_spread_said(WindowSpread(SPREAD_WIDENS / 2, 6, 3), "p99") == ""
    said = window_spread_said(WindowSpread(0.4, 6, 3), "p99")
    assert said.startswith("the p99 of repeated windows at one rate spread 49 % here")
    assert "(6 windows at 3 rates)" in said and "a line through the windows" in said
    assert "too much for the line" not in said
    unbounded = window_spread_said(WindowSpread(0.4, 6, 3), "p99", ["below"])
    assert "too much for the line to bound it below" in unbounded


def test_the_answer_widens_its_interval_by_the_line_and_says_the_spread() -> None:
    outcomes = [
        RateOutcome(100.0, passed, 3.0, 1, (pass_,), 0, (3.0,)),
        RateOutcome(1000.0, passed, 15.0, 2, (pass_, pass_), 0, (10.0, 18.0)),
        RateOutcome(1040.0, failed, 30.0, 2, (fail, fail), 0, (24.0, 40.0)),
        RateOutcome(5000.0, failed, 900.0, 1, (fail,), 0, (900.0,)),
    ]
    capacity = capacity_of(SearchPlan(100.0, 5000.0, budget=8), P99_20, outcomes)
    assert capacity.found == Found.FOUND
    # Four windows at two rates within x1.6 of the estimate: no line (three rates needed),
    # so the interval runs to the lowest and the highest probe, and the answer says why.
    assert (capacity.lower, capacity.upper) == (100.0, 5000.0)
    first, spread, unbounded = capacity.sentence.split("; ")
    assert first.endswith("[100, 5,000] at p99 <= 20 ms")
    assert spread.startswith("the p99 of repeated windows at one rate spread")
    assert unbounded.startswith(
        "the windows spread too much for the line to bound it below or above"
    )


def test_a_line_through_three_rates_bounds_the_interval_around_the_bracket() -> None:
    outcomes = [
        RateOutcome(100.0, passed, 3.0, 1, (pass_,), 0, (3.0,)),
        RateOutcome(800.0, passed, 9.0, 2, (pass_, pass_), 0, (8.0, 10.0)),
        RateOutcome(1000.0, passed, 15.0, 2, (pass_, pass_), 0, (13.0, 17.0)),
        RateOutcome(1040.0, failed, 30.0, 2, (fail, fail), 0, (24.0, 34.0)),
        RateOutcome(1300.0, failed, 60.0, 2, (fail, fail), 0, (50.0, 70.0)),
        RateOutcome(5000.0, failed, 900.0, 1, (fail,), 0, (900.0,)),
    ]
    capacity = capacity_of(SearchPlan(100.0, 5000.0, budget=12), P99_20, outcomes)
    assert capacity.found == Found.FOUND and capacity.estimate is not None
    assert capacity.lower is not None and capacity.upper is not None
    # Wider than the bracket [1,000, 1,040], narrower than the probes' range.
    assert 800 < capacity.lower < 1000 and 1040 < capacity.upper < 1300
    assert capacity.lower < capacity.estimate < capacity.upper
    assert "too much for the line" not in capacity.sentence


@pytest.mark.parametrize(
    ("knee", "spread", "inside_at_least", "widest"),
    [(2.0, 0.0, 1.0, 1.06), (2.0, 0.3, 0.93, 1.6), (1.5, 0.5, 0.93, 2.5)],
)
def test_seeded_searches_hold_the_capacity_where_their_windows_spread(
    knee: float, spread: float, inside_at_least: float, widest: float
) -> None:
    # A host whose every window's latencies are scaled by e^N(0, spread); 0.3 to 0.5 is
    # how much the 2-vCPU VMs' windows at one rate spread (docs/benchmarks.md). Over 100
    # seeds at knees 1.5 and 2 the intervals held the true capacity in 100 % on a steady
    # host, and 93 to 98 % at spreads 0.1 to 0.5, where the bracket alone held it in 62 to
    # 82 %; their median width x1.08 to x1.09 at 0.1, x1.18 to x1.19 at 0.3 and x1.31 at
    # 0.5, the median search 11 and 12 probes at 0.3 (as before) and 13 to 14 at 0.5 (11.5
    # to 12 before: the shoulders where the line did not bound a side).
    widths, inside, probes = [], 0, []
    for seed in range(SEEDS):
        host = SimulatedHost(seed, knee=knee, spread=spread)
        outcomes, _windows = search_on(host, PLAN)
        capacity = capacity_of(PLAN, P99_20, outcomes)
        assert capacity.found == Found.FOUND, capacity.sentence
        lower, upper = capacity.lower, capacity.upper
        assert lower is not None and upper is not None
        inside += lower <= host.capacity(20.0) <= upper
        widths.append(upper / lower)
        probes.append(sum(outcome.probes for outcome in outcomes))
        if spread == 0.0:
            assert "of repeated windows at one rate spread" not in capacity.sentence
    assert inside >= inside_at_least * SEEDS, inside
    assert sorted(widths)[SEEDS // 2] <= widest, sorted(widths)
    assert max(probes) <= PLAN.budget


def test_a_converged_search_whose_line_bounds_no_side_probes_its_shoulders() -> None:
    plan, outcomes = SHOULDER_PLAN, list(CONVERGED_AT_1000)
    # Converged (1,000 to 1,040 is within 5 %, both ends confirmed), but two rates near the
    # capacity make no line: the shoulder below, within x1.6 of the estimate.
    below = next_step(plan, P99_20, outcomes).next_tps
    assert below is not None and 1000 / 1.6 <= below < 1000 / 1.2
    shoulder = [RateOutcome(below, passed, 6.0, 3, (pass_,) * 3, 0, (6.0, 5.0, 7.0))]
    # Three windows there: a line through three rates bounds both sides.
    step = next_step(plan, P99_20, outcomes + shoulder)
    assert (step.next_tps, step.ended) == (None, ENDED_CONVERGED)
    capacity = capacity_of(plan, P99_20, outcomes + shoulder)
    assert capacity.lower is not None and capacity.upper is not None
    assert below < capacity.lower < 1000 and 1040 < capacity.upper < 3900
    assert "too much for the line" not in capacity.sentence
    # Before the shoulder no line bounded it: the interval stopped at the lowest probe and
    # at the throughput the server fell short at, not at the 5,000 offered.
    capacity = capacity_of(plan, P99_20, outcomes)
    assert (capacity.lower, capacity.upper) == (50.0, 3900.0)
    assert "bound it below or above" in capacity.sentence


def test_a_search_whose_windows_agree_ends_without_shoulders() -> None:
    outcomes = [
        RateOutcome(50.0, passed, 3.0, 1, (pass_,), 0, (3.0,)),
        RateOutcome(1000.0, passed, 18.0, 2, (pass_, pass_), 0, (18.0, 18.2)),
        RateOutcome(1040.0, failed, 22.0, 2, (fail, fail), 0, (22.0, 22.3)),
        RateOutcome(5000.0, failed, 900.0, 1, (fail,), 0, (900.0,)),
    ]
    plan = SearchPlan(50.0, 5000.0, budget=24)
    step = next_step(plan, P99_20, outcomes)
    assert (step.next_tps, step.ended) == (None, ENDED_CONVERGED)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert (capacity.lower, capacity.upper) == (1000.0, 1040.0)
    assert "spread" not in capacity.sentence


def test_a_host_whose_windows_spread_is_expected_to_take_more_probes() -> None:
    # The seeded searches' medians beyond a steady host's: none under SPREAD_WIDENS, 2 at
    # 0.1, 5 at 0.3, 7 at 0.5 and beyond; interpolated between.
    def spread(sd: float) -> WindowSpread:
        return WindowSpread(sd, 6, 3)

    assert noise_probes(None) == noise_probes(spread(SPREAD_WIDENS / 2)) == 0
    assert [noise_probes(spread(sd)) for sd in (0.1, 0.2, 0.3, 0.5, 1.5)] == [2, 4, 5, 7, 7]
    steady = expected_probes(PLAN)
    assert expected_probes(PLAN, spread(0.3)) == steady + 5
    assert expected_probes(SearchPlan(50.0, 5000.0, budget=12), spread(0.5)) == 12


def test_a_side_the_line_never_bounds_takes_at_most_three_shoulder_windows() -> None:
    # Converged at [1,000, 1,040], but the windows near it scatter so (4 to 19 ms at one
    # rate below, 21 to 90 ms above) that no line bounds either side: each side's shoulders
    # take three windows, wherever the next one is aimed, then the search ends and the
    # interval runs to the lowest probe and to the throughput the server reached.
    plan, outcomes = SHOULDER_PLAN, list(CONVERGED_AT_1000)
    scattered = {-1: (19.0, 4.0, 12.0), 1: (21.0, 90.0, 25.0)}
    for side, verdict in ((-1, passed), (1, failed)):
        for estimate in scattered[side]:
            rate = next_step(plan, P99_20, outcomes).next_tps
            assert rate is not None and (rate < 1000 if side < 0 else rate > 1040)
            # A window more at the rate asked for, beside the rate's earlier ones if any.
            earlier = next((o for o in outcomes if o.offered_tps == rate), None)
            estimates = (*(earlier.window_estimates_ms if earlier else ()), estimate)
            decisions = (verdict.decision,) * len(estimates)
            window = RateOutcome(rate, verdict, estimate, len(estimates), decisions, 0, estimates)
            outcomes = [o for o in outcomes if o is not earlier] + [window]
    step = next_step(plan, P99_20, outcomes)
    assert (step.next_tps, step.ended) == (None, ENDED_CONVERGED)
    capacity = capacity_of(plan, P99_20, outcomes)
    assert (capacity.lower, capacity.upper, capacity.unbounded) == (
        50.0,
        3900.0,
        ("below", "above"),
    )
    assert "too much for the line to bound it below or above" in capacity.sentence


def short_of(reached_tps: float) -> ProbeVerdict:
    return ProbeVerdict(Decision.FAIL, ("rate not reached",), False, reached_tps, False)


# A search through the real agent on an AMD EPYC VM (2026-12-01, TPC-B at scale 10, 4
# clients, 50 to 20,000 tps): a sharp knee, p99 flat at 5 to 10 ms up to 5,020 tps and 36 to
# 52 ms at 5,210, the server's throughput about 5,900; no line through such windows bounds
# the capacity, and its shoulder below has taken three windows. Then two windows at 5,960
# tps fell short of it (the queue grew: 603 and 1,957 ms).
SHARP_KNEE = (
    RateOutcome(50.0, passed, 3.2, 1, (pass_,), 0, (3.2,)),
    RateOutcome(4410.0, passed, 6.3, 1, (pass_,), 0, (6.3,)),
    RateOutcome(4500.0, passed, 5.0, 1, (pass_,), 0, (5.0,)),
    RateOutcome(4840.0, passed, 6.3, 1, (pass_,), 0, (6.3,)),
    RateOutcome(5020.0, passed, 8.0, 2, (pass_, pass_), 0, (6.2, 10.2)),
    RateOutcome(5210.0, failed, 44.0, 2, (fail, fail), 0, (36.1, 52.3)),
    RateOutcome(20000.0, short_of(6334.0), 40600.0, 1, (fail,), 0, (40600.0,)),
)
PAST_THE_THROUGHPUT = RateOutcome(
    5960.0, short_of(5870.0), 1000.0, 2, (fail, fail), 0, (603.0, 1957.0)
)


def test_windows_past_the_throughput_neither_spread_nor_take_shoulders() -> None:
    plan = SearchPlan(50.0, 20000.0, budget=24)
    outcomes = [*SHARP_KNEE, PAST_THE_THROUGHPUT]
    # The windows at 5,960 tps are the queue's, not the host's noise: the spread is the
    # windows' at 5,020 and 5,210 only.
    assert outcomes_spread(outcomes) == window_spread([(6.2, 10.2), (36.1, 52.3)])
    # No rate past the 5,870 tps the server reached is asked for (the line leaves its
    # windows out), and the interval stops there.
    step = next_step(plan, P99_20, outcomes)
    assert step.next_tps is not None and step.next_tps < 5870.0
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.upper == 5870.0 and capacity.unbounded == ("below", "above")


def test_a_rate_lies_clear_of_the_limit_by_the_t_of_the_spreads_degrees_of_freedom() -> None:
    # Windows at 8 ms: 0.92 under the log of 20 ms. With an sd of 0.3 on 3 degrees of
    # freedom (t 5.84), two windows are not clear (0.3 x 5.84 / sqrt 2 = 1.24); a third,
    # with a fourth degree of freedom (t 4.60), would be (0.3 x 4.60 / sqrt 3 = 0.80).
    spread = WindowSpread(0.3, 6, 3)
    assert not clear_of_limit((8.0, 8.0), 20.0, spread, -1)
    assert windows_to_clear((8.0, 8.0), 20.0, spread, -1, most=5) == 1
    assert windows_to_clear((8.0, 8.0), 20.0, spread, -1, most=2) is None
    assert clear_of_limit((8.0, 8.0, 8.0), 20.0, WindowSpread(0.3, 7, 3), -1)
    # Under the limit is never clear above it; no estimate is clear of nothing.
    assert windows_to_clear((8.0, 8.0), 20.0, spread, 1, most=12) is None
    assert windows_to_clear((None,), 20.0, spread, -1, most=5) is None


def test_a_sharp_knee_is_bounded_by_rates_whose_windows_lie_clear_of_the_limit() -> None:
    # The EPYC VM's search: the line bounds neither side, so the search asks for more
    # windows at a rate beyond the bracket that a few would make clear of the limit; with
    # windows like those it measured there, the interval is [4,820, 5,210] after three.
    plan = SearchPlan(50.0, 20000.0, budget=24)
    outcomes = [*SHARP_KNEE, PAST_THE_THROUGHPUT]
    windows_ms = {4500.0: [5.6, 4.6], 5210.0: [44.0]}
    asked = []
    while (rate := next_step(plan, P99_20, outcomes).next_tps) is not None:
        asked.append(rate)
        earlier = next(o for o in outcomes if o.offered_tps == rate)
        estimate = windows_ms[rate].pop(0)
        verdict = passed if estimate < 20.0 else failed
        estimates = (*earlier.window_estimates_ms, estimate)
        window = RateOutcome(
            rate,
            verdict,
            estimate,
            earlier.probes + 1,
            (*earlier.windows, verdict.decision),
            0,
            estimates,
        )
        outcomes = [o for o in outcomes if o is not earlier] + [window]
    assert asked == [4500.0, 4500.0, 5210.0]
    capacity = capacity_of(plan, P99_20, outcomes)
    assert capacity.lower is not None and capacity.upper is not None
    assert (round(capacity.lower), capacity.upper) == (4820, 5210.0)
    assert (capacity.unbounded, capacity.cleared) == ((), ("above",))
    assert (
        "; above, where the line did not fit the curve (a sharp knee), the interval ends at"
        in capacity.sentence
    )


@pytest.mark.parametrize(
    ("spread", "inside_at_least", "unbounded_at_most"), [(0.3, 29, 2), (0.5, 28, 8)]
)
def test_seeded_sharp_knees_are_bounded_where_no_line_fits(
    spread: float, inside_at_least: int, unbounded_at_most: int
) -> None:
    # A cliff like the EPYC VM's (sharp_knee_host). Over 200 seeds the line alone left a
    # side unbounded in 30 % of the searches at a spread of 0.3 and 46 % at 0.5 (the
    # interval down to the lowest probe, 50 tps); with the rates whose windows lie clear
    # of the limit, in 2.5 and 12 %, holding the capacity as often (100 and 98.5 %) in about
    # as many probes (median 10 and 10.5 to 11).
    inside, unbounded, probes = 0, 0, []
    for seed in range(SEEDS):
        host = sharp_knee_host(seed, spread)
        outcomes, _windows = search_on(host, PLAN)
        capacity = capacity_of(PLAN, P99_20, outcomes)
        # A window at 50 tps can fail at 0.5 (p99 6 ms x e^N(0, 0.5)): not found, not inside.
        if capacity.lower is not None and capacity.upper is not None:
            inside += capacity.lower <= host.capacity(20.0) <= capacity.upper
        unbounded += bool(capacity.unbounded)
        probes.append(sum(outcome.probes for outcome in outcomes))
    assert inside >= inside_at_least, inside
    assert unbounded <= unbounded_at_most, unbounded
    assert max(probes) <= PLAN.budget
