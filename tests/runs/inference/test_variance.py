"""Where an experiment's spread comes from (runs/inference/variance.py), on seeded data
with a known split."""

import numpy as np
import pytest

from runs.inference.variance import PointSeconds, variance_split

SETUP_S = 5.0


def experiment_data(
    between_sd: float, second_sd: float, seconds: int, rounds: int = 12, cells: int = 4, seed=1
) -> tuple[list[list[float]], list[PointSeconds]]:
    """Repeats at each cell (one client count) and each repeat's seconds, in log-normal
    levels: a run's level moves by `between_sd`, each second by `second_sd` around it."""
    rng = np.random.default_rng(seed)
    repeats, points = [], []
    for _cell in range(cells):
        values = []
        for _round in range(rounds):
            level = np.log(1000.0) + rng.normal(0, between_sd)
            per_second = np.exp(level + rng.normal(0, second_sd, seconds))
            values.append(float(per_second.mean()))
            points.append(PointSeconds(list(per_second), [None] * seconds))
        repeats.append(values)
    return repeats, points


def test_a_spread_between_clusters_is_found_and_more_rounds_advised():
    repeats, points = experiment_data(between_sd=0.10, second_sd=0.05, seconds=30)

    split = variance_split(repeats, points, SETUP_S, in_rounds=True)

    assert split is not None
    assert split.between_runs == pytest.approx(0.01, rel=0.4)
    assert split.per_second == pytest.approx(0.0025, rel=0.1)
    assert split.window_share < 0.05
    assert split.more_rounds_pay
    assert split.advice.startswith("9") and "between clusters" in split.advice
    assert split.advice.endswith("more rounds narrow the interval faster than longer points")


def test_seconds_that_swing_with_little_between_runs_advise_longer_points():
    repeats, points = experiment_data(between_sd=0.0, second_sd=0.8, seconds=5)

    split = variance_split(repeats, points, setup_s=60.0, in_rounds=False)

    assert split is not None and split.window_share > 0.8
    assert not split.more_rounds_pay
    assert "between runs in one cluster" in split.advice
    assert split.advice.endswith("longer points narrow the interval faster than more rounds")


def test_the_counting_noise_of_a_sampled_log_is_not_taken_for_spread():
    rng = np.random.default_rng(3)
    # About 25 logged transactions a second: counting alone moves a second by 20 %.
    sampled = [PointSeconds(list(1000.0 * rng.poisson(25, 60) / 25), [25] * 60) for _ in range(10)]
    exact = [PointSeconds(list(p.tps), [None] * 60) for p in sampled]
    repeats = [[1000.0, 1010.0, 990.0]]

    with_noise = variance_split(repeats, exact, SETUP_S, in_rounds=True)
    without = variance_split(repeats, sampled, SETUP_S, in_rounds=True)

    assert with_noise is not None and without is not None
    assert with_noise.per_second == pytest.approx(1 / 25, rel=0.25)
    assert without.per_second < 0.2 * with_noise.per_second


def test_no_split_without_two_repeats_or_seconds():
    _repeats, points = experiment_data(0.1, 0.1, 10)
    assert variance_split([[1000.0]], points, SETUP_S, True) is None
    assert variance_split([[1000.0, 990.0]], [], SETUP_S, True) is None
