"""How long a duet's two sides ran together, point by point (runs/analysis/duet_windows.py)."""

import pytest

from runs.analysis.duet_windows import TOGETHER_FLOOR, duet_windows
from runs.models import Result, Run

LAUNCH = 1_790_000_000.0


def side(pk: int, round_number: int | None, cell: int) -> Run:
    return Run(pk=pk, round=round_number, cell=cell)


def point(index: int, started: float | None, ended: float | None) -> Result:
    return Result(index=index, started_epoch=started, ended_epoch=ended)


def test_two_sides_launched_apart_ran_together_for_what_their_spans_share() -> None:
    # Launched together, a window that began late (its connections slow) ends late: the
    # reaps, not the launches, show it.
    runs = [side(1, 1, 0), side(2, 1, 1)]
    results = {
        1: [point(0, LAUNCH, LAUNCH + 5.0), point(1, LAUNCH + 10.0, LAUNCH + 15.0)],
        # 0.1 s late at the first point, 1 s late (and 1 s longer) at the second.
        2: [point(0, LAUNCH + 0.1, LAUNCH + 5.1), point(1, LAUNCH + 11.0, LAUNCH + 17.0)],
    }
    windows = duet_windows(runs, results)
    assert windows is not None
    first, second = windows.points
    assert (first.round, first.index) == (1, 0)
    assert first.edge_gap_s == pytest.approx(0.1)
    assert first.together == pytest.approx(4.9 / 5.0)
    assert second.together == pytest.approx(4.0 / 6.0)
    assert windows.least is second
    assert windows.apart == 1 and second.together < TOGETHER_FLOOR < first.together
    # The second point's launches were 1 s apart, its reaps 2 s: the edge gap is 2 s.
    assert second.edge_gap_s == pytest.approx(2.0)
    assert windows.median_edge_gap_ms == pytest.approx(1050.0)
    assert windows.largest_edge_gap_ms == pytest.approx(2000.0)


def test_launched_together_but_reaped_apart_is_an_edge_gap() -> None:
    runs = [side(1, 1, 0), side(2, 1, 1)]
    results = {1: [point(0, LAUNCH, LAUNCH + 5.0)], 2: [point(0, LAUNCH + 0.002, LAUNCH + 5.6)]}
    windows = duet_windows(runs, results)
    assert windows is not None
    assert windows.points[0].edge_gap_s == pytest.approx(0.6)
    assert windows.points[0].together == pytest.approx(4.998 / 5.598)


def test_windows_that_never_met_ran_together_for_nothing() -> None:
    runs = [side(1, 1, 0), side(2, 1, 1)]
    results = {1: [point(0, LAUNCH, LAUNCH + 5.0)], 2: [point(0, LAUNCH + 6.0, LAUNCH + 11.0)]}
    windows = duet_windows(runs, results)
    assert windows is not None
    assert windows.points[0].together == 0.0
    assert windows.median_together_pct == 0.0


def test_points_without_times_or_without_their_other_side_are_left_out() -> None:
    runs = [side(1, 1, 0), side(2, 1, 1), side(3, 2, 0), side(4, None, 0)]
    results = {
        1: [point(0, None, None), point(1, LAUNCH, LAUNCH + 5.0)],
        2: [point(0, LAUNCH, LAUNCH + 5.0)],
        3: [point(0, LAUNCH, LAUNCH + 5.0)],
        4: [point(0, LAUNCH, LAUNCH + 5.0)],
    }
    assert duet_windows(runs, results) is None
