"""What a host learns about its runs' time (runs/estimates.py) is not set by one run: each
phase is the recency-weighted midmean of its latest runs, learned from the agent's status
events, by duration and by transactions alike. Fast tier: unsaved runs, no database."""

from datetime import datetime, timedelta

import pytest

from runs.estimates import (
    DEFAULT_TIMINGS,
    HALF_LIFE_RUNS,
    SCALE_LOAD_S_PER_UNIT,
    Learned,
    Timings,
    load_line,
    recent_midmean,
    run_phases,
    timed_sweep_seconds,
)
from runs.models import Run

START = datetime(2026, 11, 29, 8, 0, 0)


def test_one_value_is_itself_and_two_are_a_mean_weighted_by_recency() -> None:
    assert recent_midmean([7.0]) == 7.0
    both = recent_midmean([10.0, 20.0])
    newer, older = 1.0, 0.5 ** (1 / HALF_LIFE_RUNS)
    assert both == pytest.approx((10.0 * newer + 20.0 * older) / (newer + older), rel=0.1)
    assert 10.0 < both < 15.0


def test_one_run_under_unusual_load_is_left_out_once_a_few_agree() -> None:
    """The newest run's setup took four times the others' (a loaded machine, a first run
    that fetched the binaries): the learned setup stays the others'."""
    assert recent_midmean([40.0, 10.0, 10.5, 9.5, 10.0]) == pytest.approx(10.0, abs=0.3)
    assert recent_midmean([10.0, 10.5, 40.0, 9.5, 10.0]) == pytest.approx(10.0, abs=0.3)


def test_a_host_that_became_faster_is_learned_from_its_newer_runs() -> None:
    """Eight runs at 5 s after eight at 20 s: the newer ones outweigh the older, and more
    so as more come."""
    assert recent_midmean([5.0] * 8 + [20.0] * 8) < 10.0
    assert recent_midmean([20.0] * 8 + [5.0] * 8) > 15.0
    assert recent_midmean([5.0] * 12 + [20.0] * 8) == 5.0


def test_values_sharing_an_age_weigh_alike() -> None:
    """A run's repeats (its points' tps) share its age: three of one run, one of another."""
    assert recent_midmean([100.0, 100.0, 100.0, 130.0], ages=[0, 0, 0, 1]) == 100.0


def said_like_an_agent(
    points: int, point_s: float, *, setup_s: float, load_s: float, warm_up_s: float, over_s: float
) -> tuple[Run, list[tuple[datetime, str, str]]]:
    """A run's times and status events, its phases lasting the seconds given (setup half
    before the load, half after the points; the warm-up its seconds plus `over_s`; every
    point `point_s` plus `over_s`)."""
    loading = START + timedelta(seconds=setup_s / 2)
    running = loading + timedelta(seconds=load_s)
    first_point = running + timedelta(seconds=warm_up_s + over_s)
    stopping = first_point + timedelta(seconds=points * (point_s + over_s))
    finished = stopping + timedelta(seconds=setup_s / 2)
    run = Run(started_at=START, finished_at=finished)
    said = [
        (START, "provisioning", "finding PostgreSQL 16"),
        (loading, "loading", "pgbench -i at scale 5"),
        (running, "running", f"running {points} points"),
        (first_point, "running", f"point 1 of {points}: 1 clients, run 1"),
        (stopping, "stopping", "stopping and removing the cluster"),
    ]
    return run, said


def test_every_phase_is_learned_apart_from_a_runs_status_events() -> None:
    run, said = said_like_an_agent(2, 5.0, setup_s=8.0, load_s=2.5, warm_up_s=10, over_s=1.5)
    sweep = {"clients": [1, 4], "duration_s": 5, "warmup_s": 10}
    run.spec = {"sweep": sweep, "dataset": {"scale": 5}}

    phases = run_phases(run, said, measured_s=2 * 5.0)

    assert phases == Timings(8.0, 0.5, 1.5, runs=1, warm_up_overhead_s=1.5)
    estimated = timed_sweep_seconds(run.spec["sweep"], 5.0, 5, phases)
    assert estimated == pytest.approx((run.finished_at - START).total_seconds())


def test_a_run_by_transactions_teaches_its_phases_from_what_its_points_lasted() -> None:
    """-t 1000 at 1 and 4 clients, points of 2 and 6 s (the results' transactions / tps)."""
    run, said = said_like_an_agent(2, 4.0, setup_s=6.0, load_s=1.0, warm_up_s=0, over_s=2.0)
    run.spec = {"sweep": {"clients": [1, 4], "transactions": 1000}, "dataset": {"scale": 1}}

    phases = run_phases(run, said, measured_s=2.0 + 6.0)

    assert phases is not None
    assert phases.point_overhead_s == pytest.approx(2.0)
    assert phases.warm_up_overhead_s == pytest.approx(2.0)
    assert run_phases(run, said, measured_s=None) is None


def test_the_setup_is_the_builds_and_the_other_phases_all_the_hosts_runs() -> None:
    """A source build's setup is its own; its one run's load and overheads are not taken
    over the host's many other runs."""
    host = Timings(6.0, 0.4, 1.0, runs=12, warm_up_overhead_s=0.5)
    build = Timings(300.0, 2.0, 9.0, runs=1, warm_up_overhead_s=4.0)
    learned = Learned({(1, 2): build}, {1: host})

    assert learned.for_cell(1, 2) == Timings(300.0, 0.4, 1.0, runs=12, warm_up_overhead_s=0.5)
    assert learned.for_cell(1, 3) == host
    assert learned.for_cell(2, 2) == DEFAULT_TIMINGS


def test_the_load_is_a_fixed_part_and_a_part_per_scale_unit_from_two_scales() -> None:
    """Loads of 1.5 s at scale 1 and 6 s at scale 10 (newest first, twice each): 1 s fixed
    and 0.5 s per unit, so scale 50 takes 26 s, not 50 x 1.5 s."""
    fixed, per_unit = load_line([(1.0, 1.5), (10.0, 6.0), (1.0, 1.5), (10.0, 6.0)])

    assert (fixed, per_unit) == (pytest.approx(1.0), pytest.approx(0.5))
    timings = Timings(5.0, per_unit, 0.0, load_fixed_s=fixed)
    assert timings.setup_seconds(50) == pytest.approx(5.0 + 26.0)


def test_one_scale_alone_teaches_the_fixed_part_and_at_most_the_default_per_unit() -> None:
    fixed, per_unit = load_line([(1.0, 1.5)])
    assert (fixed, per_unit) == (pytest.approx(1.5 - SCALE_LOAD_S_PER_UNIT), SCALE_LOAD_S_PER_UNIT)
    assert load_line([(20.0, 4.0)]) == (pytest.approx(0.0), pytest.approx(0.2))


def test_a_load_line_never_goes_below_zero() -> None:
    """A bigger scale that loaded faster (a noisy first run) gives no negative slope, and
    a line through the origin replaces a negative fixed part."""
    assert load_line([(1.0, 3.0), (10.0, 2.0)]) == (pytest.approx(2.5), 0.0)
    fixed, per_unit = load_line([(1.0, 0.1), (10.0, 5.0)])
    assert fixed == 0.0
    assert per_unit == pytest.approx((1 * 0.1 + 10 * 5.0) / (1 + 100))
