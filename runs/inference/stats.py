"""Statistics over repeats: summaries, differences to a baseline, BH and power.

Pure functions over plain numbers (scipy.stats does the distributions); the
pages, the API and the exports all read their numbers from here.

- A point (one run at one client count) is summarised over its repeats: n,
  the geometric mean with the 95 % confidence interval of the mean of the logs
  (Student's t) taken back with exp, so it never reaches zero and agrees with
  the comparisons below, which work on logs too; median and sample standard
  deviation beside it. Values that are not all positive (a count of 0) are
  summarised by the arithmetic mean, its interval cut at zero when no value is
  negative; `Summary.method` says which.
- A compared cell is judged on log values: Welch's t-test on the logs gives a
  p-value and a 95 % interval for the difference of log means, so
  `exp(interval) - 1` is a sound interval for the ratio of (geometric) means.
- p-values of one table are adjusted together with Benjamini-Hochberg
  (the verdicts themselves: runs/analysis/verdicts.py).
- Power (noncentral t) gives the minimum detectable effect of the repeats at
  hand and how many repeats a verdict at the minimum effect would need.
"""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

CONFIDENCE = 0.95
ALPHA = 1 - CONFIDENCE
POWER = 0.80
FDR_Q = 0.05
MIN_REPEATS = 3
DEFAULT_MIN_EFFECT_PCT = 1.0
MAX_MIN_EFFECT_PCT = 50.0
# Beyond this many repeats per run the advice is "more than MAX_REPEATS_ADVISED".
MAX_REPEATS_ADVISED = 1000


GEOMETRIC = "geometric"
ARITHMETIC = "arithmetic"


@dataclass(frozen=True)
class Summary:
    """One metric of one point over its repeats; spread fields are None with one repeat.

    `mean` and its interval are geometric (`method`) where every value is positive,
    arithmetic otherwise; `arithmetic_mean` is kept beside it for the exports."""

    n: int
    mean: float
    median: float
    sd: float | None
    ci_low: float | None
    ci_high: float | None
    log_sd: float | None
    mde_pct: float | None
    method: str = GEOMETRIC
    arithmetic_mean: float = 0.0

    @property
    def cv(self) -> float | None:
        """Coefficient of variation (sd / arithmetic mean), None without a spread."""
        if self.sd is None or not self.arithmetic_mean:
            return None
        return self.sd / abs(self.arithmetic_mean)


@dataclass(frozen=True)
class Difference:
    """`values` against `baseline`: ratio of geometric means - 1, in percent, with its CI."""

    pct: float
    ci_low_pct: float
    ci_high_pct: float
    p: float
    # The 1 - 2 ALPHA interval of the difference of log means (the equivalence test's).
    log_equivalence: tuple[float, float] = (0.0, 0.0)


def positive_logs(values: Sequence[float] | np.ndarray) -> np.ndarray | None:
    """The values' natural logs; None when there are none or one is not positive."""
    data = np.asarray(values, dtype=float)
    return np.log(data) if data.size and np.all(data > 0) else None


def mean_interval(values: np.ndarray) -> tuple[float, float]:
    """The CONFIDENCE interval of the mean (Student's t, n - 1 degrees of freedom)."""
    half = stats.t.ppf(1 - ALPHA / 2, values.size - 1) * stats.sem(values)
    mean = float(values.mean())
    return mean - half, mean + half


def summarize(values: Sequence[float]) -> Summary | None:
    """n, mean, median, sd, CI of the mean and MDE of the measured values; None if empty.

    The mean and its CI are geometric where every value is positive (module docstring)."""
    data = np.asarray([v for v in values if v is not None], dtype=float)
    if data.size == 0:
        return None
    arithmetic, median = float(data.mean()), float(np.median(data))
    logs = positive_logs(data)
    method = GEOMETRIC if logs is not None else ARITHMETIC
    if data.size < 2:
        return Summary(1, arithmetic, median, None, None, None, None, None, method, arithmetic)
    mean = float(np.exp(logs.mean())) if logs is not None else arithmetic
    if logs is not None:
        log_low, log_high = mean_interval(logs)
        low, high = math.exp(log_low), math.exp(log_high)
    else:
        low, high = mean_interval(data)
        if data.min() >= 0:
            low = max(low, 0.0)
    log_sd = float(logs.std(ddof=1)) if logs is not None else None
    mde = None if log_sd is None else detectable_effect_pct(log_sd, data.size, log_sd, data.size)
    sd = float(data.std(ddof=1))
    return Summary(data.size, mean, median, sd, low, high, log_sd, mde, method, arithmetic)


def welch_df(var_a: float, n_a: int, var_b: float, n_b: int) -> float:
    """Welch-Satterthwaite degrees of freedom (pooled df when both variances are 0)."""
    a, b = var_a / n_a, var_b / n_b
    if a + b == 0:
        return float(n_a + n_b - 2)
    return (a + b) ** 2 / (a**2 / (n_a - 1) + b**2 / (n_b - 1))


def power(noncentrality: float, df: float) -> float:
    """Power of a two-sided t-test at level ALPHA for this noncentrality (noncentral t)."""
    critical = stats.t.ppf(1 - ALPHA / 2, df)
    upper = float(stats.nct.sf(critical, df, noncentrality))
    # The opposite tail is negligible for a positive noncentrality, and scipy
    # returns NaN for it far out: count it only when it is a number.
    lower = float(stats.nct.cdf(-critical, df, noncentrality))
    return upper + (lower if math.isfinite(lower) else 0.0)


@functools.lru_cache(maxsize=4096)
def noncentrality_for_power(df: float) -> float:
    """The noncentrality at which a two-sided t-test of `df` reaches POWER at ALPHA."""
    # With df >= 1 (two repeats a side) POWER is reached below a noncentrality of 30.
    return optimize.brentq(lambda nc: power(nc, df) - POWER, 0.0, 30.0)


def detectable_effect_pct(sd_a: float, n_a: int, sd_b: float, n_b: int) -> float | None:
    """Smallest ratio difference (percent, upwards) detected with POWER at ALPHA.

    `sd_*` are standard deviations of log values; None below two repeats a side.
    """
    if n_a < 2 or n_b < 2:
        return None
    se = math.sqrt(sd_a**2 / n_a + sd_b**2 / n_b)
    df = welch_df(sd_a**2, n_a, sd_b**2, n_b)
    return math.expm1(noncentrality_for_power(round(df, 1)) * se) * 100.0


def repeats_needed(log_sd: float, min_effect_pct: float) -> int | None:
    """Repeats per run for POWER to find a true `min_effect_pct` significant; None: too many.

    The verdict also asks the estimate to reach the minimum effect, which an
    estimate of a true difference of exactly that size does about half the time:
    this is the repeats for significance, a larger true difference gets the word.
    """
    if log_sd == 0:
        return MIN_REPEATS
    if min_effect_pct <= 0:
        return None
    effect = math.log1p(min_effect_pct / 100.0)

    def enough(n: int) -> bool:
        return power(effect / (log_sd * math.sqrt(2.0 / n)), 2 * n - 2) >= POWER

    if not enough(MAX_REPEATS_ADVISED):
        return None
    low, high = MIN_REPEATS, MAX_REPEATS_ADVISED  # power grows with n: bisect
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def _moments(samples: list[np.ndarray]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Means, sample standard deviations and sizes of several samples, as arrays."""
    return (
        np.array([sample.mean() for sample in samples]),
        np.array([sample.std(ddof=1) for sample in samples]),
        np.array([sample.size for sample in samples]),
    )


def relative_differences(
    pairs: Sequence[tuple[Sequence[float], Sequence[float]]],
) -> list[Difference | None]:
    """Welch's t-test on logs for each (values, baseline) pair, in one vectorised pass.

    None for a pair below two repeats a side or with non-positive values.
    """
    usable: list[tuple[int, np.ndarray, np.ndarray]] = []
    for i, (values, base) in enumerate(pairs):
        logs, base_logs = positive_logs(values), positive_logs(base)
        if logs is not None and base_logs is not None and min(logs.size, base_logs.size) >= 2:
            usable.append((i, logs, base_logs))
    if not usable:
        return [None] * len(pairs)
    mean_a, sd_a, n_a = _moments([logs for _i, logs, _base in usable])
    mean_b, sd_b, n_b = _moments([base for _i, _logs, base in usable])
    with np.errstate(divide="ignore", invalid="ignore"):  # zero spread: handled below
        test = stats.ttest_ind_from_stats(mean_a, sd_a, n_a, mean_b, sd_b, n_b, equal_var=False)
    estimate, se = mean_a - mean_b, np.sqrt(sd_a**2 / n_a + sd_b**2 / n_b)
    df = np.array([welch_df(*row) for row in zip(sd_a**2, n_a, sd_b**2, n_b, strict=True)])
    half = stats.t.ppf(1 - ALPHA / 2, df) * se
    narrow = stats.t.ppf(1 - ALPHA, df) * se
    # No spread on either side: the difference is exact (never so with real measurements).
    p = np.where(se > 0, test.pvalue, np.where(estimate == 0, 1.0, 0.0))
    found: list[Difference | None] = [None] * len(pairs)
    for row, (i, _logs, _base) in enumerate(usable):
        found[i] = Difference(
            pct=math.expm1(estimate[row]) * 100.0,
            ci_low_pct=math.expm1(estimate[row] - half[row]) * 100.0,
            ci_high_pct=math.expm1(estimate[row] + half[row]) * 100.0,
            p=float(p[row]),
            log_equivalence=(
                float(estimate[row] - narrow[row]),
                float(estimate[row] + narrow[row]),
            ),
        )
    return found


def relative_difference(values: Sequence[float], baseline: Sequence[float]) -> Difference | None:
    """One pair of `relative_differences`."""
    return relative_differences([(values, baseline)])[0]


def adjust_p_values(p_values: Sequence[float]) -> list[float]:
    """Benjamini-Hochberg adjusted p-values (q-values) of one table's comparisons."""
    if not p_values:
        return []
    return [float(q) for q in stats.false_discovery_control(np.asarray(p_values), method="bh")]


def parse_min_effect(raw: str | None) -> float:
    """The minimum effect in percent from user input; ValueError with the fix otherwise."""
    if raw is None or str(raw).strip() == "":
        return DEFAULT_MIN_EFFECT_PCT
    try:
        value = float(str(raw).strip().rstrip("%"))
    except ValueError:
        raise ValueError(
            f"min_effect must be a number of percent such as 1 or 2.5, not {raw!r}"
        ) from None
    if not 0 <= value <= MAX_MIN_EFFECT_PCT or math.isnan(value):
        raise ValueError(f"min_effect must be between 0 and {MAX_MIN_EFFECT_PCT:g} (percent)")
    return value
