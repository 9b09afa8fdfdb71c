"""The adaptive rule (runs/analysis/sequential.py), calibrated by simulation with the
spread measured on this machine, beside the fixed design of the same rates.

Each simulated compared point draws its rounds as tests/runs/analysis/test_verdicts_calibration.py
does (a fresh cluster per repeat, its seconds averaged), with the budget of the fixed
design that finds a 5 % shift 95 % of the time. The adaptive rule looks after rounds
3, 6, 12, ... and the budget, and must keep the fixed design's bounds: A/A points
falsely faster or slower at most 5 % of the time, "same within ±5 %" in at least 80 %
of those decided, the right direction in at least 90 % at a 5 % shift either way. Its
machine time, over a mix of those cases and a large effect, is at most half the fixed
design's (docs/benchmarks.md has the figures).
"""

import math

import numpy as np
import pytest
from scipy.stats import norm

from runs.analysis.sequential import LookLevel, look_levels, look_rounds, simulate
from runs.analysis.verdicts import Verdict
from runs.inference.spending import last_look_level, spent
from runs.inference.stats import ALPHA
from tests.runs.analysis.test_verdicts_calibration import (
    CELLS,
    DIRECTIONS,
    MARGIN_PCT,
    MIN_EFFECT_PCT,
    fixed_design_rounds,
    simulated_repeats,
)

CASES = {"A/A": 0.0, "+5 %": 0.05, "-5 %": -0.05, "+50 %": 0.5}
# A/A points: more of them, so the 5 % bound on false directions is judged within
# 1.4 points (two binomial standard errors) rather than 2.5.
A_A_POINTS = 1000


@pytest.fixture(scope="module")
def budget() -> int:
    return fixed_design_rounds(5.0, power=0.95)


@pytest.fixture(scope="module")
def simulated(budget: int) -> dict[str, tuple[list[Verdict], np.ndarray]]:
    """Each case's CELLS points run through the adaptive rule: verdicts and rounds taken."""
    looks = look_rounds(3, budget)
    found = {}
    for n, (case, shift) in enumerate(CASES.items()):
        rng = np.random.default_rng(20261127 + n)
        points = A_A_POINTS if shift == 0 else CELLS
        values = np.stack([simulated_repeats(rng, budget, shift) for _ in range(points)])
        baseline = np.stack([simulated_repeats(rng, budget, 0.0) for _ in range(points)])
        result = simulate(values, baseline, looks, MIN_EFFECT_PCT, MARGIN_PCT)
        found[case] = (result.verdicts, result.rounds)
    return found


def test_looks_double_from_the_first_rounds_to_the_budget():
    assert look_rounds(3, 20) == (3, 6, 12, 20)
    assert look_rounds(3, 3) == (3,)
    with pytest.raises(ValueError, match="at least 3 rounds"):
        look_rounds(2, 10)
    with pytest.raises(ValueError, match="below the first"):
        look_rounds(5, 4)


def test_each_look_tests_below_alpha_and_the_levels_grow_with_the_information():
    levels = look_levels(look_rounds(3, 192))
    alphas = [level.alpha for level in levels]
    assert all(0 < a < ALPHA for a in alphas)
    assert alphas == sorted(alphas)
    assert look_levels((10,)) == (LookLevel(10, pytest.approx(ALPHA), pytest.approx(ALPHA)),)


# The error rates a plan spends: the lab's, and a fifth of it (one of a patch try's five
# experiments, which share it), each with the simulation's tolerance at that rate.
PLAN_ALPHAS = [(ALPHA, 0.002), (ALPHA / 5, 0.001)]


@pytest.mark.parametrize(("alpha", "tolerance"), PLAN_ALPHAS)
def test_the_levels_keep_the_chance_of_any_false_difference_at_alpha(alpha, tolerance):
    """Brownian paths drawn apart from those the boundaries came from: the share that
    crosses some look's boundary is the plan's alpha, within the simulation's error."""
    looks = look_rounds(3, 96)
    levels = look_levels(looks, alpha)
    fractions = np.asarray(looks, dtype=float) / looks[-1]
    rng = np.random.default_rng(99)
    steps = np.sqrt(np.diff(np.concatenate([[0.0], fractions])))
    z = np.cumsum(rng.standard_normal((400_000, len(looks))) * steps, axis=1) / np.sqrt(fractions)
    bounds = np.asarray([norm.isf(level.alpha / 2) for level in levels])
    crossed = (np.abs(z) >= bounds).any(axis=1).mean()
    assert crossed == pytest.approx(alpha, abs=tolerance)
    assert levels[0].alpha == pytest.approx(alpha * spent(looks[0] / looks[-1]))


@pytest.mark.parametrize(("alpha", "tolerance"), PLAN_ALPHAS)
@pytest.mark.parametrize("last", [33, 50, 7])
def test_a_last_look_at_the_time_limit_keeps_the_chance_of_any_false_difference_at_alpha(
    last, alpha, tolerance
):
    """The hours end the plan between looks (after round `last` of 96): the planned looks
    before it and the last look, on fresh paths, cross with the chance alpha, one-sided
    "same" tests too; the last look tests above the planned looks before it."""
    looks = look_rounds(3, 96)
    taken = [level for level in look_levels(looks, alpha) if level.rounds < last]
    final = last_look_level(looks, last, alpha)
    rounds = np.asarray([*(level.rounds for level in taken), last], dtype=float)
    rng = np.random.default_rng(98)
    steps = np.sqrt(np.diff(np.concatenate([[0.0], rounds])))
    z = np.cumsum(rng.standard_normal((400_000, rounds.size)) * steps, axis=1) / np.sqrt(rounds)
    bounds = np.asarray([norm.isf(level.alpha / 2) for level in [*taken, final]])
    one_sided = np.asarray([norm.isf(level.alpha_same) for level in [*taken, final]])
    assert (np.abs(z) >= bounds).any(axis=1).mean() == pytest.approx(alpha, abs=tolerance)
    assert (z >= one_sided).any(axis=1).mean() == pytest.approx(alpha, abs=tolerance)
    assert taken[-1].alpha < final.alpha < alpha


def test_a_a_points_are_rarely_faster_or_slower_and_mostly_the_same_once_decided(simulated):
    verdicts, _rounds = simulated["A/A"]
    decided = [v for v in verdicts if v is not Verdict.UNDECIDED]
    allowance = 2 * math.sqrt(0.05 * 0.95 / A_A_POINTS)
    assert sum(v in DIRECTIONS for v in verdicts) / len(verdicts) <= 0.05 + allowance
    assert sum(v is Verdict.SAME for v in decided) / len(decided) >= 0.80


@pytest.mark.parametrize(("case", "right"), [("+5 %", Verdict.FASTER), ("-5 %", Verdict.SLOWER)])
def test_a_five_percent_shift_gets_its_direction(simulated, case, right):
    verdicts, _rounds = simulated[case]
    assert sum(v is right for v in verdicts) / len(verdicts) >= 0.90
    assert not DIRECTIONS - {right} & set(verdicts)


def test_a_large_effect_is_decided_in_a_few_percent_of_the_budget(simulated, budget):
    verdicts, rounds = simulated["+50 %"]
    assert set(verdicts) == {Verdict.FASTER}
    assert rounds.mean() < 0.05 * budget


def test_the_mix_takes_at_most_half_the_machine_time_of_the_fixed_design(simulated, budget):
    shares = {case: float(rounds.mean()) / budget for case, (_v, rounds) in simulated.items()}
    assert all(share <= 1.0 for share in shares.values())
    assert sum(shares.values()) / len(shares) <= 0.5, shares


# A spread where second-to-second noise dominates (runs.services.adaptive lengthens the
# points after the first look): rounds close together, seconds far apart.
NOISY_SECONDS_BETWEEN_CV = 0.02
NOISY_SECONDS_PER_SECOND_CV = 0.25
NOISY_SECONDS = 15
SETUP_S = 30.0
LENGTHENED_BUDGET = 48


def rounds_of_windows(rng: np.random.Generator, shift: float, windows: list[int]) -> np.ndarray:
    """One repeat per window length: its tps the mean of that many noisy seconds."""
    level = math.log(1000.0 * (1 + shift)) + rng.normal(0, NOISY_SECONDS_BETWEEN_CV, len(windows))
    noise = rng.normal(0, NOISY_SECONDS_PER_SECOND_CV, len(windows)) / np.sqrt(windows)
    return np.exp(level + noise)


def lengthened_run(
    seed: int, shift: float, points: int, lengthen: bool
) -> tuple[list[Verdict], np.ndarray]:
    """Each point's verdict under the adaptive rule, with or without points twice as long
    after the first look, and the machine seconds (setups and windows) it took."""
    rng = np.random.default_rng(seed)
    first = 3
    later = 2 * NOISY_SECONDS if lengthen else NOISY_SECONDS
    windows = [NOISY_SECONDS] * first + [later] * (LENGTHENED_BUDGET - first)
    values = np.stack([rounds_of_windows(rng, shift, windows) for _ in range(points)])
    baseline = np.stack([rounds_of_windows(rng, 0.0, windows) for _ in range(points)])
    found = simulate(values, baseline, look_rounds(first, LENGTHENED_BUDGET), 1.0, 5.0)
    cost = np.cumsum([SETUP_S + w for w in windows])
    return found.verdicts, cost[found.rounds - 1]


def test_lengthened_points_keep_a_a_errors_and_cost_less_where_seconds_dominate():
    """Lengthening after the first look is decided on the spread alone: A/A points stay
    falsely faster or slower at most 5 % of the time, and a 5 % shift costs less machine
    time per right answer than with more rounds of the same length (about 11 % less
    here, with 98 % right against 90 %)."""
    verdicts, _cost = lengthened_run(7, 0.0, A_A_POINTS, lengthen=True)
    allowance = 2 * math.sqrt(0.05 * 0.95 / A_A_POINTS)
    assert sum(v in DIRECTIONS for v in verdicts) / len(verdicts) <= 0.05 + allowance

    per_right = {}
    for lengthen in (True, False):
        verdicts, cost = lengthened_run(8, 0.05, CELLS, lengthen)
        right = sum(v is Verdict.FASTER for v in verdicts) / len(verdicts)
        assert right >= 0.85
        per_right[lengthen] = cost.mean() / right
    assert per_right[True] < 0.95 * per_right[False], per_right
