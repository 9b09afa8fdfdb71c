"""One timeline as a chart draws it, and its reduction to what a chart can show.

A `Timeline` holds the samples of one value of a run on the run's shared time
axis (runs/timelines/samples.py: points end to end), without gaps; `starts` says where
each point after the first begins, so the gaps between points are put back
when it is drawn. `reduced` keeps at most `n_out` samples with MinMax-LTTB
(tsdownsample): the extremes of every bucket survive, so a one-second spike
or dip of an hour-long run is still on the chart.
"""

from bisect import bisect_right
from dataclasses import dataclass
from typing import NotRequired, TypedDict

import numpy as np
from tsdownsample import MinMaxLTTBDownsampler

# About what a chart is wide in pixels: more samples than this add nothing visible.
CHART_SAMPLES = 1000
# Below this a reduced line loses its shape, however many traces share a chart.
MIN_TRACE_SAMPLES = 100
# Significant digits kept in what is sent to the browser (a chart shows three or four).
DIGITS = 6


def _rounded(value: float) -> float:
    return float(f"{value:.{DIGITS}g}")


class StoredTimeline(TypedDict):
    """A timeline as runs.models.TimelineSeries.samples keeps it."""

    x: list[float]
    y: list[float]
    starts: list[int]
    last_point: NotRequired[int | None]
    last_t: NotRequired[float]


@dataclass(frozen=True)
class Timeline:
    """Samples of one timeline: `x` on the shared axis (ascending), `y`, and the index
    at which each point after the first starts; `last_point`/`last_t` say where the
    live page continues it."""

    x: list[float]
    y: list[float]
    starts: list[int]
    last_point: int | None = None
    last_t: float = 0.0

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
        )

    def rounded(self) -> "Timeline":
        """The same samples with DIGITS significant digits (what a page sends)."""
        x = [_rounded(value) for value in self.x]
        y = [_rounded(value) for value in self.y]
        return Timeline(x, y, self.starts, self.last_point, self.last_t)

    def gapped(self) -> tuple[list[float | None], list[float | None]]:
        """(x, y) for plotly: a None between points so the line breaks there."""
        xs: list[float | None] = list(self.x)
        ys: list[float | None] = list(self.y)
        for index in reversed(self.starts):
            xs.insert(index, None)
            ys.insert(index, None)
        return xs, ys

    def as_json(self) -> StoredTimeline:
        """The stored form (runs.models.TimelineSeries.samples)."""
        return {
            "x": self.x,
            "y": self.y,
            "starts": self.starts,
            "last_point": self.last_point,
            "last_t": self.last_t,
        }

    @classmethod
    def from_json(cls, data: StoredTimeline) -> "Timeline":
        return cls(
            data["x"], data["y"], data["starts"], data.get("last_point"), data.get("last_t", 0.0)
        )


def build_timeline(
    points: list[int], ts: list[float], values: list[float | None], offsets: dict[int, float]
) -> Timeline:
    """A timeline from samples in point and time order; samples without a value are left out."""
    x: list[float] = []
    y: list[float] = []
    starts: list[int] = []
    current, last_t = None, 0.0
    for point, t, value in zip(points, ts, values, strict=True):
        if value is None:
            continue
        if current is not None and point != current:
            starts.append(len(x))
        current, last_t = point, t
        x.append(offsets.get(point, 0.0) + t)
        y.append(float(value))
    return Timeline(x, y, starts, current, last_t)


def trace_budget(traces: int) -> int:
    """Samples per trace when `traces` lines share one chart."""
    return max(MIN_TRACE_SAMPLES, CHART_SAMPLES * 2 // max(traces, 1))
