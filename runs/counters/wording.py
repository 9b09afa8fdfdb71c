"""How a counter's change reads: rates, the change with its interval, the counts behind it.

"+126 % [+80, +183]" below a tenfold increase, "×13,111 [×9,764, ×17,606]" when
even the interval's low end is ten times; a counter that appears from none
reads "appear, at least ×12" (the interval's low end: its high end is
unbounded), one that vanishes "vanish, at least -92 %".
"""

import math

from runs.counters.evidence import RateRatio

# An increase whose whole interval is at least this reads as a multiple ("×12")
# rather than a percent ("+1,100 %").
TIMES_FROM_PCT = 900.0
BYTE_UNITS = ("bytes", "kB", "MB", "GB", "TB")


def signed(pct: float) -> str:
    return f"{pct:+.0f}" if abs(pct) >= 10 else f"{pct:+.1f}"


def times(ratio: float) -> str:
    """A ratio of 131.11 as "×131"; of 12 as "×12.0"."""
    return f"×{ratio:,.0f}" if ratio >= 100 else f"×{ratio:.1f}"


def change_words(found: RateRatio) -> str:
    """The change and its 95 % interval."""
    if not math.isfinite(found.high):
        return f"appear, at least {times(found.low)}"
    if found.ratio == 0:
        return f"vanish, at least {signed((found.high - 1) * 100)} %"
    low_pct, high_pct = (found.low - 1) * 100, (found.high - 1) * 100
    if low_pct >= TIMES_FROM_PCT:
        return f"{times(found.ratio)} [{times(found.low)}, {times(found.high)}]"
    return f"{signed((found.ratio - 1) * 100)} % [{signed(low_pct)}, {signed(high_pct)}]"


def rate_words(value: float) -> str:
    """1273.4 as "1,273"; 0.000213 as "0.000213"; 2.1 as "2.1"."""
    if value >= 100:
        return f"{value:,.0f}"
    return f"{value:.3g}"


def quantity_words(amount: float, unit: str) -> str:
    """A total in its unit: 21,456,000 bytes as "21 MB", 36 blocks as "36 blocks"."""
    if unit == "bytes":
        scaled, index = amount, 0
        while scaled >= 1000 and index < len(BYTE_UNITS) - 1:
            scaled, index = scaled / 1000, index + 1
        shown = f"{scaled:.0f}" if scaled >= 10 or index == 0 else f"{scaled:.1f}"
        return f"{shown} {BYTE_UNITS[index]}"
    if unit in ("ms", "s"):
        return f"{amount:,.3g} {unit}" if amount < 100 else f"{amount:,.0f} {unit}"
    return f"{amount:,.0f} {unit}"


def counts_words(base: float, own: float, unit: str) -> str:
    """The two totals behind a change: "21 MB and 32 MB", "0 and 36 blocks"."""
    if unit == "bytes":
        return f"{quantity_words(base, unit)} and {quantity_words(own, unit)}"
    return f"{quantity_words(base, unit).removesuffix(' ' + unit)} and {quantity_words(own, unit)}"
