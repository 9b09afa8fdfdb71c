"""Outliers in repeats, the ways they are not log-normal: a repeat far from the others,
or the repeats in two groups.

The log-Welch verdict assumes a point's repeats scatter log-normally around one
value. Two checks on the log values say when they do not:

- an outlier: a repeat whose distance from the median, in MAD units (the
  modified z-score 0.6745 |x - median| / MAD), is beyond what `n` log-normal
  repeats reach once in a hundred samples;
- two groups (bimodal): split at the widest gap between sorted values (each side
  at least a quarter of the repeats and two of them), the gap in units of the
  pooled within-group standard deviation is beyond what `n` log-normal repeats
  reach once in a hundred samples.

Both thresholds are simulated once per `n` (fixed seed), so a log-normal side is
flagged about 1 % of the time whatever its repeats; below MIN_OUTLIER_REPEATS
(MIN_BIMODAL_REPEATS) a MAD (two groups) is not measurable and nothing is flagged.
"""

import functools
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runs.analysis.validity import ValidityWarning

MIN_OUTLIER_REPEATS = 4
MIN_BIMODAL_REPEATS = 6
FLAGGED_SHARE = 0.01
SIMULATED_SAMPLES = 10_000
SIMULATED_UP_TO = 50
SEED = 20261125
# 0.6745 MAD estimates one standard deviation of a normal distribution.
MAD_TO_SD = 0.6745


@dataclass(frozen=True)
class RepeatOutliers:
    """What the checks found in one side's repeats: outlier positions (in the order given)
    and whether they form two groups."""

    outliers: tuple[int, ...] = ()
    bimodal: bool = False

    @property
    def is_log_normal(self) -> bool:
        return not self.outliers and not self.bimodal

    def describe(self) -> str:
        """In words, for a flag next to the number; "" when both checks pass."""
        found = []
        if self.outliers:
            repeats = ", ".join(str(i + 1) for i in self.outliers)
            found.append(f"outlier repeat{'s' if len(self.outliers) > 1 else ''} {repeats}")
        if self.bimodal:
            found.append("repeats in two groups")
        return "; ".join(found)


def modified_z(logs: np.ndarray) -> np.ndarray:
    """0.6745 |x - median| / MAD along the last axis; NaN where the MAD is 0."""
    median = np.median(logs, axis=-1, keepdims=True)
    mad = np.median(np.abs(logs - median), axis=-1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(mad > 0, MAD_TO_SD * np.abs(logs - median) / mad, np.nan)


def widest_gap(logs: np.ndarray) -> np.ndarray:
    """The largest gap between two groups of sorted values, in pooled within-group sds
    (every split at once, from running sums of the centred values)."""
    ordered = np.sort(logs, axis=-1)
    ordered = ordered - ordered.mean(axis=-1, keepdims=True)
    n = ordered.shape[-1]
    smallest = max(2, -(-n // 4))
    splits = np.arange(smallest, n - smallest + 1)
    sums = np.cumsum(ordered, axis=-1)[..., splits - 1]
    squares = np.cumsum(ordered**2, axis=-1)[..., splits - 1]
    total = ordered.sum(axis=-1, keepdims=True)
    total_squares = (ordered**2).sum(axis=-1, keepdims=True)
    within = (squares - sums**2 / splits) + (
        (total_squares - squares) - (total - sums) ** 2 / (n - splits)
    )
    gaps = ordered[..., splits] - ordered[..., splits - 1]
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.where(within > 1e-300, gaps / np.sqrt(within / (n - 2)), 0.0)
    return scaled.max(axis=-1)


def _largest_normal(n: int) -> float:
    """The |z| that the largest of n independent standard normal values exceeds with
    probability FLAGGED_SHARE."""
    return float(stats.norm.isf((1 - (1 - FLAGGED_SHARE) ** (1 / n)) / 2))


@functools.lru_cache(maxsize=256)
def outlier_threshold(n: int) -> float:
    """The modified z-score `n` normal values exceed with probability FLAGGED_SHARE.

    Beyond SIMULATED_UP_TO it grows as the largest of n independent |z| does (each
    beyond t with 2 (1 - Phi(t))), scaled to meet the simulated value there.
    """
    if n > SIMULATED_UP_TO:
        scale = outlier_threshold(SIMULATED_UP_TO) / _largest_normal(SIMULATED_UP_TO)
        return scale * _largest_normal(n)
    draws = np.random.default_rng(SEED + n).normal(size=(SIMULATED_SAMPLES, n))
    return float(np.nanquantile(np.nanmax(modified_z(draws), axis=-1), 1 - FLAGGED_SHARE))


@functools.lru_cache(maxsize=256)
def gap_threshold(n: int) -> float:
    """The widest gap `n` normal values exceed with probability FLAGGED_SHARE; beyond
    SIMULATED_UP_TO that of SIMULATED_UP_TO (it falls with n: fewer flags, never more)."""
    n = min(n, SIMULATED_UP_TO)
    draws = np.random.default_rng(SEED - n).normal(size=(SIMULATED_SAMPLES, n))
    return float(np.quantile(widest_gap(draws), 1 - FLAGGED_SHARE))


def find_outliers(values: Sequence[float]) -> RepeatOutliers:
    """The outlier checks on positive repeats (their logs); none found when too few."""
    logs = np.log(np.asarray(values, dtype=float))
    outliers: tuple[int, ...] = ()
    if logs.size >= MIN_OUTLIER_REPEATS:
        scores = modified_z(logs)
        far = np.nan_to_num(scores, nan=0.0) > outlier_threshold(logs.size)
        outliers = tuple(int(i) for i in np.flatnonzero(far))
    bimodal = logs.size >= MIN_BIMODAL_REPEATS and widest_gap(logs) > gap_threshold(logs.size)
    return RepeatOutliers(outliers, bool(bimodal))


def outlier_warnings(values: Sequence[float]) -> list[ValidityWarning]:
    """An outlier repeat or repeats in two groups, as the validity warnings shown beside them."""
    checked = find_outliers(values) if values and min(values) > 0 else RepeatOutliers()
    found = []
    if checked.outliers:
        repeats = ", ".join(str(i + 1) for i in checked.outliers)
        found.append(ValidityWarning("outlier_repeat", f"repeat {repeats} of {len(values)}"))
    if checked.bimodal:
        found.append(ValidityWarning("repeats_in_two_groups", f"{len(values)} repeats"))
    return found
