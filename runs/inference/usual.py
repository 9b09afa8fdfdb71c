"""A host's usual spread of a measurement, and whether a new value is outside it.

Used for the host canary (agents/observe/canary.py): times, so on logs (a
host twice as slow is as far out as one twice as fast). The band is the
median of the last values plus or minus BAND_SDS robust standard deviations
(1.4826 MAD of the logs), never narrower than the measurement's own floor
(a loop's median of runs is repeatable to about a percent on a quiet host,
which would otherwise flag every wobble as a change).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from runs.inference.ranks import robust_log_sd

# 3.5 robust SDs: the modified z-score beyond which Iglewicz and Hoaglin call a value an
# outlier; for log-normal values about 1 in 2000 of a steady host's canaries is flagged.
BAND_SDS = 3.5
# Fewer earlier values than this have no spread worth the name: nothing is flagged.
MIN_HISTORY = 5


@dataclass(frozen=True)
class UsualBand:
    """The usual values: `median`, and `low` to `high` around it; `sd` on the log scale
    (the floor's when the values spread less)."""

    median: float
    low: float
    high: float
    sd: float
    values: int

    def holds(self, value: float) -> bool:
        return self.low <= value <= self.high

    def describe(self, unit: str) -> str:
        return (
            f"usual {self.median:.3g} {unit} ({self.low:.3g} to {self.high:.3g}: median "
            f"± {BAND_SDS:g} robust SDs of the last {self.values})"
        )


def usual_band(history: Sequence[float], floor_sd: float) -> UsualBand | None:
    """The band of positive `history` values; None with fewer than MIN_HISTORY of them."""
    values = [value for value in history if value > 0]
    if len(values) < MIN_HISTORY:
        return None
    logs = sorted(math.log(value) for value in values)
    middle = len(logs) // 2
    center = logs[middle] if len(logs) % 2 else (logs[middle - 1] + logs[middle]) / 2
    sd = max(robust_log_sd(values), floor_sd)
    return UsualBand(
        median=math.exp(center),
        low=math.exp(center - BAND_SDS * sd),
        high=math.exp(center + BAND_SDS * sd),
        sd=sd,
        values=len(values),
    )
