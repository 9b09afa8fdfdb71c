"""Where a point's throughput becomes steady: the window that counts starts there.

A cold cache or a growing table makes tps ramp before it settles; a fixed
warm-up guesses how long that takes. Here the per-second values say it: the
steady window starts at the first second from which on what remains is flat:
its least-squares drift is under MAX_DRIFT_PCT_PER_MIN (5 %/min: over a
one-minute window tps then moves by less than the few percent its repeats vary
by anyway; a faster drift makes the number depend on when the window ended),
and moves tps by less than FLAT_SHARE over the whole remainder (2 %: so a long
window's mean stays within about 1 % of the level at its middle, the default
minimum effect).

The drift is an effect size, and a significance test alone never makes a
window flat: a trend "not significant" in a short noisy window is often a large
one (a 12 s window whose tps doubled has p = 0.02 in its last 7 s). What the
test keeps is the noise it knows: per-second counts of a few transactions (or
of a sampled log's lines) scatter by 1/sqrt(count) alone, which moves a short
window's fitted drift too, so the drift must exceed the bound by more than
COUNTING_Z standard errors of that counting noise before it counts (a one-sided
z-test at 5 % of "drift above the bound"). The values' own scatter never widens the
bound: a window is not flat because it is noisy.

The seconds before the steady window are skipped and recorded, with whether
tps rose through them (a warm-up) or fell (a drift down, no warm-up). A point
where no start leaves at least MIN_STEADY_SHARE of its seconds flat never
settled, and is flagged.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MAX_DRIFT_PCT_PER_MIN = 5.0
FLAT_SHARE = 0.02
COUNTING_Z = 1.645
MIN_STEADY_SHARE = 0.5
MIN_STEADY_SECONDS = 5


@dataclass(frozen=True)
class Drift:
    """The least-squares trend of a stretch of tps: percent of its mean per minute, p."""

    pct_per_min: float
    p: float


@dataclass(frozen=True)
class SteadyState:
    """The steady window of one point: `start` samples skipped, ending `skipped_s` seconds
    into the point (the one settle time the warning and the chart's band both give);
    `rose` whether tps rose through them; `settled` False when the point never became flat
    (then `start` is 0 and every sample is kept); `drift` the trend of all of them."""

    start: int
    seconds: int
    settled: bool
    skipped_s: float = 0.0
    rose: bool = True
    drift: Drift = Drift(0.0, 1.0)


def drift_of(times: np.ndarray, values: np.ndarray) -> Drift:
    """The trend of `values` over `times` (seconds), in percent of their mean per minute."""
    mean = float(values.mean())
    if np.ptp(values) == 0 or mean <= 0:
        return Drift(0.0, 1.0)
    fit = stats.linregress(times, values)
    return Drift(float(fit.slope * 60 / mean * 100), float(fit.pvalue))


def counting_drift_se(times: np.ndarray, counting_cv: float) -> float:
    """The standard error, in percent per minute, that counting noise alone (a CV of
    `counting_cv` in each sample) gives a least-squares drift over `times`."""
    spread = float(((times - times.mean()) ** 2).sum())
    return counting_cv / math.sqrt(spread) * 60 * 100 if spread else math.inf


def is_flat(times: np.ndarray, values: np.ndarray, counting_cv: float = 0.0) -> bool:
    """The drift is not above the bound by more than counting noise explains."""
    drift = drift_of(times, values)
    return abs(drift.pct_per_min) < drift_bound(times) + COUNTING_Z * counting_drift_se(
        times, counting_cv
    )


def drift_bound(times: np.ndarray) -> float:
    """The largest drift, in percent per minute, a stretch over `times` may have to be flat:
    MAX_DRIFT_PCT_PER_MIN, or FLAT_SHARE over the stretch when that is less."""
    minutes = float(times[-1] - times[0]) / 60 if times.size > 1 else 0.0
    over_stretch = FLAT_SHARE * 100 / minutes if minutes else math.inf
    return min(MAX_DRIFT_PCT_PER_MIN, over_stretch)


def steady_state(
    per_second: Sequence[float], times: Sequence[float] | None = None, counting_cv: float = 0.0
) -> SteadyState:
    """The first sample from which the rest of `per_second` (tps each second, measured at
    `times`, seconds into the point at each sample's end: 1, 2, ... by default) is flat.
    `counting_cv`: how much each sample scatters from counting alone (1/sqrt(count))."""
    values = np.asarray(per_second, dtype=float)
    at = np.arange(1, values.size + 1, dtype=float) if times is None else np.asarray(times, float)
    whole = drift_of(at, values)
    latest = values.size - max(MIN_STEADY_SECONDS, int(np.ceil(values.size * MIN_STEADY_SHARE)))
    for start in range(0, latest + 1):
        if is_flat(at[start:], values[start:], counting_cv):
            skipped_s = float(at[start - 1]) if start else 0.0
            rose = bool(values[:start].mean() <= values[start:].mean()) if start else True
            return SteadyState(start, values.size, True, skipped_s, rose, whole)
    return SteadyState(0, values.size, False, drift=whole)
