"""The rank-based answer for repeats that are not log-normal (as benchstat gives it).

On log values: the Hodges-Lehmann estimate of the shift (the median of all
pairwise differences value - baseline) with its distribution-free interval
(the order statistics of those differences that the Mann-Whitney U
distribution picks), and the Mann-Whitney p-value. `exp(shift) - 1` is the
ratio of the two sides' typical values less one; an outlier moves none of it.

Rounds compared in pairs (runs/inference/paired.py) have the one-sample
counterpart: the Hodges-Lehmann estimate of the rounds' log ratios (the median
of their Walsh averages) with the interval the Wilcoxon signed-rank
distribution picks, and the Wilcoxon signed-rank p.
"""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

# Beyond this many pairs the U distribution is taken as normal (continuity-corrected).
EXACT_PAIRS = 2500
# Beyond this many paired rounds the signed-rank distribution is taken as normal.
EXACT_SIGNED_RANKS = 400


@dataclass(frozen=True)
class RankShift:
    """Hodges-Lehmann shift of the logs and its intervals (None: too few repeats for one)."""

    log_shift: float
    interval: tuple[float, float] | None
    equivalence_interval: tuple[float, float] | None
    p: float


@functools.lru_cache(maxsize=1024)
def _u_cdf(m: int, n: int) -> np.ndarray:
    """P(U <= u) for u = 0..m*n under the null, no ties (counts of arrangements)."""
    # counts[j][u]: arrangements of i values of one side among j of the other with U = u,
    # built up one value of the first side at a time.
    counts = [np.ones(1)] * (n + 1)
    for i in range(1, m + 1):
        grown = [np.ones(1)]
        for j in range(1, n + 1):
            without = np.concatenate([np.zeros(j), counts[j]])  # the new value above j others
            row = np.zeros(i * j + 1)
            row[: grown[j - 1].size] += grown[j - 1]
            row[: without.size] += without
            grown.append(row)
        counts = grown
    total = counts[n]
    return np.cumsum(total) / total.sum()


def _critical_count(m: int, n: int, alpha: float) -> int:
    """The largest k with P(U <= k - 1) <= alpha / 2 (0: no interval at this level)."""
    if m * n > EXACT_PAIRS:
        z = stats.norm.ppf(1 - alpha / 2)
        return max(0, math.floor(m * n / 2 - z * math.sqrt(m * n * (m + n + 1) / 12) - 0.5) + 1)
    cdf = _u_cdf(min(m, n), max(m, n))
    return int(np.searchsorted(cdf, alpha / 2, side="right"))


def _interval(ordered: np.ndarray, m: int, n: int, alpha: float) -> tuple[float, float] | None:
    k = _critical_count(m, n, alpha)
    if k < 1:
        return None
    return float(ordered[k - 1]), float(ordered[ordered.size - k])


def rank_shift(values: Sequence[float], baseline: Sequence[float], alpha: float) -> RankShift:
    """The shift of positive `values` over `baseline` on logs: interval at 1 - alpha and
    the equivalence interval at 1 - 2 alpha."""
    logs, base = np.log(np.asarray(values, dtype=float)), np.log(np.asarray(baseline, dtype=float))
    pairs = np.sort(np.subtract.outer(logs, base).ravel())
    p = float(stats.mannwhitneyu(logs, base, alternative="two-sided").pvalue)
    return RankShift(
        log_shift=float(np.median(pairs)),
        interval=_interval(pairs, logs.size, base.size, alpha),
        equivalence_interval=_interval(pairs, logs.size, base.size, 2 * alpha),
        p=p,
    )


def robust_log_sd(values: Sequence[float]) -> float:
    """The standard deviation of the logs as the MAD sees it (an outlier does not move it)."""
    logs = np.log(np.asarray(values, dtype=float))
    return float(stats.median_abs_deviation(logs, scale="normal"))


@functools.lru_cache(maxsize=256)
def _signed_rank_cdf(n: int) -> np.ndarray:
    """P(T+ <= t) for t = 0..n(n+1)/2 under the null, no ties or zeros: the sums of the
    subsets of ranks 1..n, counted one rank at a time."""
    counts = np.ones(1)
    for rank in range(1, n + 1):
        grown = np.concatenate([counts, np.zeros(rank)])
        grown[rank:] += counts
        counts = grown
    return np.cumsum(counts) / counts.sum()


def _signed_rank_critical(n: int, alpha: float) -> int:
    """The largest k with P(T+ <= k - 1) <= alpha / 2 (0: no interval at this level)."""
    if n > EXACT_SIGNED_RANKS:
        z = stats.norm.ppf(1 - alpha / 2)
        walsh = n * (n + 1) / 2
        spread = math.sqrt(n * (n + 1) * (2 * n + 1) / 24)
        return max(0, math.floor(walsh / 2 - z * spread - 0.5) + 1)
    return int(np.searchsorted(_signed_rank_cdf(n), alpha / 2, side="right"))


def _walsh_interval(ordered: np.ndarray, n: int, alpha: float) -> tuple[float, float] | None:
    k = _signed_rank_critical(n, alpha)
    if k < 1:
        return None
    return float(ordered[k - 1]), float(ordered[ordered.size - k])


def signed_ranks_reach(pairs: int, alpha: float) -> bool:
    """Whether signed ranks over `pairs` rounds can reach a two-sided p of `alpha` at all:
    the smallest exact p, every sign alike, is 2 / 2^pairs (6 rounds for 5 %, 7 for 2 %).
    Below it they cannot tell any difference, however large, and the unpaired ranks of
    twice the repeats answer instead."""
    return 2.0 * 0.5**pairs <= alpha


def signed_rank_shift(log_ratios: Sequence[float] | np.ndarray, alpha: float) -> RankShift:
    """The typical log ratio of paired rounds: the Hodges-Lehmann estimate (the median of
    the Walsh averages (d_i + d_j) / 2, i <= j) with its interval at 1 - alpha and the
    equivalence interval at 1 - 2 alpha (the order statistics of the Walsh averages the
    signed-rank distribution picks), and the Wilcoxon signed-rank p."""
    ratios = np.asarray(log_ratios, dtype=float)
    upper = np.triu_indices(ratios.size)
    walsh = np.sort(((ratios[:, None] + ratios[None, :]) / 2)[upper])
    p = float(stats.wilcoxon(ratios).pvalue) if np.any(ratios != 0) else 1.0
    return RankShift(
        log_shift=float(np.median(walsh)),
        interval=_walsh_interval(walsh, ratios.size, alpha),
        equivalence_interval=_walsh_interval(walsh, ratios.size, 2 * alpha),
        p=p,
    )
