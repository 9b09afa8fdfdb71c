"""Paired verdicts calibrated by simulation, beside the unpaired ones on the same rounds.

The variance structure of the lab's rounds (docs/benchmarks.md, "Where a round's spread
comes from"): a repeat's log tps spreads by REPEAT_LOG_SD, of which a share ROUND_SHARE
(its variance) is the round's, common to both cells of the round (the two runs of a
round correlated at 0.61 there); on top, the host's speed drifts down by DRIFT over the
experiment and drops by JUMP from the middle round on (an A/A there went from 21-39k
tps in rounds 1-4 to 11-19k in rounds 5-8), the same for both cells of a round.

With PAIRED_ROUNDS rounds the paired verdicts (runs/inference/paired.py through
runs/analysis/verdicts.py's judge) keep A/A cells falsely faster or slower at most 5 % of the
time (ALLOWANCE: two binomial standard errors of CELLS cells, the sampling error of a
rate whose nominal value is the bound itself), call "same within ±5 %" in at least 80 %
of the decided A/A cells, and give a 5 % shift either way its direction in at least
90 %. The unpaired verdicts on the same kind of rounds miss the direction rate by far
at PAIRED_ROUNDS / 0.4 rounds, so pairing needs at most 40 % of the rounds (their own
rates need about 80 rounds: docs/benchmarks.md has the figures). The adaptive looks on
paired rounds (runs/analysis/sequential.py's simulate) keep the same rates within a budget
of ADAPTIVE_BUDGET rounds, stopping at about 15 on average. Seeded, numpy only.
"""

import math
from collections.abc import Sequence

import numpy as np
import pytest

from runs.analysis.sequential import look_rounds, simulate
from runs.analysis.verdicts import Question, Verdict, judge

REPEAT_LOG_SD = 0.058
ROUND_SHARE = 0.6
DRIFT = math.log(0.90)
JUMP = math.log(0.70)
MEAN_TPS = 25000.0
MARGIN_PCT = 5.0
MIN_EFFECT_PCT = 1.0
PAIRED_ROUNDS = 15
UNPAIRED_ROUNDS = math.ceil(PAIRED_ROUNDS / 0.4)
CELLS = 300
UNPAIRED_CELLS = 100
ALLOWANCE = 2 * math.sqrt(0.05 * 0.95 / CELLS)
ADAPTIVE_BUDGET = 24
# A/A points of the adaptive rule: more of them (it is vectorised), so the 5 % bound on
# false directions is judged within 1.4 points.
A_A_POINTS = 1000
DIRECTIONS = {Verdict.FASTER, Verdict.SLOWER}


def host_speed(rounds: int) -> np.ndarray:
    """The host's log speed each round: a drift over the experiment, a drop from the middle."""
    index = np.arange(rounds)
    return DRIFT * index / (rounds - 1) + np.where(index >= rounds // 2, JUMP, 0.0)


def simulated_rounds(
    rng: np.random.Generator, rounds: int, shift: float
) -> tuple[np.ndarray, np.ndarray]:
    """A cell `shift` away from the baseline and the baseline, one run of each per round."""
    shared = (
        math.log(MEAN_TPS)
        + host_speed(rounds)
        + rng.normal(0, math.sqrt(ROUND_SHARE) * REPEAT_LOG_SD, rounds)
    )
    own_sd = math.sqrt(1 - ROUND_SHARE) * REPEAT_LOG_SD
    cell = np.exp(shared + math.log1p(shift) + rng.normal(0, own_sd, rounds))
    baseline = np.exp(shared + rng.normal(0, own_sd, rounds))
    return cell, baseline


def simulated_verdicts(
    seed: int, rounds: int, shift: float, in_pairs: bool, cells: int = CELLS
) -> list[Verdict]:
    rng = np.random.default_rng(seed)
    numbers = list(range(1, rounds + 1))
    verdicts = []
    for _ in range(cells):
        values, baseline = simulated_rounds(rng, rounds, shift)
        question = Question(list(values), list(baseline), True)
        if in_pairs:
            question = Question(list(values), list(baseline), True, numbers, numbers)
        # One cell per table, as one compared cell of an A/B: BH over a single p.
        (judged,) = judge([question], MIN_EFFECT_PCT, MARGIN_PCT)
        verdicts.append(judged.verdict)
    return verdicts


def assert_kept_rates(verdicts: Sequence[Verdict], right: Verdict | None) -> None:
    """The rates every design keeps: with no shift (`right` None) at most 5 % of the cells
    faster or slower (within two binomial standard errors of their number) and at least
    80 % of the decided ones the same; with a shift its direction in at least 90 %."""
    if right is not None:
        assert sum(v is right for v in verdicts) / len(verdicts) >= 0.90
        return
    decided = [v for v in verdicts if v is not Verdict.UNDECIDED]
    allowance = 2 * math.sqrt(0.05 * 0.95 / len(verdicts))
    assert sum(v in DIRECTIONS for v in verdicts) / len(verdicts) <= 0.05 + allowance
    assert sum(v is Verdict.SAME for v in decided) / len(decided) >= 0.80


def test_the_simulated_rounds_share_the_measured_part_of_their_spread():
    rng = np.random.default_rng(1)
    rounds = np.array([simulated_rounds(rng, 8, 0.0) for _ in range(2000)])
    logs = np.log(rounds) - host_speed(8)  # (draws, cell or baseline, rounds)
    correlation = np.corrcoef(logs[:, 0, :].ravel(), logs[:, 1, :].ravel())[0, 1]
    assert correlation == pytest.approx(ROUND_SHARE, abs=0.03)
    ratios = logs[:, 0, :] - logs[:, 1, :]
    assert ratios.std() == pytest.approx(REPEAT_LOG_SD * math.sqrt(2 * (1 - ROUND_SHARE)), rel=0.05)


def test_paired_a_a_cells_are_rarely_faster_or_slower_and_mostly_the_same_once_decided():
    assert_kept_rates(simulated_verdicts(20261128, PAIRED_ROUNDS, 0.0, in_pairs=True), None)


@pytest.mark.parametrize(("shift", "right"), [(0.05, Verdict.FASTER), (-0.05, Verdict.SLOWER)])
def test_a_five_percent_shift_gets_its_direction_paired(shift, right):
    verdicts = simulated_verdicts(31 + int(shift * 100), PAIRED_ROUNDS, shift, in_pairs=True)
    assert_kept_rates(verdicts, right)
    assert not DIRECTIONS - {right} & set(verdicts)


@pytest.mark.parametrize(("shift", "right"), [(0.05, Verdict.FASTER), (-0.05, Verdict.SLOWER)])
def test_unpaired_verdicts_miss_the_direction_rate_with_two_and_a_half_times_the_rounds(
    shift, right
):
    verdicts = simulated_verdicts(
        53 + int(shift * 100), UNPAIRED_ROUNDS, shift, in_pairs=False, cells=UNPAIRED_CELLS
    )
    assert sum(v is right for v in verdicts) / len(verdicts) < 0.60


@pytest.mark.parametrize(
    ("shift", "right"), [(0.0, None), (0.05, Verdict.FASTER), (-0.05, Verdict.SLOWER)]
)
def test_the_adaptive_looks_on_paired_rounds_keep_the_rates_within_the_budget(shift, right):
    rng = np.random.default_rng(20261129 + int(shift * 100))
    points = A_A_POINTS if right is None else CELLS
    drawn = [simulated_rounds(rng, ADAPTIVE_BUDGET, shift) for _ in range(points)]
    values, baseline = (np.stack([pair[side] for pair in drawn]) for side in (0, 1))
    looks = look_rounds(3, ADAPTIVE_BUDGET)
    found = simulate(values, baseline, looks, MIN_EFFECT_PCT, MARGIN_PCT, in_pairs=True)
    assert_kept_rates(list(found.verdicts), right)
    assert found.rounds.mean() < 0.75 * ADAPTIVE_BUDGET
