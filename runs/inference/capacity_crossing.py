"""Where a capacity's windows place its crossing when they spread: an interval from a line.

A capacity's floor and ceiling are single windows' verdicts; where repeated windows at one
rate spread (runs/inference/capacity_spread.py), a lucky window passes above the capacity
and an unlucky one fails below it, and the bracket [floor, ceiling] then held the true
capacity in 62 to 82 % of seeded searches (spreads 0.1 to 0.5, knee 2), not 95 %.

Near the capacity the log of a window's percentile grows about linearly with the log of
the rate. Every counted window whose rate lies within `CROSSING_BAND` of the estimate
(rates whose pgbench fell short of the offered rate left out: their percentile is the
queue's, not the curve's) gives a point; a least-squares line through them crosses the
log of the limit, and the rates where the line's t interval of its mean holds the limit
are the crossing's interval (Fieller's: it counts the slope's uncertainty too). Where
the slope is not clearly positive at that level, the interval has no bound on one side
or both; there a rate beyond the bracket whose windows lie clear of the limit bounds it
(runs/inference/capacity_spread.py: a sharp knee, which no line fits), and failing one,
the search probes shoulders (`shoulder_rate`): rates a few window spreads of latency
either side of the estimate, which give the line its leverage.

The level: the t quantile at `CROSSING_QUANTILE` one-sided (a nominal 99 % interval).
The knee's curvature and the search's choice of rates (each from the windows before it)
make the line's nominal level over-claim: at 97.5 % (a nominal 95 %) the seeded searches
held the capacity in 89 to 91 %, at 99.5 % in 93 to 98 % (100 seeds at spreads 0.1 to
0.5, knees 1.5 and 2, tests/runs/inference/test_capacity_spread.py; docs/decisions.md).
"""

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from scipy import stats

from runs.inference.capacity_spread import MEDIAN_ABSOLUTE_NORMAL

# Windows within this factor of the estimate make the line.
CROSSING_BAND = 1.6
# The one-sided t quantile of the line's interval (see the module's docstring).
CROSSING_QUANTILE = 0.995
# A bound beyond this log rate (a billion tps) is no bound.
MAX_LOG_RATE = math.log(1e9)
# A window this many window spreads off the first line is an outlier, left out.
OUTLIER_SPREADS = 3.0
# A line needs this many windows at this many rates.
MIN_LINE_WINDOWS = 4
MIN_LINE_RATES = 3
# Shoulders: the log of the percentile a shoulder's rate is aimed away from the limit,
# in window spreads, with the line's slope bounded to this range (a slope of a log
# percentile on a log rate: TPC-B's knees gave 1.3 to 9, docs/decisions.md) and the
# shoulder kept inside the band.
SHOULDER_SPREADS = 2.0
SHOULDER_SLOPES = (1.5, 6.0)
SHOULDER_BAND_SHARE = 0.8
# The windows a side's shoulders may take before the search gives up bounding it.
MAX_SHOULDER_WINDOWS = 3


@dataclass(frozen=True)
class RateWindows:
    """One offered rate's counted windows' estimates of the percentile (ms; None where a
    window gave none)."""

    offered_tps: float
    estimates_ms: Sequence[float | None]


@dataclass(frozen=True)
class Crossing:
    """The line's crossing of the limit: its interval (tps; None where the line does not
    bound that side), its slope (None where no line could be drawn), the windows and
    rates it rests on, and the rate where the line itself meets the limit (None where the
    line does not bound both sides)."""

    lower: float | None
    upper: float | None
    slope: float | None
    windows: int
    rates: int
    point: float | None = None


def crossing_interval(
    rates: Sequence[RateWindows], limit_ms: float, estimate_tps: float, spread_sd: float
) -> Crossing:
    """The crossing's interval from the windows within CROSSING_BAND of `estimate_tps`;
    windows more than OUTLIER_SPREADS robust spreads off a robust first line (its
    residuals' median absolute value over a normal's, at least a tenth of `spread_sd`, the
    windows' spread at one rate) are left out of the least-squares line: stalls the stall
    rule could not tell."""
    points = [
        (math.log(rate.offered_tps), math.log(value))
        for rate in rates
        if abs(math.log(rate.offered_tps / estimate_tps)) <= math.log(CROSSING_BAND)
        for value in rate.estimates_ms
        if value is not None and value > 0
    ]
    if _drawable(points):
        # A robust first line (the median of the pairwise slopes, Theil-Sen), so that the
        # outliers it is to find do not bend it.
        slope, intercept = _median_slope_line(points)
        residuals = [abs(y - intercept - slope * x) for x, y in points]
        scale = max(statistics.median(residuals) / MEDIAN_ABSOLUTE_NORMAL, spread_sd / 10)
        points = [
            point
            for point, residual in zip(points, residuals, strict=True)
            if residual <= OUTLIER_SPREADS * scale
        ]
    count = len(points)
    distinct = len({x for x, _ in points})
    line = _line(points)
    if line is None:
        return Crossing(None, None, None, count, distinct)
    slope, mean_x, mean_y = line
    sxx = sum((x - mean_x) ** 2 for x, _ in points)
    residual = sum((y - mean_y - slope * (x - mean_x)) ** 2 for x, y in points)
    t = float(stats.t.ppf(CROSSING_QUANTILE, count - 2))
    q = t * t * residual / (count - 2)
    # Rates x (logs) where (mean_y + slope u - log limit)^2 <= q (1/n + u^2/sxx), u = x - mean_x.
    a = slope * slope - q / sxx
    if slope <= 0 or a <= 0:
        return Crossing(None, None, slope, count, distinct)
    d = math.log(limit_ms) - mean_y
    root = math.sqrt(max(0.0, q * (slope * slope / count + d * d / sxx - q / (count * sxx))))
    lower = math.exp(mean_x + (slope * d - root) / a)
    upper = _rate(mean_x + (slope * d + root) / a)
    return Crossing(lower, upper, slope, count, distinct, _rate(mean_x + d / slope))


def _rate(log_rate: float) -> float | None:
    """The rate of a log rate, None past MAX_LOG_RATE: a line barely steeper than its
    uncertainty puts its upper bound that far off (e^800 overflowed a float on a seeded
    host that stalled in a fifth of its windows), and no server's bound lies there."""
    return math.exp(log_rate) if log_rate <= MAX_LOG_RATE else None


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float, float] | None:
    """The least-squares line's slope and the points' means; None with too few points."""
    if not _drawable(points):
        return None
    xs, ys = zip(*points, strict=True)
    return float(stats.linregress(xs, ys).slope), statistics.fmean(xs), statistics.fmean(ys)


def _median_slope_line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Theil and Sen's line: the median of the slopes between points at different rates,
    and the median intercept under it. scipy's theilslopes also computes the slope's
    confidence interval, and warns where a handful of points leave it undefined; its
    siegelslopes (repeated medians) left out other windows, and the seeded searches at a
    spread of 0.3 held the capacity in 92 % instead of 93 (knee 2, 60 seeds)."""
    slopes = [
        (y2 - y1) / (x2 - x1)
        for (x1, y1), (x2, y2) in itertools.combinations(points, 2)
        if x1 != x2
    ]
    slope = statistics.median(slopes)
    return slope, statistics.median(y - slope * x for x, y in points)


def _drawable(points: Sequence[tuple[float, float]]) -> bool:
    """Enough windows at enough rates for a line."""
    return len(points) >= MIN_LINE_WINDOWS and len({x for x, _ in points}) >= MIN_LINE_RATES


def shoulder_rate(estimate_tps: float, spread_sd: float, slope: float | None, side: int) -> float:
    """The rate to probe below (`side` -1) or above (+1) the estimate: where the line, at
    its slope bounded to SHOULDER_SLOPES (the range's middle without a line), puts the
    percentile SHOULDER_SPREADS window spreads away from the limit, inside the band."""
    low, high = SHOULDER_SLOPES
    bounded = min(max(slope if slope is not None else math.sqrt(low * high), low), high)
    distance = min(
        SHOULDER_SPREADS * spread_sd / bounded, SHOULDER_BAND_SHARE * math.log(CROSSING_BAND)
    )
    return estimate_tps * math.exp(side * distance)
