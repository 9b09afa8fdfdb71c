"""How much the host's windows disagree at one rate, and when the answer must say so.

On a quiet host two 60 s windows at one offered rate give nearly the same percentile;
on a shared or cloud VM they can differ severalfold (docs/benchmarks.md: 17.3, 19.4
and 42.3 ms at 975 tps). A capacity's interval runs from the floor (the highest rate
whose windows passed) to the ceiling (the lowest whose windows failed), and where one
window's percentile is that uncertain, a floor or a ceiling next to the capacity may be
a lucky or an unlucky window. Seeded searches (100 seeds, knees 1.5 to 2.5, 60 s
windows) held the true capacity in 100 % of their intervals on a steady host, but in 82
to 92 % where every window's latencies were scaled by e^N(0, 0.1), 70 to 74 % at 0.3
and 62 to 67 % at 0.5 (tests/runs/inference/test_capacity_spread.py; docs/decisions.md).

The spread is pooled over the rates probed more than once: each window's own estimate
of the percentile (windows the host stalled in are set aside before), the sd of their
logs about their rate's mean. The answer says it once it rests on at least
MIN_SPREAD_DEGREES degrees of freedom and reaches SPREAD_SAID.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

# Degrees of freedom (windows less rates) before the spread is said.
MIN_SPREAD_DEGREES = 2
# The sd of the log percentile from which the answer says its interval may miss: said
# in 32 to 39 % of the seeded searches at a spread of 0.1, 92 to 95 % at 0.3, never on a
# steady host nor at 0.05 (where they held the capacity in 91 to 98 %).
SPREAD_SAID = 0.1


@dataclass(frozen=True)
class WindowSpread:
    """The pooled sd of a window's log percentile about its rate's mean, the windows and
    the rates it rests on."""

    sd: float
    windows: int
    rates: int

    @property
    def percent(self) -> float:
        """The spread as a factor, in percent: one sd of the log is x e^sd."""
        return 100.0 * math.expm1(self.sd)


def window_spread(rates: Sequence[Sequence[float | None]]) -> WindowSpread | None:
    """The spread of the windows' estimates (ms; each rate's counted windows, None where a
    window gave none); None below MIN_SPREAD_DEGREES."""
    squares, windows, repeated = 0.0, 0, 0
    for estimates in rates:
        logs = [math.log(e) for e in estimates if e is not None and e > 0]
        if len(logs) < 2:
            continue
        mean = sum(logs) / len(logs)
        squares += sum((value - mean) ** 2 for value in logs)
        windows += len(logs)
        repeated += 1
    degrees = windows - repeated
    if degrees < MIN_SPREAD_DEGREES:
        return None
    return WindowSpread(math.sqrt(squares / degrees), windows, repeated)


def window_spread_said(spread: WindowSpread | None, percentile: str) -> str:
    """What the answer says of the spread, "" where it is small or not measured."""
    if spread is None or spread.sd < SPREAD_SAID:
        return ""
    return (
        f"the {percentile} of repeated windows at one rate spread {spread.percent:.0f} % here "
        f"({spread.windows} windows at {spread.rates} rates): a floor or ceiling next to the "
        "capacity may be one lucky or unlucky window, so the interval may miss it (longer "
        "windows or a quieter host narrow it)"
    )
