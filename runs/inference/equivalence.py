"""Same within a margin, and the rounds that would decide an undecided cell.

- "Same within ±m %" is two one-sided tests (TOST) on the log ratio at ALPHA:
  the whole 1 - 2 ALPHA interval of the difference of log means lies inside
  ±log(1 + m), so the ratio interval lies inside [1 / (1 + m), 1 + m], within
  ±m % both ways.
- An undecided cell gets the rounds (one more repeat a side each) after which,
  if the estimate and the spreads stayed as observed, its interval would either
  fit inside the margin or exclude no difference beyond the minimum effect. A
  cell compared in pairs (runs/inference/paired.py) counts the spread of its
  rounds' log ratios over one more pair per round, at n - 1 df.
"""

import math
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runs.inference.stats import ALPHA, MAX_REPEATS_ADVISED

DEFAULT_MARGIN_PCT = 5.0
MIN_MARGIN_PCT = 0.1
MAX_MARGIN_PCT = 50.0


def margin_log(margin_pct: float) -> float:
    """The equivalence bound on the log ratio for a margin of ±`margin_pct` %."""
    return math.log1p(margin_pct / 100.0)


def within_margin(interval: tuple[float, float] | None, margin_pct: float) -> bool:
    """A 1 - 2 ALPHA interval of the log ratio inside ±log(1 + m): TOST says "same"."""
    if interval is None:
        return False
    bound = margin_log(margin_pct)
    return -bound <= interval[0] and interval[1] <= bound


@dataclass(frozen=True)
class Spread:
    """What an undecided cell looked like: its log estimate and each side's log sd and n;
    `paired`: `sd` and `n` are its rounds' log ratios' (the base side's are unused)."""

    log_estimate: float
    sd: float
    n: int
    base_sd: float
    base_n: int
    paired: bool = False


def rounds_to_decide(spread: Spread, margin_pct: float, min_effect_pct: float) -> int | None:
    """More rounds until the cell would be decided at this estimate; None: more than
    MAX_REPEATS_ADVISED, or no number of rounds (an estimate between the margin and the
    minimum effect is neither)."""
    estimate = abs(spread.log_estimate)
    can_be_same = estimate < margin_log(margin_pct)
    can_differ = estimate > 0 and math.expm1(estimate) * 100.0 >= min_effect_pct
    if not (can_be_same or can_differ):
        return None
    more = np.arange(1, MAX_REPEATS_ADVISED + 1)
    se, df = _future_error(spread, more)
    if not np.any(se > 0):  # no spread on either side: the estimate is exact
        return None
    same = can_be_same & (estimate + stats.t.ppf(1 - ALPHA, df) * se <= margin_log(margin_pct))
    differ = can_differ & (estimate - stats.t.ppf(1 - ALPHA / 2, df) * se > 0)
    decided = np.flatnonzero(same | differ)
    return int(more[decided[0]]) if decided.size else None


def _future_error(spread: Spread, more: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The standard error of the log estimate and its df after each number of `more`
    rounds, at the spreads observed."""
    if spread.paired:
        pairs = spread.n + more
        return spread.sd / np.sqrt(pairs), (pairs - 1).astype(float)
    n_a, n_b = spread.n + more, spread.base_n + more
    part_a, part_b = spread.sd**2 / n_a, spread.base_sd**2 / n_b
    with np.errstate(divide="ignore", invalid="ignore"):
        # Welch-Satterthwaite, as stats.welch_df, for every number of rounds at once.
        df = (part_a + part_b) ** 2 / (part_a**2 / (n_a - 1) + part_b**2 / (n_b - 1))
    return np.sqrt(part_a + part_b), df


def parse_margin(raw: str | None) -> float:
    """The equivalence margin in percent from user input; ValueError with the fix otherwise."""
    if raw is None or str(raw).strip() == "":
        return DEFAULT_MARGIN_PCT
    try:
        value = float(str(raw).strip().lstrip("±").rstrip("%"))
    except ValueError:
        raise ValueError(
            f"margin must be a number of percent such as 5 or 2.5, not {raw!r}"
        ) from None
    if math.isnan(value) or not MIN_MARGIN_PCT <= value <= MAX_MARGIN_PCT:
        raise ValueError(
            f"margin must be between {MIN_MARGIN_PCT:g} and {MAX_MARGIN_PCT:g} (percent)"
        )
    return value
