"""When an adaptive experiment looks, and at which level each look tests: the plan's
alpha spending (runs/analysis/sequential.py applies it to the cells).

- The looks are planned when the experiment starts (`look_rounds`): after the first
  rounds, each time the rounds double, and at the last round the budget allows.
  Their information fractions t_k = n_k / N fix the boundaries.
- Alpha spending (Lan-DeMets, Pocock type): by look k a share `spent(t_k)` of ALPHA
  is spent, and each look's boundary is the one a Brownian motion observed at the
  fractions first crosses with the look's part (`look_levels`, simulated once per
  plan with a fixed seed). "Same within ±m %" is TOST, each one-sided test spending
  its ALPHA the same way.
- Experiments that answer one question together (a patch try's battery: one exit code)
  share ALPHA: each plan spends `alpha`, its share (Bonferroni over the experiments).
"""

import functools
import math
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from runs.inference.stats import ALPHA, MIN_REPEATS

# Each look after the first comes when the rounds have doubled.
LOOK_GROWTH = 2
# Brownian paths simulated for a plan's boundary constants: their quantile is then
# within about 0.01 of the exact one (a nominal level off by well under 1 % of ALPHA).
SIMULATED_PATHS = 200_000
BOUNDARY_SEED = 20


def look_rounds(first: int, last: int) -> tuple[int, ...]:
    """The rounds after which the lab looks: `first`, then doubling, then `last`."""
    if first < MIN_REPEATS:
        raise ValueError(f"an adaptive experiment starts with at least {MIN_REPEATS} rounds")
    if last < first:
        raise ValueError(f"the budget of {last} rounds is below the first {first} rounds")
    looks = []
    rounds = first
    while rounds < last:
        looks.append(rounds)
        rounds *= LOOK_GROWTH
    return (*looks, last)


@dataclass(frozen=True)
class LookLevel:
    """One planned look: after `rounds` rounds, "different" is tested at the two-sided
    level `alpha` and each one-sided test of "same" at `alpha_same`."""

    rounds: int
    alpha: float
    alpha_same: float


def spent(fraction: float) -> float:
    """The share of ALPHA spent by the information fraction `fraction` (Lan-DeMets'
    Pocock-type spending: early looks get a usable part, so a large effect ends soon)."""
    return math.log1p((math.e - 1) * fraction)


@functools.lru_cache(maxsize=64)
def look_levels(looks: tuple[int, ...], alpha: float = ALPHA) -> tuple[LookLevel, ...]:
    """Each look's nominal levels: the boundaries that spend `alpha` as `spent` says,
    found on simulated Brownian paths observed at the looks' information fractions."""
    fractions = np.asarray(looks, dtype=float) / looks[-1]
    steps = np.diff(np.concatenate([[0.0], fractions]))
    rng = np.random.default_rng(BOUNDARY_SEED)
    paths = np.cumsum(rng.standard_normal((SIMULATED_PATHS, len(looks))) * np.sqrt(steps), axis=1)
    z = paths / np.sqrt(fractions)
    two_sided = _boundaries(np.abs(z), fractions, alpha, sides=2)
    one_sided = _boundaries(z, fractions, alpha, sides=1)
    return tuple(
        LookLevel(rounds, float(2 * scipy_stats.norm.sf(b)), float(scipy_stats.norm.sf(b_same)))
        for rounds, b, b_same in zip(looks, two_sided, one_sided, strict=True)
    )


def _boundaries(z: np.ndarray, fractions: np.ndarray, alpha: float, sides: int) -> list[float]:
    """Each look's boundary on `z` (paths x looks; |Z| for a two-sided test): a path
    first crosses at look k with probability alpha * (spent(t_k) - spent(t_k-1)). The
    first look's is the normal quantile; the later ones count the paths still inside."""
    boundaries = [float(scipy_stats.norm.isf(alpha * spent(fractions[0]) / sides))]
    inside = z[:, 0] < boundaries[0]
    for k in range(1, len(fractions)):
        share = alpha * (spent(fractions[k]) - spent(fractions[k - 1]))
        crossing = max(1, round(share * z.shape[0]))
        candidates = np.sort(z[inside, k])[::-1]
        boundary = float(candidates[min(crossing, candidates.size) - 1])
        boundaries.append(boundary)
        inside &= z[:, k] < boundary
    return boundaries


@functools.lru_cache(maxsize=64)
def last_look_level(looks: tuple[int, ...], rounds: int, alpha: float = ALPHA) -> LookLevel:
    """The levels of an unplanned last look after `rounds` rounds, when a time limit ends
    the plan `looks` (spending `alpha`) before its budget: the planned looks before it keep
    their boundaries, and this look spends all of `alpha` they left (Lan-DeMets: the
    information reached becomes the whole), found on paths observed at the looks' rounds."""
    earlier = tuple(n for n in looks if n < rounds)
    if not earlier:
        return LookLevel(rounds, alpha, alpha)
    planned = look_levels(looks, alpha)[: len(earlier)]
    taken = np.asarray([*earlier, rounds], dtype=float)
    steps = np.diff(np.concatenate([[0.0], taken / rounds]))
    rng = np.random.default_rng(BOUNDARY_SEED)
    paths = np.cumsum(rng.standard_normal((SIMULATED_PATHS, taken.size)) * np.sqrt(steps), axis=1)
    z = paths / np.sqrt(taken / rounds)
    two_sided = [float(scipy_stats.norm.isf(level.alpha / 2)) for level in planned]
    one_sided = [float(scipy_stats.norm.isf(level.alpha_same)) for level in planned]
    left = 1.0 - spent(earlier[-1] / looks[-1])
    b = _last_boundary(np.abs(z), two_sided, alpha * left)
    b_same = _last_boundary(z, one_sided, alpha * left)
    return LookLevel(rounds, float(2 * scipy_stats.norm.sf(b)), float(scipy_stats.norm.sf(b_same)))


def _last_boundary(z: np.ndarray, earlier: list[float], left: float) -> float:
    """The last column's boundary on `z` that a path still inside the `earlier` columns'
    boundaries crosses with probability `left`."""
    inside = np.all(z[:, : len(earlier)] < np.asarray(earlier), axis=1)
    crossing = max(1, round(left * z.shape[0]))
    candidates = np.sort(z[inside, -1])[::-1]
    return float(candidates[min(crossing, candidates.size) - 1])
