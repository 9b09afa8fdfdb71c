"""Change points in a sequence by E-divisive means (Matteson and James 2014), as Otava does.

The best split of a segment is where the energy statistic (how far apart the
values before and after are, against how spread each side is) peaks; the
split counts only if shuffling the segment rarely gives as high a peak (a
permutation test, p below `max_p`), and then each side is searched again. The
statistic and the test both scale with the noise of the data, so a noisy
sequence needs a larger step than a quiet one: no fixed threshold.
docs/decisions.md says why this is our own code and not apache-otava or
signal-processing-algorithms.
"""

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

MAX_P = 0.01
MIN_SEGMENT = 3
PERMUTATIONS = 499
# A fixed seed: the same history always gives the same change points (and alerts).
SEED = 20140101


@dataclass(frozen=True)
class ChangePoint:
    """A change before `index` (the first value after it), with both sides' means."""

    index: int
    before: float
    after: float
    p_value: float

    @property
    def change_percent(self) -> float:
        return (self.after / self.before - 1) * 100 if self.before else float("inf")


def change_points(
    values: Sequence[float], max_p: float = MAX_P, min_segment: int = MIN_SEGMENT
) -> list[ChangePoint]:
    """Every significant change point of `values`, in order."""
    data = np.asarray(values, dtype=float)
    rng = np.random.default_rng(SEED)
    found: dict[int, float] = {}
    _split(data, 0, len(data), Search(max_p, min_segment, rng), found)
    bounds = [0, *sorted(found), len(data)]
    points = []
    for k, index in enumerate(sorted(found)):
        before, after = data[bounds[k] : index], data[index : bounds[k + 2]]
        points.append(ChangePoint(index, float(before.mean()), float(after.mean()), found[index]))
    return points


@dataclass(frozen=True)
class Search:
    max_p: float
    min_segment: int
    rng: np.random.Generator


def _split(data: np.ndarray, start: int, end: int, search: Search, found: dict[int, float]) -> None:
    segment = data[start:end]
    if len(segment) < 2 * search.min_segment or np.ptp(segment) == 0:
        return
    tau, score = best_split(segment, search.min_segment)
    p_value = permutation_p_value(segment, score, search)
    if p_value >= search.max_p:
        return
    found[start + tau] = p_value
    _split(data, start, start + tau, search, found)
    _split(data, start + tau, end, search, found)


def permutation_p_value(segment: np.ndarray, score: float, search: Search) -> float:
    """How often the best split of a shuffled segment scores at least `score`."""
    higher = sum(
        best_split(search.rng.permutation(segment), search.min_segment)[1] >= score
        for _ in range(PERMUTATIONS)
    )
    return (higher + 1) / (PERMUTATIONS + 1)


def best_split(data: np.ndarray, min_segment: int = MIN_SEGMENT) -> tuple[int, float]:
    """The split index maximising the energy statistic, and that statistic.

    Q(tau) = m*n/(m+n) * (2*E|X-Y| - E|X-X'| - E|Y-Y'|) for X = data[:tau],
    Y = data[tau:], read in O(1) per tau from 2-D prefix sums of the distances.
    """
    n = len(data)
    distances = np.abs(data[:, None] - data[None, :])
    prefix = np.zeros((n + 1, n + 1))
    prefix[1:, 1:] = distances.cumsum(axis=0).cumsum(axis=1)
    taus = np.arange(min_segment, n - min_segment + 1)
    total = prefix[n, n]
    within_x = prefix[taus, taus]
    between = prefix[taus, n] - within_x
    within_y = total - 2 * between - within_x
    m, k = taus.astype(float), (n - taus).astype(float)
    scores = (m * k / (m + k)) * (
        2 * between / (m * k) - within_x / (m * (m - 1)) - within_y / (k * (k - 1))
    )
    best = int(np.argmax(scores))
    return int(taus[best]), float(scores[best])
