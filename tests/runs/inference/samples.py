"""Latency samples for the capacity tests' simulated probes."""

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ArraySample:
    """Sorted latencies (ms) in a numpy array, read by rank (quantiles.LatencySample)."""

    values: np.ndarray

    @property
    def count(self) -> int:
        return len(self.values)

    def at_rank(self, rank: int) -> float:
        return float(self.values[rank - 1])
