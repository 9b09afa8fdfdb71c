"""Rounds compared in pairs (runs/inference/paired.py and the verdicts, looks and variance
split that use it): each number recomputed from the raw repeats with scipy directly."""

import itertools
import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from runs.analysis.sequential import judge_between, judge_look, look_levels
from runs.analysis.verdicts import Method, Question, Verdict, judge, record_fields
from runs.inference import ranks
from runs.inference.equivalence import Spread, rounds_to_decide
from runs.inference.paired import pair_rounds, paired_detectable_effect_pct
from runs.inference.stats import power
from runs.inference.variance import PointSeconds, paired_variance, variance_split

ROUNDS = list(range(1, 9))
# The host slows mid-experiment (rounds 1-4 at 21-39k tps, rounds 5-8 at 11-19k), and
# each round's two runs share it; the tuned cell is about 5 % faster in every round.
BASE = [21000.0, 30000.0, 39000.0, 25000.0, 11000.0, 19000.0, 15000.0, 13000.0]
RATIOS = [1.052, 1.047, 1.066, 1.061, 1.043, 1.058, 1.049, 1.055]
TUNED = [b * r for b, r in zip(BASE, RATIOS, strict=True)]


def paired_question(values=TUNED, rounds=ROUNDS, baseline=BASE, base_rounds=ROUNDS) -> Question:
    return Question(list(values), list(baseline), True, list(rounds), list(base_rounds))


def test_rounds_either_side_lacks_are_dropped_and_named():
    pairing = pair_rounds(TUNED[:2] + TUNED[3:], [1, 2, 4, 5, 6, 7, 8], BASE, ROUNDS)

    assert pairing.rounds == (1, 2, 4, 5, 6, 7, 8)
    assert pairing.incomplete == (3,)
    assert pairing.describe() == "paired over 7 of 8 rounds; round 3 incomplete"
    assert pair_rounds(TUNED, ROUNDS, BASE, ROUNDS).describe() == "paired over 8 rounds"


def test_a_round_measured_twice_on_one_side_is_not_paired():
    pairing = pair_rounds([1.0, 1.1, 1.2, 1.3], [1, 2, 2, 3], [1.0, 1.0, 1.0], [1, 2, 3])
    assert pairing.rounds == (1, 3)
    assert pairing.incomplete == (2,)


def test_the_paired_verdict_is_student_t_on_the_rounds_log_ratios():
    (judged,) = judge([paired_question()], min_effect_pct=1.0, margin_pct=5.0)

    logs, base_logs = np.log(TUNED), np.log(BASE)
    test = scipy_stats.ttest_rel(logs, base_logs)
    low, high = test.confidence_interval(0.95)
    same_low, same_high = test.confidence_interval(0.90)
    difference = judged.difference
    assert difference is not None
    assert difference.pct == pytest.approx(math.expm1(np.mean(logs - base_logs)) * 100, rel=1e-12)
    assert difference.p == pytest.approx(test.pvalue, rel=1e-9)
    assert difference.ci_low_pct == pytest.approx(math.expm1(low) * 100, rel=1e-9)
    assert difference.ci_high_pct == pytest.approx(math.expm1(high) * 100, rel=1e-9)
    assert difference.log_equivalence == pytest.approx((same_low, same_high), rel=1e-9)
    assert (judged.verdict, judged.method) == (Verdict.FASTER, Method.PAIRED_T)
    fields = record_fields(judged)
    assert (fields["design"], fields["design_note"]) == ("paired", "paired over 8 rounds")
    assert fields["verdict_method"] == "log-paired-t"


def test_pairing_cancels_the_host_slowing_down_that_unpaired_repeats_cannot_see_past():
    (unpaired,) = judge([Question(TUNED, BASE, True)], 1.0, 5.0)
    (paired,) = judge([paired_question()], 1.0, 5.0)

    assert unpaired.verdict is Verdict.UNDECIDED
    assert (unpaired.design, unpaired.design_note) == ("unpaired", "unpaired")
    assert paired.verdict is Verdict.FASTER
    assert paired.difference.ci_low_pct > 4.0  # the rounds' ratios agree within 2 %


def test_an_outlier_round_ratio_is_answered_by_signed_ranks_recomputed_by_hand():
    ratios = [*RATIOS[:5], 1.40, *RATIOS[6:]]
    values = [b * r for b, r in zip(BASE, ratios, strict=True)]
    (judged,) = judge([paired_question(values)], 1.0, 5.0)

    d = np.log(values) - np.log(BASE)
    walsh = sorted((d[i] + d[j]) / 2 for i in range(d.size) for j in range(i, d.size))
    # The exact null distribution of T+ over the 2^8 sign patterns of ranks 1..8.
    sums = [sum(r for r, s in zip(range(1, 9), signs, strict=True) if s) for signs in
            itertools.product((0, 1), repeat=8)]  # fmt: skip
    k = max(c for c in range(1, 37) if sum(t <= c - 1 for t in sums) / len(sums) <= 0.025)
    assert judged.method is Method.SIGNED_RANK
    assert judged.answer.outliers == "round ratios: outlier round 6"
    rank = judged.rank
    assert rank.pct == pytest.approx(math.expm1(np.median(walsh)) * 100, rel=1e-12)
    assert rank.ci_low_pct == pytest.approx(math.expm1(walsh[k - 1]) * 100, rel=1e-12)
    assert rank.ci_high_pct == pytest.approx(math.expm1(walsh[len(walsh) - k]) * 100, rel=1e-12)
    assert rank.p == pytest.approx(scipy_stats.wilcoxon(d).pvalue, rel=1e-12)
    assert "Wilcoxon signed-rank p" in judged.explanation


def test_fewer_than_three_complete_rounds_fall_back_to_unpaired_and_say_so():
    question = paired_question(TUNED[:4], [1, 2, 3, 4], BASE[2:6], [3, 4, 5, 6])
    (judged,) = judge([question], 1.0, 5.0)

    assert judged.method is Method.LOG_WELCH
    assert judged.design == "unpaired"
    assert judged.design_note == (
        "unpaired: 2 complete rounds of 6, fewer than 3 to pair; rounds 1, 2, 5, 6 incomplete"
    )


def test_cells_with_a_round_missing_are_judged_over_the_complete_ones():
    values, rounds = TUNED[:2] + TUNED[3:], [1, 2, 4, 5, 6, 7, 8]
    (judged,) = judge([paired_question(values, rounds)], 1.0, 5.0)
    complete = [0, 1, 3, 4, 5, 6, 7]
    expected = scipy_stats.ttest_rel(np.log(values), np.log(np.asarray(BASE)[complete]))

    assert judged.difference.p == pytest.approx(expected.pvalue, rel=1e-9)
    assert judged.design_note == "paired over 7 of 8 rounds; round 3 incomplete"


def test_rounds_needed_for_a_paired_cell_count_pairs_at_n_minus_one_df():
    spread = Spread(log_estimate=0.01, sd=0.05, n=4, base_sd=0.0, base_n=4, paired=True)
    more = rounds_to_decide(spread, margin_pct=5.0, min_effect_pct=1.0).rounds

    assert more is not None
    pairs = 4 + more
    bound = math.log1p(0.05)
    reach = scipy_stats.t.ppf(0.95, pairs - 1) * 0.05 / math.sqrt(pairs)
    before = scipy_stats.t.ppf(0.95, pairs - 2) * 0.05 / math.sqrt(pairs - 1)
    assert reach <= bound < before


def test_the_paired_detectable_effect_is_the_noncentral_t_at_n_minus_one_df():
    mde = paired_detectable_effect_pct(0.05, 10)
    noncentrality = math.log1p(mde / 100) / (0.05 / math.sqrt(10))
    assert power(noncentrality, 9) == pytest.approx(0.80, abs=1e-6)


def test_a_look_pairs_the_rounds_and_its_interval_is_the_paired_ones_at_its_level():
    level = look_levels((4, 8))[-1]
    (answer,) = judge_look([paired_question()], level, 1.0, 5.0)

    d = np.log(TUNED) - np.log(BASE)
    test = scipy_stats.ttest_1samp(d, 0.0)
    low, high = test.confidence_interval(1 - level.alpha)
    assert answer.verdict is Verdict.FASTER
    assert answer.interval_pct == pytest.approx(
        (math.expm1(low) * 100, math.expm1(high) * 100), rel=1e-9
    )
    assert answer.log_se == pytest.approx(d.std(ddof=1) / math.sqrt(d.size), rel=1e-12)
    assert answer.design == "paired over 8 rounds"
    (unpaired,) = judge_look([Question(TUNED, BASE, True)], level, 1.0, 5.0)
    assert unpaired.verdict is Verdict.UNDECIDED


def test_a_bisection_step_places_a_commit_by_its_paired_rounds():
    slower = [b * (0.93 + 0.004 * (i % 3)) for i, b in enumerate(BASE)]
    (paired,) = judge_between([paired_question(slower)], -7.0, 0.005)
    (unpaired,) = judge_between([Question(slower, BASE, True)], -7.0, 0.005)

    assert paired.verdict is Verdict.SLOWER
    assert paired.design == "paired over 8 rounds"
    assert unpaired.verdict is Verdict.UNDECIDED


def test_the_variance_split_shows_what_pairing_removed():
    rng = np.random.default_rng(3)
    shared = rng.normal(0, 0.05, 30)
    a = np.exp(10 + shared + rng.normal(0, 0.03, 30))
    b = np.exp(10 + shared + rng.normal(0, 0.03, 30))
    pairing = paired_variance([(dict(enumerate(a)), dict(enumerate(b)))])

    d = np.log(a) - np.log(b)
    unpaired = np.log(a).var(ddof=1) + np.log(b).var(ddof=1)
    assert pairing is not None
    assert pairing.paired == pytest.approx(d.var(ddof=1), rel=1e-12)
    assert pairing.unpaired == pytest.approx(unpaired, rel=1e-12)
    assert pairing.round_share == pytest.approx(1 - d.var(ddof=1) / unpaired, rel=1e-12)
    assert 0.6 < pairing.round_share < 0.9  # 0.05^2 / (0.05^2 + 0.03^2) = 0.74 shared
    seconds = [PointSeconds([1000.0 + (5 if t % 2 else -5) for t in range(20)], [None] * 20)]
    split = variance_split([list(a), list(b)], seconds, 10.0, True, pairing)
    assert split is not None
    assert split.compared_between == pytest.approx(split.between_runs - pairing.shared)
    assert "pairing each round with the first cell's removes" in split.advice


def test_the_variance_split_needs_three_complete_rounds_to_pair():
    assert paired_variance([({1: 1.0, 2: 1.1}, {1: 1.0, 2: 1.0, 3: 0.9})]) is None


def test_signed_rank_intervals_beyond_the_exact_size_use_the_normal_approximation():
    rng = np.random.default_rng(9)
    d = rng.normal(0.02, 0.05, ranks.EXACT_SIGNED_RANKS + 1)
    shift = ranks.signed_rank_shift(d, 0.05)
    assert shift.interval is not None
    assert shift.interval[0] < shift.log_shift < shift.interval[1]
