"""Statistics over repeats: summaries, log-Welch differences, BH, power, and a calibration
on simulated data of known distribution (fixed seed); the three-way answers: test_verdicts.py."""

import math

import numpy as np
import pytest
from scipy import stats as scipy_stats

from runs.analysis.verdicts import Question, Verdict, judge
from runs.inference import stats

SIGNIFICANT = {Verdict.FASTER, Verdict.SLOWER}
BASE_TPS, CV = 1000.0, 0.05


def simulated_verdicts(
    rng: np.random.Generator, repeats: int, shift: float, tables: int, cells_per_table: int = 1
) -> list[Verdict]:
    """Verdicts of `tables` simulated comparisons: normal tps, sd = CV of the baseline mean.

    Each table holds `cells_per_table` cells judged together (BH across them).
    """
    verdicts = []
    for _ in range(tables):
        questions = [
            Question(
                values=rng.normal(BASE_TPS * (1 + shift), BASE_TPS * CV, repeats),
                baseline=rng.normal(BASE_TPS, BASE_TPS * CV, repeats),
                higher_is_better=True,
            )
            for _ in range(cells_per_table)
        ]
        verdicts += [j.verdict for j in judge(questions, min_effect_pct=1.0)]
    return verdicts


def significant_share(verdicts: list[Verdict]) -> float:
    return sum(v in SIGNIFICANT for v in verdicts) / len(verdicts)


def min_max_rule_share(rng: np.random.Generator, repeats: int, shift: float, trials: int) -> float:
    """How often the removed "beyond spread" rule (min-max ranges do not overlap) fired."""
    fired = 0
    for _ in range(trials):
        a = rng.normal(BASE_TPS * (1 + shift), BASE_TPS * CV, repeats)
        b = rng.normal(BASE_TPS, BASE_TPS * CV, repeats)
        fired += a.min() > b.max() or a.max() < b.min()
    return fired / trials


@pytest.mark.parametrize("repeats", [3, 5])
def test_a_a_comparisons_are_significant_at_most_at_the_nominal_five_percent(repeats):
    rng = np.random.default_rng(20261122 + repeats)
    share = significant_share(simulated_verdicts(rng, repeats, shift=0.0, tables=3000))
    # Calibrated, not merely conservative: near the nominal level, never above it.
    assert 0.02 <= share <= 0.05


@pytest.mark.parametrize("repeats", [3, 5, 8])
def test_a_a_tables_keep_false_discoveries_below_five_percent_of_points(repeats):
    rng = np.random.default_rng(7 + repeats)
    verdicts = simulated_verdicts(rng, repeats, shift=0.0, tables=150, cells_per_table=12)
    assert significant_share(verdicts) <= 0.05


def test_the_removed_min_max_rule_fails_the_a_a_bound():
    rng = np.random.default_rng(3)
    assert min_max_rule_share(rng, repeats=3, shift=0.0, trials=3000) > 0.05
    assert min_max_rule_share(rng, repeats=2, shift=0.0, trials=3000) > 0.25


@pytest.mark.parametrize(("repeats", "at_least"), [(5, 0.75), (8, 0.90)])
def test_a_ten_percent_shift_at_cv_five_percent_is_detected(repeats, at_least):
    rng = np.random.default_rng(11 + repeats)
    verdicts = simulated_verdicts(rng, repeats, shift=0.10, tables=3000)
    assert significant_share(verdicts) >= at_least
    assert Verdict.SLOWER not in verdicts  # significant always in the right direction here


def test_the_removed_min_max_rule_misses_the_ten_percent_shift_at_five_repeats():
    rng = np.random.default_rng(5)
    assert min_max_rule_share(rng, repeats=5, shift=0.10, trials=3000) < 0.75


def test_summary_is_the_geometric_mean_with_the_t_interval_of_the_logs_taken_back():
    values = [1000.0, 1050.0, 980.0, 1020.0, 990.0]
    summary = stats.summarize(values)
    logs = np.log(values)
    low, high = scipy_stats.t.interval(0.95, 4, loc=logs.mean(), scale=scipy_stats.sem(logs))
    assert (summary.n, summary.median, summary.method) == (5, 1000.0, "geometric")
    assert summary.mean == pytest.approx(scipy_stats.gmean(values))
    assert summary.arithmetic_mean == 1008.0
    assert summary.sd == pytest.approx(np.std(values, ddof=1))
    assert (summary.ci_low, summary.ci_high) == (
        pytest.approx(math.exp(low)),
        pytest.approx(math.exp(high)),
    )


def test_a_wide_spread_never_gives_an_interval_below_zero():
    # The Student-t interval of these means is about -481 to 3,279 (a first-day report).
    summary = stats.summarize([120.0, 2900.0, 380.0])
    assert summary.ci_low > 0
    assert summary.ci_low < summary.mean < summary.ci_high


def test_counts_with_a_zero_are_summarised_arithmetically_and_cut_at_zero():
    summary = stats.summarize([0.0, 0.0, 3.0])
    assert (summary.method, summary.mean) == ("arithmetic", 1.0)
    assert summary.ci_low == 0.0
    assert summary.ci_high == pytest.approx(
        1 + scipy_stats.t.ppf(0.975, 2) * scipy_stats.sem([0, 0, 3])
    )


def test_one_repeat_has_a_mean_but_no_spread_interval_or_mde():
    summary = stats.summarize([1234.5])
    assert summary.mean == summary.median == 1234.5
    assert summary.sd is summary.ci_low is summary.mde_pct is None


def test_difference_is_the_ratio_of_geometric_means_with_the_welch_interval_on_logs():
    new, base = [1100.0, 1150.0, 1120.0], [1000.0, 1040.0, 1010.0]
    difference = stats.relative_difference(new, base)
    test = scipy_stats.ttest_ind(np.log(new), np.log(base), equal_var=False)
    low, high = test.confidence_interval(0.95)
    ratio = scipy_stats.gmean(new) / scipy_stats.gmean(base)
    assert difference.pct == pytest.approx((ratio - 1) * 100)
    assert difference.ci_low_pct == pytest.approx(math.expm1(low) * 100)
    assert difference.ci_high_pct == pytest.approx(math.expm1(high) * 100)
    assert difference.p == pytest.approx(test.pvalue)


def test_latency_verdicts_say_better_or_worse():
    lower = Question([0.80, 0.81, 0.79, 0.80], [1.0, 1.01, 0.99, 1.0], higher_is_better=False)
    higher = Question([1.2, 1.21, 1.19, 1.2], [1.0, 1.01, 0.99, 1.0], higher_is_better=False)
    assert [j.verdict for j in judge([lower, higher], 1.0)] == [Verdict.BETTER, Verdict.WORSE]


def test_a_significant_difference_below_the_minimum_effect_is_the_same_within_the_margin():
    # 0.5 % more, measured very precisely: significant, but smaller than 1 %.
    question = Question([1005.0, 1005.1, 1004.9], [1000.0, 1000.1, 999.9], higher_is_better=True)
    (judged,) = judge([question], min_effect_pct=1.0)
    assert judged.q < 0.001
    assert judged.verdict is Verdict.SAME
    (judged,) = judge([question], min_effect_pct=0.25)
    assert judged.verdict is Verdict.FASTER


def test_benjamini_hochberg_adjusts_across_the_table():
    p_values = [0.01, 0.02, 0.03, 0.04, 0.5]
    assert stats.adjust_p_values(p_values) == pytest.approx(
        scipy_stats.false_discovery_control(p_values, method="bh")
    )
    assert stats.adjust_p_values(p_values)[0] == pytest.approx(0.05)


def test_too_few_repeats_says_how_many_the_spread_needs():
    question = Question([1100.0, 1150.0], [1000.0, 1040.0], higher_is_better=True)
    (judged,) = judge([question], min_effect_pct=5.0)
    assert judged.verdict is Verdict.TOO_FEW_REPEATS
    assert judged.q is None and judged.difference is not None
    log_sd = math.sqrt(
        (np.var(np.log([1100.0, 1150.0]), ddof=1) + np.var(np.log([1000.0, 1040.0]), ddof=1)) / 2
    )
    assert judged.repeats_needed == stats.repeats_needed(log_sd, 5.0)
    assert f"needs {judged.repeats_needed} repeats" in judged.explanation


def test_one_repeat_cannot_say_how_many_are_needed():
    (judged,) = judge([Question([1100.0], [1000.0], True)], min_effect_pct=1.0)
    assert judged.verdict is Verdict.TOO_FEW_REPEATS and judged.difference is None
    assert "one repeat shows no spread" in judged.explanation


def test_repeats_needed_reaches_the_target_power_and_one_fewer_does_not():
    log_sd, effect = 0.05, 5.0
    n = stats.repeats_needed(log_sd, effect)
    nc = math.log1p(effect / 100) / (log_sd * math.sqrt(2 / n))
    nc_fewer = math.log1p(effect / 100) / (log_sd * math.sqrt(2 / (n - 1)))
    assert stats.power(nc, 2 * n - 2) >= 0.8 > stats.power(nc_fewer, 2 * n - 4)


def test_minimum_detectable_effect_is_detected_with_eighty_percent_power():
    rng = np.random.default_rng(99)
    summary = stats.summarize(rng.normal(BASE_TPS, BASE_TPS * CV, 5))
    mde = stats.detectable_effect_pct(CV, 5, CV, 5)
    # With a log sd of CV, a shift of exactly the MDE is found about 80 % of the time.
    verdicts = []
    for _ in range(1500):
        a = BASE_TPS * np.exp(rng.normal(0, CV, 5))
        b = BASE_TPS * np.exp(rng.normal(math.log1p(mde / 100), CV, 5))
        verdicts += [j.verdict for j in judge([Question(b, a, True)], 0.0)]
    assert significant_share(verdicts) == pytest.approx(0.8, abs=0.04)
    assert summary.mde_pct is not None and summary.mde_pct > 0


@pytest.mark.parametrize("raw", ["abc", "-1", "80", "nan"])
def test_bad_minimum_effect_names_the_field_and_the_range(raw):
    with pytest.raises(ValueError, match="min_effect"):
        stats.parse_min_effect(raw)


def test_minimum_effect_defaults_to_one_percent_and_accepts_a_percent_sign():
    assert stats.parse_min_effect(None) == stats.parse_min_effect("") == 1.0
    assert stats.parse_min_effect("2.5 %") == 2.5


def test_repeats_needed_find_the_minimum_effect_significant_eighty_percent_of_the_time():
    """Brute force: simulate the advised repeats at a true difference of the minimum effect."""
    rng = np.random.default_rng(2026)
    log_sd, effect = 0.05, 5.0
    n = stats.repeats_needed(log_sd, effect)

    def significant_rate(repeats: int, trials: int = 1500) -> float:
        verdicts = []
        for _ in range(trials):
            base = BASE_TPS * np.exp(rng.normal(0, log_sd, repeats))
            new = BASE_TPS * np.exp(rng.normal(math.log1p(effect / 100), log_sd, repeats))
            verdicts += [j.verdict for j in judge([Question(new, base, True)], 0.0)]
        return significant_share(verdicts)

    assert significant_rate(n) == pytest.approx(0.8, abs=0.04)
    assert significant_rate(max(stats.MIN_REPEATS, n // 2)) < 0.7


@pytest.mark.parametrize(
    ("values", "baseline"),
    [([0.0, 0.5, 0.4], [0.5, 0.5, 0.6]), ([0.0, 0.5], [0.5]), ([0.4, 0.5], [-0.1, 0.5, 0.6])],
)
def test_a_repeat_at_or_below_zero_gets_no_verdict_whatever_the_repeats(values, baseline):
    (judged,) = judge([Question(values, baseline, False)], 1.0)
    assert (judged.difference, judged.q, judged.verdict) == (None, None, None)


def test_identical_repeats_on_both_sides_give_an_exact_difference_and_no_nan():
    same = Question([1000.0] * 3, [1000.0] * 3, True)
    faster = Question([1100.0] * 3, [1000.0] * 3, True)
    judged_same, judged_faster = judge([same, faster], 1.0)
    assert (judged_same.difference.pct, judged_same.q) == (0.0, 1.0)
    assert judged_same.verdict is Verdict.SAME
    difference = judged_faster.difference
    assert difference.ci_low_pct == difference.pct == difference.ci_high_pct == pytest.approx(10.0)
    assert judged_faster.verdict is Verdict.FASTER
    summary = stats.summarize([1000.0] * 3)
    assert (summary.sd, summary.mde_pct) == (0, 0)
    assert (summary.ci_low, summary.ci_high) == (pytest.approx(1000), pytest.approx(1000))


@pytest.mark.filterwarnings("ignore:Precision loss:RuntimeWarning")  # scipy, on the 0 sd side
def test_identical_repeats_on_one_side_are_welch_as_scipy_computes_it():
    values, baseline = [1100.0, 1150.0, 1120.0, 1090.0], [1000.0, 1000.0]
    difference = stats.relative_difference(values, baseline)
    test = scipy_stats.ttest_ind(np.log(values), np.log(baseline), equal_var=False)
    low, high = test.confidence_interval(0.95)
    assert difference.p == pytest.approx(test.pvalue)
    assert difference.ci_low_pct == pytest.approx(math.expm1(low) * 100)
    assert difference.ci_high_pct == pytest.approx(math.expm1(high) * 100)
    (judged,) = judge([Question(values, baseline, True)], 1.0)
    assert judged.verdict is Verdict.TOO_FEW_REPEATS and judged.repeats_needed is not None


def test_a_minimum_effect_of_zero_asks_for_the_minimum_repeats_without_a_count():
    (judged,) = judge([Question([1100.0, 1150.0], [1000.0, 1040.0], True)], 0.0)
    assert judged.verdict is Verdict.TOO_FEW_REPEATS and judged.repeats_needed is None
    assert judged.explanation == (
        "needs at least 3 repeats per run; with a minimum effect of 0 there is no difference "
        "to size the repeats for"
    )
