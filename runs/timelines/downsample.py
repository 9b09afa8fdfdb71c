"""One timeline as a chart draws it, and its reduction to what a chart can show.

A `Timeline` holds the samples of one value of a run on the run's shared time
axis (runs/timelines/samples.py: points end to end), without gaps; `starts` says where
each point after the first begins, so the gaps between points are put back
when it is drawn. `reduced` keeps at most `n_out` samples with MinMax-LTTB
(tsdownsample): the extremes of every bucket survive, so a one-second spike
or dip of an hour-long run is still on the chart. A timeline read from a sampled
transaction log also carries `counts`: the logged transactions each second
rests on, kept beside the samples a reduction keeps (a chart's hover shows them).
"""

from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass
from typing import NotRequired, TypedDict, TypeVar

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

# About what a chart is wide in pixels: more samples than this add nothing visible.
CHART_SAMPLES = 1000
# Below this a reduced line loses its shape, however many traces share a chart.
MIN_TRACE_SAMPLES = 100
# Significant digits kept in what is sent to the browser (a chart shows three or four).
DIGITS = 6

T = TypeVar("T")


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


class StoredTimeline(TypedDict):
    """A timeline as runs.models.TimelineTrace.samples keeps it."""

    x: list[float]
    y: list[float]
    starts: list[int]
    last_point: NotRequired[int | None]
    last_t: NotRequired[float]
    # What each sample rests on (logged transactions), for a timeline read from a log.
    counts: NotRequired[list[int | None]]


@dataclass(frozen=True)
class Timeline:
    """Samples of one timeline: `x` on the shared axis (ascending), `y`, and the index
    at which each point after the first starts; `last_point`/`last_t` say where the
    live page continues it. `counts`, when known, is what each sample rests on (the
    logged transactions of that second), one per sample."""

    x: list[float]
    y: list[float]
    starts: list[int]
    last_point: int | None = None
    last_t: float = 0.0
    counts: list[int | None] | None = None

    def __len__(self) -> int:
        return len(self.x)

    def reduced(self, n_out: int = CHART_SAMPLES) -> "Timeline":
        """At most `n_out` samples chosen by MinMax-LTTB; every sample when there are fewer."""
        if len(self.x) <= n_out:
            return self
        picked = MinMaxLTTBDownsampler().downsample(
            np.asarray(self.x, dtype=float), np.asarray(self.y, dtype=float), n_out=n_out
        )
        indices = [int(i) for i in picked]
        starts = sorted({bisect_right(indices, s - 1) for s in self.starts} - {0, len(indices)})
        return Timeline(
            [self.x[i] for i in indices],
            [self.y[i] for i in indices],
            starts,
            self.last_point,
            self.last_t,
            None if self.counts is None else [self.counts[i] for i in indices],
        )

    def rounded(self) -> "Timeline":
        """The same samples with DIGITS significant digits (what a page sends)."""
        x = [_rounded(value) for value in self.x]
        y = [_rounded(value) for value in self.y]
        return Timeline(x, y, self.starts, self.last_point, self.last_t, self.counts)

    def gapped(self) -> tuple[list[float | None], list[float | None]]:
        """(x, y) for plotly: a None between points so the line breaks there."""
        return _gapped(self.x, self.starts), _gapped(self.y, self.starts)

    def gapped_counts(self) -> list[int | None] | None:
        """`counts` aligned with `gapped()`'s samples (None: not known)."""
        return None if self.counts is None else _gapped(self.counts, self.starts)

    def as_json(self) -> StoredTimeline:
        """The stored form (runs.models.TimelineTrace.samples)."""
        stored: StoredTimeline = {
            "x": self.x,
            "y": self.y,
            "starts": self.starts,
            "last_point": self.last_point,
            "last_t": self.last_t,
        }
        if self.counts is not None:
            stored["counts"] = self.counts
        return stored

    @classmethod
    def from_json(cls, data: StoredTimeline) -> "Timeline":
        return cls(
            data["x"],
            data["y"],
            data["starts"],
            data.get("last_point"),
            data.get("last_t", 0.0),
            data.get("counts"),
        )


def _gapped(values: Sequence[T | None], starts: list[int]) -> list[T | None]:
    """The values with a None where each point after the first starts."""
    gapped: list[T | None] = list(values)
    for index in reversed(starts):
        gapped.insert(index, None)
    return gapped


def build_timeline(
    points: list[int],
    ts: list[float],
    values: list[float | None],
    offsets: dict[int, float],
    counts: list[int | None] | None = None,
) -> Timeline:
    """A timeline from samples in point and time order; samples without a value are left
    out. `counts` (one per sample, or None) is what each sample rests on; kept only when
    some sample has one."""
    x: list[float] = []
    y: list[float] = []
    kept: list[int | None] = []
    starts: list[int] = []
    current, last_t = None, 0.0
    for n, (point, t, value) in enumerate(zip(points, ts, values, strict=True)):
        if value is None:
            continue
        if current is not None and point != current:
            starts.append(len(x))
        current, last_t = point, t
        x.append(offsets.get(point, 0.0) + t)
        y.append(float(value))
        kept.append(counts[n] if counts is not None else None)
    known = kept if any(count is not None for count in kept) else None
    return Timeline(x, y, starts, current, last_t, known)


def trace_budget(traces: int) -> int:
    """Samples per trace when `traces` lines share one chart."""
    return max(MIN_TRACE_SAMPLES, CHART_SAMPLES * 2 // max(traces, 1))
