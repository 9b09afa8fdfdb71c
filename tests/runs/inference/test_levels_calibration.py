"""A bisection step's placement (runs/inference/levels.py through judge_between),
calibrated by simulation at this machine's spread: a commit either at good's level or
at the bad ref's, 5 % apart, rounds of 10 s select-only points spreading by 4.5 % (log
sd; docs/benchmarks-archive.md, "A 5 % regression on 64 commits"), looks after 3, 6, ... and 96
rounds. Wrong placements stay within the odds' 5 % plus two binomial standard errors,
with the change known exactly and with it measured as step 0 leaves it (its standard
error CHANGE_PRECISION of the change); nearly every step is decided, in at most half
the rounds a fixed design placing a commit against the change's middle needs at the
same error rates (about 67 a side here).
"""

import math

import numpy as np
import pytest
from scipy.stats import norm

from runs.analysis.sequential import judge_between
from runs.analysis.verdicts import Question, Verdict
from runs.bisection.steps import CHANGE_PRECISION
from runs.inference.stats import ALPHA

ROUND_LOG_SD = 0.045
CHANGE_LOG = math.log(0.95)
LOOKS = (3, 6, 12, 24, 48, 96)
STEPS = 300
BOUND = ALPHA + 2 * math.sqrt(ALPHA * (1 - ALPHA) / STEPS)


def middle_design_rounds() -> float:
    """Rounds a side for a one-sided test against the middle of the change, wrong at
    most ALPHA on either level: half the change at the sum of the two normal quantiles."""
    z = 2 * norm.isf(ALPHA)
    return 2 * (z * ROUND_LOG_SD / (abs(CHANGE_LOG) / 2)) ** 2


def placed(at_change: bool, change_known: bool, seed: int) -> tuple[Verdict, int]:
    """One simulated step: its final placement and the rounds it took."""
    rng = np.random.default_rng(seed)
    change_log, change_se = CHANGE_LOG, 0.0
    if not change_known:
        change_se = CHANGE_PRECISION * abs(CHANGE_LOG)
        change_log = min(CHANGE_LOG + rng.normal(0, change_se), math.log(0.995))
    level = CHANGE_LOG if at_change else 0.0
    values = np.exp(rng.normal(level, ROUND_LOG_SD, LOOKS[-1]))
    baseline = np.exp(rng.normal(0.0, ROUND_LOG_SD, LOOKS[-1]))
    for rounds in LOOKS:
        question = Question(list(values[:rounds]), list(baseline[:rounds]), True)
        (answer,) = judge_between([question], 100 * math.expm1(change_log), change_se)
        if answer.verdict is not Verdict.UNDECIDED:
            return answer.verdict, rounds
    return Verdict.UNDECIDED, LOOKS[-1]


@pytest.mark.parametrize("change_known", [True, False], ids=["change known", "from step 0"])
def test_commits_at_either_level_are_placed_wrongly_at_most_at_the_odds_rate(change_known):
    bad = [placed(True, change_known, seed) for seed in range(STEPS)]
    good = [placed(False, change_known, 10_000 + seed) for seed in range(STEPS)]

    wrong_bad = sum(verdict is Verdict.SAME for verdict, _ in bad) / STEPS
    wrong_good = sum(verdict is Verdict.SLOWER for verdict, _ in good) / STEPS
    assert wrong_bad <= BOUND and wrong_good <= BOUND, (wrong_bad, wrong_good)
    decided = [v is not Verdict.UNDECIDED for v, _ in bad + good]
    assert sum(decided) / len(decided) >= 0.95
    mean_rounds = np.mean([rounds for _, rounds in bad + good])
    assert mean_rounds <= middle_design_rounds() / 2, (mean_rounds, middle_design_rounds())
