"""Change points in a sequence: binary segmentation on the two-sample t statistic, with an
analytic (Bonferroni) null, computed incrementally as values arrive.

The best split of a segment is where Student's t of the mean before against the mean
after is largest; it counts when that t's two-sided p-value, times the number of
splits it was the best of (Bonferroni: the chance that any of them scores as high on
a segment with no change is at most that), is below `max_p`; then each side is
searched again. No random numbers: the same values give the same change points on
every run and every machine (a permutation test with a fixed seed still depends on the
generator's stream; docs/decisions.md says why not).

Incremental: a series' change points, once found, stay (`known`); a new value only
searches the segment after the last of them. `change_points` replays the values' arrival
one by one from there, so a detection that was skipped or run twice finds the same.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

MAX_P = 0.0003
MIN_SEGMENT = 3
CONFIDENCE = 0.95


@dataclass(frozen=True)
class ChangePoint:
    """A change before `index` (the first value after it): both sides' means, the change
    in % with its 95 % interval (Welch), and the pooled t's p-value between its two sides
    as they are now (not the Bonferroni-bounded one that found it: smaller)."""

    index: int
    before: float
    after: float
    low_percent: float
    high_percent: float
    p_value: float

    @property
    def change_percent(self) -> float:
        return (self.after / self.before - 1) * 100 if self.before else float("inf")


def change_points(
    values: Sequence[float],
    known: Sequence[int] = (),
    max_p: float = MAX_P,
    min_segment: int = MIN_SEGMENT,
) -> list[ChangePoint]:
    """Every change point of `values`, described, in order: the `known` ones (found
    before, kept) and those found as the values after the last of them arrived one by one
    (each prefix searched after the last change point found so far)."""
    found = sorted(known)
    first_end = max(found, default=0) + 2 * min_segment
    for end in range(first_end, len(values) + 1):
        found.extend(change_points_after(values[:end], found, max_p, min_segment))
    return describe(values, found)


def change_points_after(
    values: Sequence[float],
    known: Sequence[int],
    max_p: float = MAX_P,
    min_segment: int = MIN_SEGMENT,
) -> list[int]:
    """The indices of the change points in the values after the last of `known`."""
    data = np.asarray(values, dtype=float)
    start = max(known, default=0)
    found: list[int] = []
    _split(data, start, len(data), max_p, min_segment, found)
    return sorted(found)


def describe(values: Sequence[float], indices: Sequence[int]) -> list[ChangePoint]:
    """Each change point's means and interval, its sides being the segments between it and
    its neighbours."""
    data = np.asarray(values, dtype=float)
    ordered = sorted(indices)
    bounds = [0, *ordered, len(data)]
    points = []
    for k, index in enumerate(ordered):
        before, after = data[bounds[k] : index], data[index : bounds[k + 2]]
        low, high = percent_interval(before, after)
        t_value = _t_statistic(before, after)
        p_value = _two_sided_p(t_value, len(before) + len(after) - 2)
        points.append(
            ChangePoint(index, float(before.mean()), float(after.mean()), low, high, float(p_value))
        )
    return points


def beyond_prediction_p(
    before: Sequence[float], value: float, lower_is_worse: bool
) -> float | None:
    """The one-sided p-value of `value` being this much worse than the values `before` it
    predict (Student's prediction interval for one new value: t = (value - mean) /
    (s * sqrt(1 + 1/n)) on n - 1 degrees of freedom); None with fewer than MIN_SEGMENT
    values before it. A single occurrence cannot make a change point (MIN_SEGMENT a side):
    this tells whether it is out of line at all."""
    data = np.asarray(before, dtype=float)
    if len(data) < MIN_SEGMENT:
        return None
    worse_by = float(data.mean() - value) if lower_is_worse else float(value - data.mean())
    spread = float(data.std(ddof=1)) * math.sqrt(1 + 1 / len(data))
    if spread == 0:
        return 0.0 if worse_by > 0 else 1.0
    return float(stats.t.sf(worse_by / spread, len(data) - 1))


def percent_interval(before: np.ndarray, after: np.ndarray) -> tuple[float, float]:
    """The 95 % interval (Welch) of the after mean's change from the before mean, in %."""
    mean_before = float(before.mean())
    difference = float(after.mean() - mean_before)
    var_b = float(before.var(ddof=1)) / len(before) if len(before) > 1 else 0.0
    var_a = float(after.var(ddof=1)) / len(after) if len(after) > 1 else 0.0
    se = math.sqrt(var_a + var_b)
    if se == 0 or mean_before == 0:
        change = difference / mean_before * 100 if mean_before else math.inf
        return change, change
    dof = (var_a + var_b) ** 2 / (
        (var_a**2 / (len(after) - 1) if len(after) > 1 else 0.0)
        + (var_b**2 / (len(before) - 1) if len(before) > 1 else 0.0)
    )
    half = float(stats.t.ppf(0.5 + CONFIDENCE / 2, dof)) * se
    return (difference - half) / mean_before * 100, (difference + half) / mean_before * 100


def _split(
    data: np.ndarray, start: int, end: int, max_p: float, min_segment: int, found: list[int]
) -> None:
    segment = data[start:end]
    if len(segment) < 2 * min_segment or np.ptp(segment) == 0:
        return
    tau, t_value, candidates = best_split(segment, min_segment)
    p_value = min(1.0, _two_sided_p(t_value, len(segment) - 2) * candidates)
    if p_value >= max_p:
        return
    found.append(start + tau)
    _split(data, start, start + tau, max_p, min_segment, found)
    _split(data, start + tau, end, max_p, min_segment, found)


def best_split(data: np.ndarray, min_segment: int = MIN_SEGMENT) -> tuple[int, float, int]:
    """The split index whose pooled two-sample |t| is largest, that t, and how many splits
    were tried; read in O(1) per split from prefix sums."""
    n = len(data)
    centred = data - data.mean()
    sums = np.concatenate([[0.0], np.cumsum(centred)])
    squares = np.concatenate([[0.0], np.cumsum(centred**2)])
    taus = np.arange(min_segment, n - min_segment + 1)
    m, k = taus.astype(float), (n - taus).astype(float)
    sum_x, sum_y = sums[taus], sums[n] - sums[taus]
    mean_x, mean_y = sum_x / m, sum_y / k
    within = (squares[taus] - m * mean_x**2) + (squares[n] - squares[taus] - k * mean_y**2)
    pooled = np.maximum(within, 0.0) / (n - 2)
    with np.errstate(divide="ignore", invalid="ignore"):
        t_values = np.abs(mean_y - mean_x) / np.sqrt(pooled * (1 / m + 1 / k))
    t_values = np.nan_to_num(t_values, nan=0.0, posinf=np.finfo(float).max)
    best = int(np.argmax(t_values))
    return int(taus[best]), float(t_values[best]), len(taus)


def _t_statistic(before: np.ndarray, after: np.ndarray) -> float:
    """Student's pooled two-sample t of the after mean against the before mean."""
    m, k = len(before), len(after)
    within = float(((before - before.mean()) ** 2).sum() + ((after - after.mean()) ** 2).sum())
    if m + k <= 2 or within == 0:
        return 0.0 if before.mean() == after.mean() else math.inf
    pooled = within / (m + k - 2)
    return float(abs(after.mean() - before.mean()) / math.sqrt(pooled * (1 / m + 1 / k)))


def _two_sided_p(t_value: float, dof: int) -> float:
    return float(2 * stats.t.sf(abs(t_value), max(dof, 1)))
