"""How sure a change of a counter is: a rate ratio with its 95 % interval and p-value.

Three tests, one result shape (`RateRatio`), so every mover sits in one
Benjamini-Hochberg family and ranks on one scale:

- `repeat_ratios`, for bytes and times (not counts of events): Welch's t-test on
  the logs of the repeats' rates (runs/inference/stats.py);
- `dispersed_count_ratio`, for events both sides counted plenty of: the ratio
  of the two totals' rates, its variance the Poisson one times the dispersion
  the repeats show (quasi-Poisson: never below Poisson's), judged on Student's t
  with the repeats' degrees of freedom. Counting noise and the drift between
  repeats both count, and a rare event's Poisson noise is not mistaken for a
  change as Welch on a few repeats' logs would, nor a steady count's tiny
  spread for certainty;
- `count_ratio`, for events one side counted few of or none: the exact
  two-sample Poisson test on the totals, i.e. the conditional binomial test of
  one side's share of all events given each side's exposure (transactions or
  seconds). Four blocks read against none in 17,000 transactions a side is
  p = 0.125. Its totals are first divided by the dispersion the repeats show
  (`pooled_dispersion`, never below 1): 30, 1 and 1 blocks read (a cold first
  repeat) against 4, 0 and 0 are not Poisson counts, and tested as 32 against 4
  they made "blocks read -88 %" a mover of synchronous_commit.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import special
from scipy import stats as scipy_stats

from runs.inference import stats


@dataclass(frozen=True)
class RateRatio:
    """Compared rate over baseline rate: the estimate and its 95 % interval (`high` is inf
    when the baseline counted nothing, `ratio` too), the two-sided p and the test's name."""

    ratio: float
    low: float
    high: float
    p: float
    test: str

    @property
    def least_change(self) -> float:
        """The smallest change on the log scale the interval allows (0 when it holds 1):
        effect and evidence in one number, so a huge change on two events does not outrank
        a certain one of a third."""
        if self.low > 1:
            return math.log(self.low)
        if self.high < 1:
            return -math.log(self.high) if self.high > 0 else math.inf
        return 0.0

    @property
    def finite(self) -> bool:
        return math.isfinite(self.ratio) and self.ratio > 0


def repeat_ratios(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> list[RateRatio | None]:
    """Welch on the logs of each repeat's rate, for every (values, baseline) pair in one
    vectorised pass; None below two repeats a side or with a rate that is not positive."""
    return [
        None
        if found is None
        else RateRatio(
            1 + found.pct / 100,
            1 + found.ci_low_pct / 100,
            1 + found.ci_high_pct / 100,
            found.p,
            "Welch t on log rates",
        )
        for found in stats.relative_differences(pairs)
    ]


def _dispersion(counts: list[float], exposures: list[float]) -> tuple[float, int]:
    """Pearson's chi-square over its degrees of freedom for one side's repeats against
    their pooled rate (how many times the Poisson variance they vary by), and those df."""
    rate = sum(counts) / sum(exposures)
    chi_square = sum(
        (count - rate * exposure) ** 2 / (rate * exposure)
        for count, exposure in zip(counts, exposures, strict=True)
    )
    return chi_square, len(counts) - 1


def pooled_dispersion(sides: Sequence[tuple[Sequence[float], Sequence[float]]]) -> float:
    """How many times the Poisson variance the repeats vary by, pooled over the
    (counts, exposures) of the sides that counted something and have two repeats;
    never below 1."""
    chi_square, df = 0.0, 0
    for counts, exposures in sides:
        if sum(counts) > 0 and len(counts) >= 2:
            side_chi, side_df = _dispersion(list(counts), list(exposures))
            chi_square, df = chi_square + side_chi, df + side_df
    return max(1.0, chi_square / df) if df else 1.0


def dispersed_count_ratio(
    counts: list[float],
    exposures: list[float],
    base_counts: list[float],
    base_exposures: list[float],
) -> RateRatio:
    """Quasi-Poisson: log of the rates' ratio, variance dispersion x (1/total + 1/base
    total), the dispersion pooled over both sides' repeats and never below 1."""
    own_chi, own_df = _dispersion(counts, exposures)
    base_chi, base_df = _dispersion(base_counts, base_exposures)
    df = own_df + base_df
    dispersion = max(1.0, (own_chi + base_chi) / df)
    total, base_total = sum(counts), sum(base_counts)
    estimate = math.log((total / sum(exposures)) / (base_total / sum(base_exposures)))
    se = math.sqrt(dispersion * (1 / total + 1 / base_total))
    # scipy.special's Student t (stdtr, stdtrit): the distribution objects cost a
    # millisecond a call, and a cell tests some forty counters.
    p = float(2 * special.stdtr(df, -abs(estimate) / se))
    half = float(special.stdtrit(df, 1 - stats.ALPHA / 2)) * se
    return RateRatio(
        math.exp(estimate),
        math.exp(estimate - half),
        math.exp(estimate + half),
        p,
        "quasi-Poisson t",
    )


def count_ratio(count: int, exposure: float, base_count: int, base_exposure: float) -> RateRatio:
    """The exact conditional test of two Poisson totals: given all `count + base_count`
    events, the compared side's share is binomial with the share of the exposure under
    equal rates. Its Clopper-Pearson interval maps to the rate ratio."""
    total = count + base_count
    expected = exposure / (exposure + base_exposure)
    if total == 0:
        return RateRatio(1.0, 0.0, math.inf, 1.0, "exact Poisson")
    p = float(scipy_stats.binomtest(count, total, expected).pvalue)
    # Clopper-Pearson from the beta quantiles (binomtest's proportion_ci finds the same
    # bounds by root finding, a hundred times slower).
    tail = stats.ALPHA / 2
    low = float(special.betaincinv(count, total - count + 1, tail)) if count else 0.0
    high = float(special.betaincinv(count + 1, total - count, 1 - tail)) if count < total else 1.0
    odds = base_exposure / exposure

    def ratio_of(share: float) -> float:
        return math.inf if share >= 1 else share / (1 - share) * odds

    estimate = math.inf if base_count == 0 else (count / exposure) / (base_count / base_exposure)
    return RateRatio(
        estimate,
        ratio_of(low),
        ratio_of(high),
        p,
        "exact Poisson",
    )
