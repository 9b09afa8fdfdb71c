"""Same within a margin, and the rounds that would decide an undecided cell.

- "Same within ±m %" is two one-sided tests (TOST) on the log ratio at ALPHA:
  the whole 1 - 2 ALPHA interval of the difference of log means lies inside
  ±log(1 + m), so the ratio interval lies inside [1 / (1 + m), 1 + m], within
  ±m % both ways.
- An undecided cell gets the rounds (one more repeat a side each) after which,
  at the spreads observed, its interval would be narrow enough to decide the
  question still open: "same" while its 90 % interval still reaches inside the
  margin, sized as if the true difference were 0 (the 90 % interval's half
  width within the margin); else "different", sized as if the true difference
  were the minimum effect (the 95 % interval's half width under it). Never at the
  observed estimate: an A/A's estimate is noise, and sizing at it promises a
  difference. A cell compared in pairs (runs/inference/paired.py) counts the
  spread of its rounds' log ratios over one more pair per round, at n - 1 df.
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


@dataclass(frozen=True)
class RoundsToDecide:
    """What more rounds could show an undecided cell: `outcome` SAME_IF_NONE (the
    interval still reaches inside the margin), DIFFERENT_IF_MIN_EFFECT, or NEITHER
    (its interval lies between the margin and the minimum effect); `rounds` None:
    NEITHER, or more than MAX_REPEATS_ADVISED."""

    outcome: str
    rounds: int | None


SAME_IF_NONE = "same"
DIFFERENT_IF_MIN_EFFECT = "different"
NEITHER = "neither"


def rounds_to_decide(spread: Spread, margin_pct: float, min_effect_pct: float) -> RoundsToDecide:
    """The rounds after which the cell's interval would be narrow enough to decide the
    outcome its interval still allows, sized at the effect asked about (0 for "same",
    the minimum effect for "different"), never at the observed estimate."""
    estimate = abs(spread.log_estimate)
    se_now, df_now = _future_error(spread, np.zeros(1))
    bound = margin_log(margin_pct)
    min_effect = math.log1p(min_effect_pct / 100.0)
    reaches_margin = estimate - float(stats.t.ppf(1 - ALPHA, df_now[0]) * se_now[0]) <= bound
    reaches_min_effect = estimate + float(stats.t.ppf(1 - ALPHA / 2, df_now[0]) * se_now[0]) >= (
        min_effect
    )
    more = np.arange(1, MAX_REPEATS_ADVISED + 1)
    se, df = _future_error(spread, more)
    if reaches_margin:
        narrow = stats.t.ppf(1 - ALPHA, df) * se <= bound
        return RoundsToDecide(SAME_IF_NONE, _first(more, narrow))
    if reaches_min_effect and min_effect > 0:
        narrow = stats.t.ppf(1 - ALPHA / 2, df) * se < min_effect
        return RoundsToDecide(DIFFERENT_IF_MIN_EFFECT, _first(more, narrow))
    return RoundsToDecide(NEITHER, None)


def _first(more: np.ndarray, narrow: np.ndarray) -> int | None:
    """The first number of rounds whose interval is narrow enough (None: none up to the cap)."""
    found = np.flatnonzero(narrow)
    return int(more[found[0]]) if found.size else None


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
