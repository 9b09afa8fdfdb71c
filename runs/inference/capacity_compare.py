"""Two capacities compared: the ratio of a cell's capacity to the baseline's, its
interval and the verdict.

Each capacity's interval runs from its highest passing rate to its lowest failing one
(runs/inference/capacity_search.py), each end a probe decided by its own 95 % interval,
widened where the host's windows spread to a line's crossing of the limit
(runs/inference/capacity_crossing.py).
The ratio is estimated by the ratio of the two estimates; its interval combines the
two intervals conservatively, [cell's lower / baseline's upper, cell's upper /
baseline's lower]: it holds the true ratio whenever both capacity intervals hold their
capacities, so it misses at most as often as the two miss together (Bonferroni).
tests/runs/inference/test_capacity_compare.py checks that step on intervals of any
width, and the coverage on seeded simulated searches (whose capacities come out so
precise that a far narrower interval would pass there too).

The verdict uses the lab's words (runs/analysis/verdicts.py):

- faster/slower: the whole interval above (below) 1 and the estimate at least the
  minimum effect away from it;
- same within ±m %: otherwise, when the whole interval lies inside [1 / (1 + m), 1 + m];
- undecided: neither, or a capacity not confirmed (its floor passed, or its ceiling
  failed, in fewer windows than `COMPARED_CONFIRMING_PROBES`: on a noisy host one
  window's stall would be read as the server's limit, runs/inference/capacity_search.py);
- no ratio: a capacity that is no interval (below the lowest probe, above the highest,
  at least a rate, not found): nothing is extrapolated, and the sentence says which.

A "same" needs each capacity narrowed to about half the margin, which the searches of
a comparison do (`comparison_precision`). Their floors pass, and their ceilings fail,
in three windows each: on simulated searches where one window in two stalls
(tests/runs/inference/test_capacity_compare.py), an A/A was called faster or slower in
30 of 100 comparisons with each end decided once, 4 with three windows each (at most
10 of 100 may be, for a 90 % interval).
"""

import math
from dataclasses import dataclass
from enum import StrEnum

from runs.inference.capacity_search import DEFAULT_PRECISION, Capacity, Found

# Each capacity's interval holds its capacity with at least 95 %, so the ratio's with 90 %.
RATIO_CONFIDENCE_PCT = 90
# The windows each compared capacity's ceiling must fail in (see the module's docstring).
COMPARED_CONFIRMING_PROBES = 3


class RatioVerdict(StrEnum):
    """The word a compared cell's capacity gets; stable values (API, page)."""

    FASTER = "faster"
    SLOWER = "slower"
    SAME = "same"
    UNDECIDED = "undecided"
    NO_RATIO = "no ratio"


@dataclass(frozen=True)
class CapacityRatio:
    """A cell's capacity over the baseline's: the estimate and its interval (None with no
    ratio), the verdict and its sentence."""

    verdict: RatioVerdict
    estimate: float | None
    lower: float | None
    upper: float | None
    sentence: str


def comparison_precision(margin_pct: float) -> float:
    """How narrow each search of a comparison makes its capacity's interval (a share):
    half the margin, so that two intervals can fit inside it together; the usual
    precision where that is finer."""
    return min(DEFAULT_PRECISION, margin_pct / 200.0)


def capacity_ratio(
    cell: Capacity, baseline: Capacity, margin_pct: float, min_effect_pct: float
) -> CapacityRatio:
    """The verdict on `cell`'s capacity against `baseline`'s (see the module's rules)."""
    missing = _no_ratio_reason(cell, "this cell") or _no_ratio_reason(baseline, "the baseline")
    if missing:
        return CapacityRatio(RatioVerdict.NO_RATIO, None, None, None, f"no ratio: {missing}")
    assert cell.estimate and cell.lower and cell.upper
    assert baseline.estimate and baseline.lower and baseline.upper
    estimate = cell.estimate / baseline.estimate
    lower, upper = cell.lower / baseline.upper, cell.upper / baseline.lower
    interval = f"[{_pct(lower):+.1f}, {_pct(upper):+.1f}] ({RATIO_CONFIDENCE_PCT} % interval)"
    bound = math.log1p(margin_pct / 100.0)
    reaches = abs(math.log(estimate)) >= math.log1p(min_effect_pct / 100.0)
    if not (cell.confirmed and baseline.confirmed):
        whose = "this cell's" if not cell.confirmed else "the baseline's"
        verdict = RatioVerdict.UNDECIDED
        sentence = (
            f"undecided: {_pct(estimate):+.1f} % {interval}, but {whose} capacity is not "
            "confirmed (its floor or its ceiling was not decided in enough windows before "
            "the budget ran out: raise the most probes)"
        )
    elif lower > 1 and reaches:
        verdict, sentence = RatioVerdict.FASTER, f"faster by {_pct(estimate):.1f} % {interval}"
    elif upper < 1 and reaches:
        verdict = RatioVerdict.SLOWER
        sentence = f"slower by {-_pct(estimate):.1f} % {interval}"
    elif -bound <= math.log(lower) and math.log(upper) <= bound:
        verdict, sentence = RatioVerdict.SAME, f"same within ±{margin_pct:g} % {interval}"
    else:
        verdict = RatioVerdict.UNDECIDED
        sentence = (
            f"undecided: {_pct(estimate):+.1f} % {interval}, neither clear of 1 nor "
            f"within ±{margin_pct:g} %"
        )
    return CapacityRatio(verdict, estimate, lower, upper, sentence)


def _no_ratio_reason(capacity: Capacity, whose: str) -> str:
    """Why `capacity` gives no ratio ("" when it does)."""
    if capacity.found == Found.FOUND and capacity.estimate and capacity.lower and capacity.upper:
        return ""
    if capacity.found == Found.BELOW:
        return f"{whose}'s capacity is below the lowest probe (lower the range)"
    if capacity.found == Found.ABOVE:
        return f"{whose}'s capacity is above the highest probe (raise the range)"
    if capacity.found == Found.AT_LEAST:
        return f"{whose}'s capacity is only known to be at least {capacity.lower:,.0f} tps"
    return f"{whose}'s capacity was not found"


def _pct(ratio: float) -> float:
    return (ratio - 1.0) * 100.0
