"""The steady window of a point, from its per-second tps (seeded noise)."""

import numpy as np
import pytest

from runs.inference.steady import FLAT_SHARE, steady_state, trend_share


def noisy(rng: np.random.Generator, level: np.ndarray, cv: float = 0.03) -> np.ndarray:
    return level * np.exp(rng.normal(0, cv, level.size))


def test_a_flat_point_keeps_every_second():
    rng = np.random.default_rng(1)
    found = steady_state(noisy(rng, np.full(60, 10_000.0)))
    assert (found.start, found.settled, found.seconds) == (0, True, 60)


def test_a_cold_cache_ramp_is_skipped_up_to_where_tps_settles():
    rng = np.random.default_rng(2)
    t = np.arange(90, dtype=float)
    level = 10_000.0 * (1 - 0.6 * np.exp(-t / 6))  # within 1 % of the plateau after 24 s
    found = steady_state(noisy(rng, level, cv=0.01))
    assert found.settled and 12 <= found.start <= 30
    moved, _p = trend_share(noisy(rng, level, cv=0.01)[found.start :])
    assert abs(moved) < FLAT_SHARE


def test_a_point_that_keeps_climbing_never_settles():
    rng = np.random.default_rng(3)
    found = steady_state(noisy(rng, np.linspace(5_000.0, 10_000.0, 60), cv=0.01))
    assert (found.settled, found.start) == (False, 0)


@pytest.mark.parametrize("seed", range(5))
def test_noise_alone_skips_nothing(seed):
    rng = np.random.default_rng(100 + seed)
    assert steady_state(noisy(rng, np.full(30, 2_000.0), cv=0.3)).start == 0


def test_a_constant_series_is_flat_from_its_first_second():
    found = steady_state([500.0] * 10)
    assert (found.start, found.seconds, found.settled) == (0, 10, True)
