"""Change points (runs/inference/changepoints.py): deterministic, incremental, described;
calibrated on seeded synthetic series (figures in docs/benchmarks.md, "Change points'
calibration": `python -m tests.runs.inference.test_changepoints`)."""

import sys
from dataclasses import dataclass

import numpy as np
import pytest

from runs.inference.changepoints import beyond_prediction_p, change_points, change_points_after

SERIES = 200
OCCURRENCES = 60
NOISE = 0.03
STEPS = (0.02, 0.05, 0.10)
# A change point within this many occurrences of the planted step finds it.
TOLERANCE = 3
SEED = 41


@dataclass(frozen=True)
class Calibration:
    """What the seeded series gave: every change point found, precision, recall by step,
    false change points per 100 occurrences of flat series."""

    found: list[list[tuple[int, float, float, float]]]
    precision: float
    recall: dict[float, float]
    false_per_100: float
    false_per_100_with_steps: float


def synthetic(rng: np.random.Generator, step: float) -> tuple[list[float], int]:
    """60 occurrences of 1000 with 3 % noise, `step` up or down at a seeded occurrence."""
    at = int(rng.integers(10, OCCURRENCES - 9))
    sign = float(rng.choice([-1.0, 1.0]))
    values = 1000.0 * (1 + NOISE * rng.standard_normal(OCCURRENCES))
    values[at:] *= 1 + sign * step
    return values.tolist(), at


def calibrate(seed: int = SEED) -> Calibration:
    rng = np.random.default_rng(seed)
    found, hits, detected = [], {step: 0 for step in STEPS}, 0
    planted = {step: 0 for step in STEPS}
    true_found = 0
    for number in range(SERIES):
        step = STEPS[number % len(STEPS)]
        values, at = synthetic(rng, step)
        points = change_points(values)
        found.append([(p.index, p.change_percent, p.low_percent, p.high_percent) for p in points])
        hit = any(abs(p.index - at) <= TOLERANCE for p in points)
        planted[step] += 1
        hits[step] += hit
        true_found += hit
        detected += len(points)
    flat_found = sum(
        len(change_points((1000.0 * (1 + NOISE * rng.standard_normal(OCCURRENCES))).tolist()))
        for _ in range(SERIES)
    )
    return Calibration(
        found=found,
        precision=true_found / detected if detected else 1.0,
        recall={step: hits[step] / planted[step] for step in STEPS},
        false_per_100=100 * flat_found / (SERIES * OCCURRENCES),
        false_per_100_with_steps=100 * (detected - true_found) / (SERIES * OCCURRENCES),
    )


@pytest.fixture(scope="module")
def calibration() -> Calibration:
    return calibrate()


def test_change_points_are_precise_and_find_5_and_10_percent_steps(calibration):
    assert calibration.precision >= 0.9
    assert calibration.recall[0.10] >= 0.9
    assert calibration.recall[0.05] >= 0.7
    assert calibration.false_per_100 < 0.5


def test_two_runs_give_identical_change_points(calibration):
    assert calibrate().found == calibration.found


def test_a_change_point_has_its_size_interval_and_sides():
    rng = np.random.default_rng(3)
    values = [*(1000 + 10 * rng.standard_normal(20)), *(900 + 10 * rng.standard_normal(10))]

    (point,) = change_points(values)

    assert point.index == 20
    assert point.change_percent == pytest.approx(-10, abs=1)
    assert point.low_percent < point.change_percent < point.high_percent < 0
    assert point.p_value < 1e-6


def test_found_change_points_stay_as_values_arrive():
    rng = np.random.default_rng(5)
    values = [*(1000 + 10 * rng.standard_normal(15)), *(850 + 10 * rng.standard_normal(15))]
    first = change_points_after(values[:20], [])

    later = change_points_after(values, first)

    assert first == [15]
    assert later == []
    assert [p.index for p in change_points(values)] == [15]


def test_a_flat_series_has_no_change_point():
    assert change_points([1000.0] * 30) == []


def dependent_false_per_100(seed: int = SEED) -> dict[str, float]:
    """False change points per 100 occurrences of series with no step whose noise is not
    independent (the t's null assumes it is): AR(1) noise of 3 % sd, and a slow drift of
    -0.2 % per occurrence (-12 % over 60) with independent 3 % noise."""
    rng = np.random.default_rng(seed)
    figures = {}
    for phi in (0.3, 0.5):
        found = 0
        for _ in range(SERIES):
            shocks = rng.standard_normal(OCCURRENCES)
            noise = np.zeros(OCCURRENCES)
            noise[0] = shocks[0]
            for index in range(1, OCCURRENCES):
                noise[index] = phi * noise[index - 1] + np.sqrt(1 - phi**2) * shocks[index]
            found += len(change_points((1000.0 * (1 + NOISE * noise)).tolist()))
        figures[f"AR(1) noise, phi {phi}"] = 100 * found / (SERIES * OCCURRENCES)
    drift = 1 - 0.002 * np.arange(OCCURRENCES)
    found = sum(
        len(
            change_points(
                (1000.0 * drift * (1 + NOISE * rng.standard_normal(OCCURRENCES))).tolist()
            )
        )
        for _ in range(SERIES)
    )
    figures["drift -0.2 % per occurrence"] = 100 * found / (SERIES * OCCURRENCES)
    return figures


def report(result: Calibration) -> str:
    """The figures docs/benchmarks.md records."""
    lines = [f"precision {result.precision:.3f}"]
    lines += [f"recall at {step:.0%}: {share:.3f}" for step, share in result.recall.items()]
    lines.append(f"false change points per 100 occurrences, flat: {result.false_per_100:.3f}")
    lines.append(f"  with a step: {result.false_per_100_with_steps:.3f}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.stdout.write(report(calibrate()))
    for name, figure in dependent_false_per_100().items():
        sys.stdout.write(f"false change points per 100 occurrences, {name}: {figure:.3f}\n")


def test_one_value_out_of_line_is_told_by_the_prediction_interval():
    before = [1000.0, 1010.0, 990.0, 1005.0, 995.0]

    assert beyond_prediction_p(before, 600.0, lower_is_worse=True) < 1e-4
    assert beyond_prediction_p(before, 1400.0, lower_is_worse=True) > 0.99
    assert beyond_prediction_p(before, 1400.0, lower_is_worse=False) < 1e-4
    assert 0.2 < beyond_prediction_p(before, 995.0, lower_is_worse=True) < 0.8
    assert beyond_prediction_p(before[:2], 600.0, lower_is_worse=True) is None
