"""How much the host's windows disagree at one rate, and what the answer says of it.

On a quiet host two 60 s windows at one offered rate give nearly the same percentile;
on a shared or cloud VM they can differ severalfold (docs/benchmarks.md: 17.3, 19.4
and 42.3 ms at 975 tps). A capacity's floor (the highest rate whose windows passed) and
ceiling (the lowest whose windows failed) may then be a lucky or an unlucky window: the
bracket held the true capacity in 100 % of seeded searches on a steady host (100 seeds,
knees 1.5 to 2.5, 60 s windows), but in 82 to 92 % where every window's latencies were
scaled by e^N(0, 0.1), 70 to 74 % at 0.3 and 62 to 67 % at 0.5
(tests/runs/inference/test_capacity_spread.py; docs/decisions.md). From SPREAD_WIDENS
on, the interval is widened to where a line through the windows crosses the limit
(runs/inference/capacity_crossing.py), and the answer says so.

The spread is pooled over the rates probed more than once: each window's own estimate
of the percentile (windows the host stalled in are set aside before), the sd of their
logs about their rate's mean, once it rests on at least MIN_SPREAD_DEGREES degrees of
freedom.
"""

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

# A standard normal's median absolute value, its upper quartile.
MEDIAN_ABSOLUTE_NORMAL = float(stats.norm.ppf(0.75))
# Degrees of freedom (windows less rates) before the spread is said.
MIN_SPREAD_DEGREES = 2
# The sd of the log percentile from which a capacity's interval is widened by a line
# through its windows: the bracket alone held the capacity in 91 to 98 % of the seeded
# searches at a spread of 0.05, 82 to 92 % at 0.1; a steady host's windows spread under
# 0.05 (the percentile's own sampling), where nothing changes.
SPREAD_WIDENS = 0.05
# The one-sided level at which a rate's windows lie clear of the limit (`clear_of_limit`):
# the line's (runs/inference/capacity_crossing.py).
CLEAR_QUANTILE = 0.995


@dataclass(frozen=True)
class WindowSpread:
    """The pooled sd of a window's log percentile about its rate's mean, the windows and
    the rates it rests on."""

    sd: float
    windows: int
    rates: int

    @property
    def percent(self) -> float:
        """The spread as a factor, in percent: one sd of the log is x e^sd."""
        return 100.0 * math.expm1(self.sd)


def window_spread(rates: Sequence[Sequence[float | None]]) -> WindowSpread | None:
    """The spread of the windows' estimates (ms; each rate's counted windows, None where a
    window gave none); None below MIN_SPREAD_DEGREES.

    Robust to a window the host stalled in that the stall rule could not tell: each
    window's log deviates from its rate's mean by sd x sqrt((n - 1) / n) for n windows at
    the rate, and the sd is the median of those deviations, so scaled, over a normal's
    median absolute value (MEDIAN_ABSOLUTE_NORMAL). Pooled squares let one stalled window
    (a p99 ten times its rate's other) set the spread of every rate."""
    scaled: list[float] = []
    repeated = 0
    for estimates in rates:
        logs = [math.log(e) for e in estimates if e is not None and e > 0]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        shrink = math.sqrt((len(logs) - 1) / len(logs))
        scaled.extend(abs(value - mean) / shrink for value in logs)
        repeated += 1
    if len(scaled) - repeated < MIN_SPREAD_DEGREES:
        return None
    return WindowSpread(statistics.median(scaled) / MEDIAN_ABSOLUTE_NORMAL, len(scaled), repeated)


def spread_widens(spread: WindowSpread | None) -> bool:
    """Whether the windows spread enough for the interval to be widened by a line."""
    return spread is not None and spread.sd >= SPREAD_WIDENS


def window_spread_said(
    spread: WindowSpread | None,
    percentile: str,
    unbounded: Sequence[str] = (),
    cleared: Sequence[str] = (),
    line_estimated: bool = False,
) -> str:
    """What the answer says of a spread that widened its interval ("" where it did not);
    `unbounded`: the sides ("below", "above") nothing bounded, where the interval runs to
    the lowest or the highest probe; `cleared`: the sides a rate whose windows lie clear of
    the limit bounded where the line did not; `line_estimated`: the capacity's estimate is
    where the line meets the limit."""
    if spread is None or not spread_widens(spread):
        return ""
    # `line_estimated`: the estimate is where the line meets the limit too.
    found = "the capacity and its interval are" if line_estimated else "the interval is"
    said = (
        f"the {percentile} of repeated windows at one rate spread {spread.percent:.0f} % here "
        f"({spread.windows} windows at {spread.rates} rates), so {found} where a line "
        f"through the windows near the capacity crosses the limit, not only the floor and "
        f"the ceiling"
    )
    if unbounded:
        sides = " or ".join(unbounded)
        said += (
            f"; the windows spread too much for the line to bound it {sides}, so it runs to "
            "the probes' end there, the lowest probe or the throughput one reached (longer "
            "windows or a quieter host narrow it)"
        )
    if cleared:
        sides = " and ".join(cleared)
        said += (
            f"; {sides}, where the line did not fit the curve (a sharp knee), the interval "
            f"ends at the nearest rate whose windows lie clear of the limit"
        )
    return said


def clear_of_limit(
    estimates_ms: Sequence[float | None], limit_ms: float, spread: WindowSpread, side: int
) -> bool:
    """Whether a rate's windows (`estimates_ms`, its counted windows' estimates) lie below
    the limit (`side` -1) or above it (+1) by more than their mean's uncertainty: their
    mean log percentile at least the t quantile (CLEAR_QUANTILE, the spread's degrees of
    freedom) of `spread`'s sd over the root of their count from the log of the limit. On
    a curve that grows with the rate, a rate clear below bounds the capacity from below,
    one clear above from above, whatever the curve's shape between (a sharp knee, where a
    line through the windows near it fits neither part)."""
    return windows_to_clear(estimates_ms, limit_ms, spread, side, 0) == 0


def windows_to_clear(
    estimates_ms: Sequence[float | None],
    limit_ms: float,
    spread: WindowSpread,
    side: int,
    most: int,
) -> int | None:
    """How many more windows like these (their mean and the spread unchanged, each adding a
    degree of freedom) would make the rate `clear_of_limit`, up to `most` windows in all:
    0 where it is already, None where `most` would not."""
    logs = [math.log(e) for e in estimates_ms if e is not None and e > 0]
    if not logs or spread.sd <= 0:
        return None
    distance = side * (statistics.fmean(logs) - math.log(limit_ms))
    degrees = spread.windows - spread.rates
    for more in range(max(0, most - len(logs)) + 1):
        count = len(logs) + more
        t = float(stats.t.ppf(CLEAR_QUANTILE, degrees + more))
        if distance >= t * spread.sd / math.sqrt(count):
            return more
    return None
