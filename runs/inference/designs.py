"""How many rounds an effect needs in each design, from a host's measured spread.

A host's spread comes from the rounds of its recent experiments
(runs/inference/variance.py `paired_variance`): `unpaired` is the variance of
the difference of two runs' log tps (var(a) + var(b)), `paired` that of a round's
log ratio, the two runs measured in the same round. Unpaired rounds are sized as
the verdict's Welch test on logs is (runs/inference/stats.py `repeats_needed`,
each side's sd the half of `unpaired`), paired rounds as its t-test on the
rounds' log ratios: both at ALPHA with POWER for a true effect of that size.
Duet rounds (both cells in one window, agents/duet.py) are sized as paired rounds
are, from the spread of the log ratios of the host's duet experiments' simultaneous
windows; a host without duet rounds has no duet spread, and its slot says so (the
ratio of two windows at once is not the back-to-back one less something known).
"""

import math
from dataclasses import dataclass

from runs.inference.stats import MAX_REPEATS_ADVISED, MIN_REPEATS, POWER, power, repeats_needed

UNPAIRED = "unpaired"
PAIRED = "paired"
DUET = "duet"
DESIGNS = (UNPAIRED, PAIRED, DUET)


@dataclass(frozen=True)
class DesignRounds:
    """One design's rounds for an effect: None where it needs more than MAX_REPEATS_ADVISED,
    or (`measured` False) where the host has no spread for that design yet."""

    design: str
    rounds: int | None
    measured: bool


def paired_rounds_needed(ratio_sd: float, effect_pct: float) -> int | None:
    """Rounds for POWER to find a true `effect_pct` with Student's t on the rounds' log
    ratios (sd `ratio_sd`); None: more than MAX_REPEATS_ADVISED."""
    if ratio_sd == 0:
        return MIN_REPEATS
    if effect_pct <= 0:
        return None
    effect = math.log1p(effect_pct / 100.0)

    def enough(n: int) -> bool:
        return power(effect / (ratio_sd / math.sqrt(n)), n - 1) >= POWER

    if not enough(MAX_REPEATS_ADVISED):
        return None
    low, high = MIN_REPEATS, MAX_REPEATS_ADVISED
    while low < high:
        middle = (low + high) // 2
        low, high = (low, middle) if enough(middle) else (middle + 1, high)
    return low


def rounds_by_design(
    unpaired_variance: float | None,
    paired_variance: float | None,
    duet_variance: float | None,
    effect_pct: float,
) -> list[DesignRounds]:
    """Each design's rounds for `effect_pct` at the host's spread (log-scale variances;
    None: not measured on the host, that design's slot unmeasured)."""
    unpaired = (
        DesignRounds(UNPAIRED, None, False)
        if unpaired_variance is None
        else DesignRounds(
            UNPAIRED, repeats_needed(math.sqrt(unpaired_variance / 2), effect_pct), True
        )
    )
    return [
        unpaired,
        _paired_design(PAIRED, paired_variance, effect_pct),
        _paired_design(DUET, duet_variance, effect_pct),
    ]


def _paired_design(design: str, ratio_variance: float | None, effect_pct: float) -> DesignRounds:
    if ratio_variance is None:
        return DesignRounds(design, None, False)
    return DesignRounds(design, paired_rounds_needed(math.sqrt(ratio_variance), effect_pct), True)
