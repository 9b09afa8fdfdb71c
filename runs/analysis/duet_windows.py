"""How simultaneous a duet's windows were (agents/duet.py).

A duet round's two sides meet at a barrier before each point, then each launches its
pgbench; the agent records when it launched each pgbench and when it reaped it
(`Result.started_epoch`, `ended_epoch`), and a window lies within them. For each point
measured on both sides, the share of the longer side's span during which both ran is
how much of the two windows the host's moments reached together: the paired ratio
cancels what the host did during that share only. Its edge gap is the larger of the
gaps between the two launches and between the two reaps: the barrier wakes both sides
within milliseconds, so the launches barely differ, while each pgbench's `-T` window
starts only once its connections are made and ends that long after, so the reaps show
how far apart the windows themselves began. Points whose sides ran together for less
than `TOGETHER_FLOOR` of their span are counted and named on the page.
"""

import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from runs.models import Result, Run

# Below this share of a point's span run together, the page names the point: at 5 s
# windows it is half a second apart, where a loaded host's launch differs by 0.1 to 0.7 s
# (tests/agents/test_duet.py).
TOGETHER_FLOOR = 0.9


@dataclass(frozen=True)
class PointTogether:
    """One point of a duet round: its sides' edge gap (the larger of the launch and the
    reap gaps) and the share of the longer span they ran together."""

    round: int
    index: int
    edge_gap_s: float
    together: float


@dataclass(frozen=True)
class DuetWindows:
    """Every point measured on both sides of its round, summed up for the page."""

    points: tuple[PointTogether, ...]

    @property
    def median_edge_gap_ms(self) -> float:
        return 1000.0 * statistics.median(p.edge_gap_s for p in self.points)

    @property
    def largest_edge_gap_ms(self) -> float:
        return 1000.0 * max(p.edge_gap_s for p in self.points)

    @property
    def median_together_pct(self) -> float:
        return 100.0 * statistics.median(p.together for p in self.points)

    @property
    def least(self) -> PointTogether:
        return min(self.points, key=lambda point: point.together)

    @property
    def apart(self) -> int:
        """Points whose sides ran together for less than TOGETHER_FLOOR of their span."""
        return sum(1 for point in self.points if point.together < TOGETHER_FLOOR)


def duet_windows(runs: Iterable[Run], results: Mapping[int, list[Result]]) -> DuetWindows | None:
    """The duet rounds' points with both sides' times (`results`: each run's own points);
    None where none has them (agents that do not record them, or no point measured on
    both sides yet)."""
    sides: dict[int, dict[int, Run]] = {}
    for run in runs:
        if run.round is not None:
            sides.setdefault(run.round, {})[run.cell] = run
    points = []
    for round_number, cells in sorted(sides.items()):
        if len(cells) != 2:
            continue
        first, second = (
            {r.index: r for r in results.get(run.pk, [])} for _cell, run in sorted(cells.items())
        )
        for index in sorted(first.keys() & second.keys()):
            together = _together(first[index], second[index])
            if together is not None:
                points.append(PointTogether(round_number, index, *together))
    return DuetWindows(tuple(points)) if points else None


def _together(one: Result, other: Result) -> tuple[float, float] | None:
    """(edge gap in seconds, share of the longer span both ran), None without times."""
    times = [(r.started_epoch, r.ended_epoch) for r in (one, other)]
    spans = [(s, e) for s, e in times if s is not None and e is not None and e > s]
    if len(spans) != 2:
        return None
    (start_a, end_a), (start_b, end_b) = spans
    both = max(0.0, min(end_a, end_b) - max(start_a, start_b))
    longer = max(end_a - start_a, end_b - start_b)
    return max(abs(start_a - start_b), abs(end_a - end_b)), both / longer
