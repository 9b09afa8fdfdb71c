"""A bisection step's placement (runs/inference/levels.py through judge_between),
calibrated by simulation at this machine's spread: a commit either at good's level or
at the bad ref's, 5 % apart, rounds of 10 s select-only points spreading by 4.5 % (log
sd; docs/benchmarks.md, "A 5 % regression on 64 commits"), looks after 3, 6, ... and 96
rounds. Wrong placements stay within the odds' 5 % plus two binomial standard errors,
with the change known exactly and with it measured as step 0 leaves it (its standard
error CHANGE_PRECISION of the change); nearly every step is decided, in at most half
the rounds a fixed design placing a commit against the change's middle needs at the
same error rates (about 67 a side here).

A round's two runs (the commit's and good's, back to back) share part of their spread:
the machine's state of the moment (a correlation of about 0.6 on one 2-CPU VM,
docs/benchmarks.md). The steps test the rounds' ratios, paired: with no such sharing
that holds the error rates too, and with it it needs far fewer rounds than Welch's
unpaired difference would.
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
SHARED = 0.6


def middle_design_rounds() -> float:
    """Rounds a side for a one-sided test against the middle of the change, wrong at
    most ALPHA on either level: half the change at the sum of the two normal quantiles."""
    z = 2 * norm.isf(ALPHA)
    return 2 * (z * ROUND_LOG_SD / (abs(CHANGE_LOG) / 2)) ** 2


def placed(
    at_change: bool, change_known: bool, seed: int, shared: float = 0.0, paired: bool = True
) -> tuple[Verdict, int]:
    """One simulated step: its final placement and the rounds it took. `shared`: the part
    of each round's log variance its two runs have in common."""
    rng = np.random.default_rng(seed)
    change_log, change_se = CHANGE_LOG, 0.0
    if not change_known:
        change_se = CHANGE_PRECISION * abs(CHANGE_LOG)
        change_log = min(CHANGE_LOG + rng.normal(0, change_se), math.log(0.995))
    level = CHANGE_LOG if at_change else 0.0
    common = rng.normal(0.0, ROUND_LOG_SD * math.sqrt(shared), LOOKS[-1])
    own_sd = ROUND_LOG_SD * math.sqrt(1.0 - shared)
    values = np.exp(level + common + rng.normal(0.0, own_sd, LOOKS[-1]))
    baseline = np.exp(common + rng.normal(0.0, own_sd, LOOKS[-1]))
    for rounds in LOOKS:
        question = Question(list(values[:rounds]), list(baseline[:rounds]), True)
        change_pct = 100 * math.expm1(change_log)
        (answer,) = judge_between([question], change_pct, change_se, paired=paired)
        if answer.verdict is not Verdict.UNDECIDED:
            return answer.verdict, rounds
    return Verdict.UNDECIDED, LOOKS[-1]


@pytest.mark.parametrize("shared", [0.0, SHARED], ids=["rounds independent", "rounds shared"])
@pytest.mark.parametrize("change_known", [True, False], ids=["change known", "from step 0"])
def test_commits_at_either_level_are_placed_wrongly_at_most_at_the_odds_rate(change_known, shared):
    bad = [placed(True, change_known, seed, shared) for seed in range(STEPS)]
    good = [placed(False, change_known, 10_000 + seed, shared) for seed in range(STEPS)]

    wrong_bad = sum(verdict is Verdict.SAME for verdict, _ in bad) / STEPS
    wrong_good = sum(verdict is Verdict.SLOWER for verdict, _ in good) / STEPS
    assert wrong_bad <= BOUND and wrong_good <= BOUND, (wrong_bad, wrong_good)
    decided = [v is not Verdict.UNDECIDED for v, _ in bad + good]
    assert sum(decided) / len(decided) >= 0.95
    mean_rounds = np.mean([rounds for _, rounds in bad + good])
    assert mean_rounds <= middle_design_rounds() / 2, (mean_rounds, middle_design_rounds())


def test_pairing_a_rounds_runs_takes_their_shared_spread_out_of_the_rounds_needed():
    def mean_rounds(paired: bool) -> float:
        steps = [placed(seed % 2 == 0, False, 20_000 + seed, SHARED, paired) for seed in range(200)]
        return float(np.mean([rounds for _, rounds in steps]))

    paired, unpaired = mean_rounds(True), mean_rounds(False)
    # The error's variance falls to 1 - SHARED of Welch's; the rounds less (the change's
    # own error and the looks' steps stay): 15.0 against 23.3 when this was written.
    assert paired <= 0.7 * unpaired, (paired, unpaired)
