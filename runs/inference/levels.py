"""Which of two known levels a cell sits at: Wald's sequential probability ratio test.

A bisection's commit is, under its model (one change in the range), either at good's
level or at the level the bad ref measured. Testing it against the middle of that
change holds the error for a commit sitting at the middle, which the model says does
not exist, and so needs two to four times the rounds where the change is near the
round-to-round spread (a 5 % change on a host whose rounds spread by 4.5 %: about 67
a side against 17 to 32 on average, tests/runs/inference/test_levels_calibration.py). The
SPRT (Wald 1945) asks the model's question: the odds of "at the changed level"
against "at the first cell's level" given the rounds so far, stopping when they pass
(1 - beta) / alpha or fall below beta / (1 - alpha). Those bounds hold the two error
rates at about alpha and beta whenever the odds are looked at; looking only at the
planned looks makes the errors smaller, not larger.

The scale is not known: the odds use Welch's standard error of the difference of log
means with its Welch-Satterthwaite df, and Student t likelihoods, whose heavier tails
at few rounds keep an underestimated spread from claiming odds it has not earned.
Where the cell's rounds pair with the first cell's (runs/inference/paired.py), the
rounds' log ratios give the difference, its standard error and n - 1 df instead: the
two runs of a round share the host's state of the moment, which the pairing cancels.
Nor is the changed level known exactly (the bad steps measured it with an error): the
changed level's likelihood is widened by that error, so a commit at the true change is
not pushed toward good's level when the bad ref happened to measure twice the change.
"""

import enum
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from runs.inference.stats import positive_logs, welch_df

# How far short of the changed level, as a share of the change (log scale), a cell may sit
# and still be at it: the change was measured in other steps, whose rounds met other load,
# so its level drifts from step to step. The first cell's level needs none: it is
# measured in the same rounds as the cell (docs/decisions.md).
LEVEL_TOLERANCE = 0.25


class Placement(enum.Enum):
    FIRST = "at the first cell's level"
    CHANGED = "at the changed level"
    UNDECIDED = "undecided"


@dataclass(frozen=True)
class LogDifference:
    """A cell's rounds against the first cell's on the log scale: the difference of log
    means, its Welch standard error and Welch-Satterthwaite df."""

    estimate: float
    se: float
    df: float


@dataclass(frozen=True)
class LevelOdds:
    """Where a cell's rounds put it, and the log of the likelihood ratio "at the changed
    level" : "at the first cell's level"."""

    difference: LogDifference
    log_odds: float


def wald_bounds(alpha: float, beta: float) -> tuple[float, float]:
    """(lower, upper) on the log odds: below the lower the cell is at the first cell's
    level (wrong with probability about beta), above the upper at the changed level
    (wrong with probability about alpha)."""
    return math.log(beta / (1.0 - alpha)), math.log((1.0 - beta) / alpha)


def log_difference(values: Sequence[float], baseline: Sequence[float]) -> LogDifference | None:
    """`values` against `baseline` on the log scale; None with fewer than two positive
    values a side or no spread to scale by."""
    logs, base_logs = positive_logs(values), positive_logs(baseline)
    if logs is None or base_logs is None or min(logs.size, base_logs.size) < 2:
        return None
    var, base_var = float(np.var(logs, ddof=1)), float(np.var(base_logs, ddof=1))
    se = math.sqrt(var / logs.size + base_var / base_logs.size)
    if not se > 0:
        return None
    df = welch_df(var, int(logs.size), base_var, int(base_logs.size))
    return LogDifference(float(logs.mean() - base_logs.mean()), se, df)


def paired_log_difference(log_ratios: np.ndarray) -> LogDifference | None:
    """Paired rounds' log ratios as a difference: their mean, sd / sqrt(n) and n - 1 df;
    None below two rounds or with no spread to scale by."""
    if log_ratios.size < 2:
        return None
    se = float(np.std(log_ratios, ddof=1)) / math.sqrt(log_ratios.size)
    if not se > 0:
        return None
    return LogDifference(float(log_ratios.mean()), se, float(log_ratios.size - 1))


def level_odds(difference: LogDifference, change_log: float, change_se: float = 0.0) -> LevelOdds:
    """The log odds that the cell `difference` measured sits at the first cell's level
    moved by `change_log` (a log ratio measured with standard error `change_se`) rather
    than at the first cell's level itself."""
    estimate, se, df = difference.estimate, difference.se, difference.df
    widened = math.hypot(se, change_se)
    at_change = scipy_stats.t.logpdf((estimate - change_log) / widened, df) - math.log(widened)
    at_first = scipy_stats.t.logpdf(estimate / se, df) - math.log(se)
    return LevelOdds(difference, float(at_change - at_first))


def placement(odds: LevelOdds, change_log: float, change_se: float, alpha: float) -> Placement:
    """Where the odds place a cell: past Wald's bounds, at that level, unless its rounds
    say it sits between the two levels (significantly more than LEVEL_TOLERANCE of the
    change short of the changed level for that one, significantly toward it for the
    first; two-sided `alpha`), where neither fits: it stays undecided, as a commit with half
    the change would. A cell beyond the changed level, or on the far side of the first,
    fits the nearer one."""
    lower, upper = wald_bounds(alpha, alpha)
    difference = odds.difference
    critical = float(scipy_stats.t.ppf(1 - alpha / 2, difference.df))
    toward = math.copysign(1.0, change_log)
    tolerated = LEVEL_TOLERANCE * abs(change_log)
    short_of_change = (change_log - difference.estimate) * toward - tolerated
    if odds.log_odds >= upper and short_of_change <= critical * math.hypot(
        difference.se, change_se
    ):
        return Placement.CHANGED
    if odds.log_odds <= lower and difference.estimate * toward <= critical * difference.se:
        return Placement.FIRST
    return Placement.UNDECIDED
