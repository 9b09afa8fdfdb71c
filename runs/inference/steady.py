"""Where a point's throughput becomes steady: the window that counts starts there.

A cold cache or a growing table makes tps ramp before it settles; a fixed
warm-up guesses how long that takes. Here the per-second series says it: the
steady window starts at the first second from which on the least-squares trend
of what remains moves tps by less than FLAT_SHARE over that remainder, or is
not significant at TREND_P (noise, not drift). The seconds before it are
skipped and recorded. A point where no such start leaves at least
MIN_STEADY_SHARE of its seconds never settled, and is flagged.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

FLAT_SHARE = 0.02
TREND_P = 0.01
MIN_STEADY_SHARE = 0.5
MIN_STEADY_SECONDS = 5


@dataclass(frozen=True)
class SteadyState:
    """The steady window of one point: `start` seconds skipped; `settled` False when the
    point never became flat (then `start` is 0 and the whole series is kept)."""

    start: int
    seconds: int
    settled: bool


def trend_share(values: np.ndarray) -> tuple[float, float]:
    """(how much the least-squares trend moves the values over the series, as a share of
    their mean; the trend's p-value)."""
    fit = stats.linregress(np.arange(values.size, dtype=float), values)
    mean = float(values.mean())
    moved = fit.slope * (values.size - 1) / mean if mean else float("inf")
    return float(moved), float(fit.pvalue)


def is_flat(values: np.ndarray) -> bool:
    """No trend worth the name: small over the series, or indistinguishable from noise."""
    if np.ptp(values) == 0:
        return True
    moved, p = trend_share(values)
    return abs(moved) < FLAT_SHARE or p >= TREND_P


def steady_state(per_second: Sequence[float]) -> SteadyState:
    """The first second from which the rest of `per_second` (tps each second) is flat."""
    values = np.asarray(per_second, dtype=float)
    latest = values.size - max(MIN_STEADY_SECONDS, int(np.ceil(values.size * MIN_STEADY_SHARE)))
    for start in range(0, latest + 1):
        if is_flat(values[start:]):
            return SteadyState(start, values.size, True)
    return SteadyState(0, values.size, False)
