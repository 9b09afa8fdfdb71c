"""The three answers, calibrated by simulation with the spread measured on this machine.

The variance structure of a 15 s select-only pgbench point (docs/benchmarks.md,
"Where the spread comes from", scripts/measure_variance.py): a fresh cluster moves
tps by BETWEEN_CLUSTER_CV, a run in the same cluster by WITHIN_CLUSTER_CV, a second
by PER_SECOND_CV. In rounds every repeat is a run of its own, in a fresh cluster, so a
simulated repeat draws all three and averages its seconds as pgbench does.

The fixed design is the number of rounds that finds a 5 % shift 95 % of the time
(noncentral t at the repeat spread these levels add up to); at it, A/A cells are
falsely faster or slower at most 5 % of the time and "same within ±5 %" in at least
80 % of those decided, and a 5 % shift either way gets its right direction in at
least 90 %. Seeded, CELLS cells per case: a rate whose nominal value is the bound
itself (5 % false directions, 5 % false "same" at the margin) may exceed it by two
binomial standard errors of CELLS cells (ALLOWANCE), the sampling error, no more.
"""

import math

import numpy as np
import pytest

from runs.analysis.verdicts import Question, Verdict, judge
from runs.inference import stats

# Two measurements of 5 clusters x 4 runs each, variances pooled (docs/benchmarks.md).
BETWEEN_CLUSTER_CV = 0.282
WITHIN_CLUSTER_CV = 0.290
PER_SECOND_CV = 0.565
SECONDS = 15
MEAN_TPS = 2008.0
MARGIN_PCT = 5.0
MIN_EFFECT_PCT = 1.0
CELLS = 300
ALLOWANCE = 2 * math.sqrt(0.05 * 0.95 / CELLS)
DIRECTIONS = {Verdict.FASTER, Verdict.SLOWER}


def repeat_log_sd() -> float:
    """The spread of one repeat's log tps: the three levels, seconds averaged."""
    return math.sqrt(BETWEEN_CLUSTER_CV**2 + WITHIN_CLUSTER_CV**2 + PER_SECOND_CV**2 / SECONDS)


def fixed_design_rounds(shift_pct: float, power: float) -> int:
    """The fewest rounds whose Welch test at ALPHA finds `shift_pct` with `power`."""
    effect, sd = math.log1p(shift_pct / 100), repeat_log_sd()
    rounds = stats.MIN_REPEATS
    while stats.power(effect / (sd * math.sqrt(2 / rounds)), 2 * rounds - 2) < power:
        rounds = math.ceil(rounds * 1.05)
    return rounds


def simulated_repeats(rng: np.random.Generator, rounds: int, shift: float) -> np.ndarray:
    """`rounds` repeats, each a fresh cluster and run, its tps the mean of its seconds."""
    level = (
        math.log(MEAN_TPS * (1 + shift))
        + rng.normal(0, BETWEEN_CLUSTER_CV, rounds)
        + rng.normal(0, WITHIN_CLUSTER_CV, rounds)
    )
    seconds = np.exp(level[:, None] + rng.normal(0, PER_SECOND_CV, (rounds, SECONDS)))
    return seconds.mean(axis=1)


def simulated_verdicts(
    seed: int, rounds: int, shift: float, min_effect_pct: float = MIN_EFFECT_PCT
) -> list[Verdict]:
    rng = np.random.default_rng(seed)
    questions = [
        Question(simulated_repeats(rng, rounds, shift), simulated_repeats(rng, rounds, 0.0), True)
        for _ in range(CELLS)
    ]
    # One cell per table, as one compared cell of an A/B: BH over a single p.
    return [judge([question], min_effect_pct, MARGIN_PCT)[0].verdict for question in questions]


@pytest.fixture(scope="module")
def rounds() -> int:
    return fixed_design_rounds(5.0, power=0.95)


def test_the_fixed_design_is_sized_from_the_measured_spread(rounds):
    # Mostly between clusters: longer points would barely narrow the interval.
    assert PER_SECOND_CV**2 / SECONDS < 0.2 * repeat_log_sd() ** 2
    assert 1000 < rounds < 4000  # this machine, shared: thousands of rounds for 5 %


def test_a_a_cells_are_rarely_faster_or_slower_and_mostly_the_same_once_decided(rounds):
    verdicts = simulated_verdicts(20261125, rounds, shift=0.0)
    decided = [v for v in verdicts if v is not Verdict.UNDECIDED]
    assert sum(v in DIRECTIONS for v in verdicts) / len(verdicts) <= 0.05 + ALLOWANCE
    assert sum(v is Verdict.SAME for v in decided) / len(decided) >= 0.80


@pytest.mark.parametrize(("shift", "right"), [(0.05, Verdict.FASTER), (-0.05, Verdict.SLOWER)])
def test_a_five_percent_shift_gets_its_direction(rounds, shift, right):
    verdicts = simulated_verdicts(7 + int(shift * 100), rounds, shift)
    assert sum(v is right for v in verdicts) / len(verdicts) >= 0.90
    assert not {Verdict.FASTER, Verdict.SLOWER} - {right} & set(verdicts)


def test_a_shift_of_the_margin_is_called_the_same_at_most_five_percent_of_the_time(rounds):
    # A minimum effect no estimate reaches leaves "same" or "undecided": TOST's own error.
    verdicts = simulated_verdicts(41, rounds, shift=MARGIN_PCT / 100, min_effect_pct=50.0)
    assert sum(v is Verdict.SAME for v in verdicts) / len(verdicts) <= 0.05 + ALLOWANCE


@pytest.mark.parametrize("repeats", [3, 5, 10])
def test_few_rounds_at_this_spread_are_not_falsely_faster_or_slower(repeats):
    verdicts = simulated_verdicts(100 + repeats, repeats, shift=0.0)
    assert sum(v in DIRECTIONS for v in verdicts) / len(verdicts) <= 0.05 + ALLOWANCE
    assert Verdict.SAME not in verdicts  # a ±5 % claim needs far narrower intervals
