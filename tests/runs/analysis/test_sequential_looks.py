"""One look of the adaptive rule (runs/analysis/sequential.py, judge_look): points with
different numbers of rounds at once, latency's direction, and the rank-based answer
for rounds that are not log-normal; and a bisection step's look (judge_between)."""

import numpy as np
import pytest

from runs.analysis.sequential import judge_between, judge_look, look_levels
from runs.analysis.verdicts import Question, Verdict

MIN_EFFECT_PCT, MARGIN_PCT = 1.0, 5.0


def level_at(rounds: int):
    (first, *_rest) = look_levels((rounds, 4 * rounds))
    return first


def steady(mean: float, n: int, seed: int, cv: float = 0.01) -> list[float]:
    return list(np.random.default_rng(seed).normal(mean, mean * cv, n))


def spread(median: float, n: int, seed: int, log_sd: float) -> list[float]:
    """Log-normal rounds, as tps on a busy machine spread."""
    return list(np.random.default_rng(seed).lognormal(np.log(median), log_sd, n))


def test_points_with_a_round_fewer_are_judged_in_one_look_like_on_their_own():
    full = Question(steady(2000, 6, 1), steady(1000, 6, 2), True)
    one_failed = Question(steady(1000, 5, 3), steady(1000, 6, 4), True)
    level = level_at(6)

    together = judge_look([full, one_failed], level, MIN_EFFECT_PCT, MARGIN_PCT)

    assert [a.verdict for a in together] == [Verdict.FASTER, Verdict.SAME]
    alone = judge_look([one_failed], level, MIN_EFFECT_PCT, MARGIN_PCT)[0]
    assert together[1].same_interval_pct == pytest.approx(alone.same_interval_pct)


def test_a_latency_that_rose_is_worse_and_one_that_fell_is_better():
    level = level_at(6)
    rose = Question(steady(4.0, 6, 5), steady(2.0, 6, 6), False)
    fell = Question(steady(1.0, 6, 7), steady(2.0, 6, 8), False)

    answers = judge_look([rose, fell], level, MIN_EFFECT_PCT, MARGIN_PCT)

    assert [a.verdict for a in answers] == [Verdict.WORSE, Verdict.BETTER]
    assert answers[0].sentence.startswith("worse by ") and 95 < answers[0].pct < 105


def test_an_outlier_round_gets_the_rank_based_answer_and_says_so():
    baseline = steady(1000, 12, 9)
    values = [*steady(1000, 11, 10), 3000.0]  # one round three times the others
    level = level_at(12)

    (answer,) = judge_look([Question(values, baseline, True)], level, MIN_EFFECT_PCT, MARGIN_PCT)

    assert "rank-based (this cell: " in answer.sentence
    assert answer.pct == pytest.approx(0.0, abs=2.0), "the outlier does not move the shift"
    assert answer.verdict is Verdict.SAME


def test_log_normal_rounds_keep_the_welch_answer():
    level = level_at(12)
    (answer,) = judge_look(
        [Question(steady(1000, 12, 11), steady(1000, 12, 12), True)],
        level,
        MIN_EFFECT_PCT,
        MARGIN_PCT,
    )
    assert answer.rank_because == "" and "rank-based" not in answer.sentence


def test_placed_between_two_levels_a_commit_as_bad_and_one_as_good_are_decided():
    """A bisection step with a -93 % change at this machine's spread of 2 s points (about
    30 %): after three rounds a commit as slow as the bad ref is at the changed level
    ("slower") and one as fast as good at the first cell's ("same"); the numbers are
    against good itself."""
    good = spread(1000, 3, 11, log_sd=0.3)
    as_bad, as_good = spread(70, 3, 12, log_sd=0.3), spread(1000, 3, 16, log_sd=0.3)

    slower, same = judge_between(
        [Question(as_bad, good, True), Question(as_good, good, True)], -93.0
    )

    assert (slower.verdict, same.verdict) == (Verdict.SLOWER, Verdict.SAME)
    assert slower.sentence.startswith("at the changed level (-93.0 %): -9")
    assert same.sentence.startswith("at the first cell's level, not -93.0 %: ")
    assert slower.sentence.endswith(":1") and same.sentence.split("; odds ")[1].startswith("1:")
    low, high = slower.interval_pct
    assert low < slower.pct < high


def test_a_commit_halfway_stays_undecided_and_a_faster_one_is_at_the_first_level():
    good = spread(1000, 12, 14, log_sd=0.05)
    halfway, faster = spread(265, 12, 15, log_sd=0.05), spread(1300, 12, 17, log_sd=0.05)

    undecided, same = judge_between(
        [Question(halfway, good, True), Question(faster, good, True)], -93.0
    )

    assert undecided.verdict is Verdict.UNDECIDED and same.verdict is Verdict.SAME
    assert undecided.sentence.startswith(
        "undecided between the first cell's level and -93.0 %: -73"
    )


def test_a_change_level_drifted_by_a_fifth_places_the_culprit_but_good_does_not_drift():
    """Step 0 measured -93 %; under other load the culprit's step measures -88 %, a fifth
    of the change (log scale) short, with tight rounds: within LEVEL_TOLERANCE, it is at
    the changed level. A commit 8 % slower than good in its own rounds is not at good's
    level (good is measured beside it, so no drift is tolerated there)."""
    good = spread(1000, 12, 31, log_sd=0.03)
    drifted_bad, slower_than_good = spread(120, 12, 32, log_sd=0.03), spread(920, 12, 33, 0.03)

    slower, between = judge_between(
        [Question(drifted_bad, good, True), Question(slower_than_good, good, True)], -93.0
    )

    assert (slower.verdict, between.verdict) == (Verdict.SLOWER, Verdict.UNDECIDED)


def test_a_rise_in_latency_is_placed_at_the_worse_level():
    base = spread(2.0, 6, 21, log_sd=0.05)
    (answer,) = judge_between([Question(spread(3.0, 6, 22, log_sd=0.05), base, False)], 50.0)
    assert answer.verdict is Verdict.WORSE


def test_rounds_without_spread_leave_the_odds_unknown():
    (answer,) = judge_between([Question([500.0, 500.0], [1000.0, 1000.0], True)], -50.0)
    assert answer.verdict is Verdict.UNDECIDED and answer.log_odds is None
