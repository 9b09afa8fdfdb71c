"""The steady window of a point, from its per-second tps (seeded noise): flat needs a drift
under the bound as well as no significant trend; a fall is not a warm-up."""

import numpy as np
import pytest

from runs.inference.steady import MAX_DRIFT_PCT_PER_MIN, drift_of, steady_state


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
    values = noisy(rng, level, cv=0.01)
    found = steady_state(values)
    assert found.settled and found.rose and 12 <= found.start <= 30
    assert found.skipped_s == found.start  # one sample a second, the first ending at 1 s
    rest = drift_of(np.arange(found.start + 1, 91, dtype=float), values[found.start :])
    assert abs(rest.pct_per_min) < MAX_DRIFT_PCT_PER_MIN


def test_a_point_that_keeps_climbing_never_settles():
    rng = np.random.default_rng(3)
    found = steady_state(noisy(rng, np.linspace(5_000.0, 10_000.0, 60), cv=0.01))
    assert (found.settled, found.start) == (False, 0)


@pytest.mark.parametrize("seed", range(10))
def test_a_short_noisy_window_whose_tps_doubled_never_settles(seed):
    # 12 s from 5,000 to 10,000 tps with 8 % noise a second: a short remainder's trend is
    # often not significant, but its drift (some 400 % a minute) is far above the bound.
    rng = np.random.default_rng(200 + seed)
    found = steady_state(noisy(rng, np.linspace(5_000.0, 10_000.0, 12), cv=0.08), None, 0.012)
    assert not found.settled
    assert found.drift.pct_per_min > 100 and found.drift.p < 0.05


def test_a_start_that_falls_is_a_drift_down_not_a_warm_up():
    rng = np.random.default_rng(4)
    level = np.concatenate([[15_000.0, 11_000.0, 7_000.0], np.full(27, 5_000.0)])
    found = steady_state(noisy(rng, level, cv=0.01))
    assert found.settled and found.start >= 2 and not found.rose


@pytest.mark.parametrize("seed", range(5))
def test_counting_noise_alone_skips_nothing(seed):
    # A few hundred transactions a second scatter by 1/sqrt(count); that is not drift.
    rng = np.random.default_rng(100 + seed)
    counts = rng.poisson(200, 30).astype(float)
    found = steady_state(counts, None, 1 / np.sqrt(200))
    assert (found.settled, found.start) == (True, 0)


def test_a_constant_series_is_flat_from_its_first_second():
    found = steady_state([500.0] * 10)
    assert (found.start, found.seconds, found.settled) == (0, 10, True)
