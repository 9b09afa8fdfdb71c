"""Rounds compared in pairs: each repeat against the baseline's repeat of the same round.

Where an experiment's cells run in rounds (every cell measured once per round, in a
shuffled order, on one host), a round's runs share the host's state of the moment: a
slower host, a noisy neighbour, a drift over the hours. The unpaired test (Welch on
logs, runs/inference/stats.py) counts that shared part twice in the error; the log
ratio of a cell's repeat to the baseline's repeat of the same round cancels it
(docs/benchmarks.md measured a within-round correlation of 0.61: the rounds' ratios
spread by 5.1 %, the unpaired difference by 8.0 %).

- `pair_rounds` keeps the rounds both sides measured; a round either side lacks (a run
  that failed, a point left out) is incomplete, dropped and named.
- `paired_difference`: Student's t on the rounds' log ratios (mean, sd / sqrt(n),
  n - 1 df): the p-value, the 95 % interval and the 1 - 2 ALPHA interval of the TOST,
  back-transformed to a ratio less one, as scipy.stats.ttest_1samp gives them.
- Below MIN_PAIRS complete rounds the comparison is unpaired, and says so.
- A duet (agents/duet.py) measures both cells of a round at the same time on one host:
  its pairs are simultaneous windows (`simultaneous`), and its design says "duet".
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from runs.inference.stats import ALPHA, MIN_REPEATS, Difference, noncentrality_for_power

MIN_PAIRS = MIN_REPEATS
PAIRED = "paired"
UNPAIRED = "unpaired"
DUET = "duet"


@dataclass(frozen=True)
class Pairing:
    """A cell's repeats matched with the baseline's by round: `values[i]` and
    `baseline[i]` were measured in round `rounds[i]`; `incomplete` are the rounds
    only one side has (or one side has twice), dropped."""

    values: tuple[float, ...]
    baseline: tuple[float, ...]
    rounds: tuple[int, ...]
    incomplete: tuple[int, ...]
    # Each round's two windows ran at the same time (a duet), not one after the other.
    simultaneous: bool = False

    @property
    def design(self) -> str:
        """The paired design's name: "duet" for simultaneous windows, else "paired"."""
        return DUET if self.simultaneous else PAIRED

    @property
    def is_paired(self) -> bool:
        """Enough complete rounds for the paired answer."""
        return len(self.rounds) >= MIN_PAIRS

    @property
    def total(self) -> int:
        return len(self.rounds) + len(self.incomplete)

    def log_ratios(self) -> np.ndarray:
        """Each complete round's log(value / baseline)."""
        return np.log(np.asarray(self.values, dtype=float)) - np.log(
            np.asarray(self.baseline, dtype=float)
        )

    def describe(self) -> str:
        """ "paired over 7 of 8 rounds; round 3 incomplete", or why it is unpaired."""
        dropped = ""
        if self.incomplete:
            plural = "s" if len(self.incomplete) > 1 else ""
            numbers = ", ".join(str(r) for r in self.incomplete)
            dropped = f"; round{plural} {numbers} incomplete"
        if self.is_paired:
            counted = (
                f"{len(self.rounds)} of {self.total}" if self.incomplete else f"{len(self.rounds)}"
            )
            return f"{self.design} over {counted} rounds{dropped}"
        return (
            f"unpaired: {len(self.rounds)} complete round{'s' if len(self.rounds) != 1 else ''}"
            f" of {self.total}, fewer than {MIN_PAIRS} to pair{dropped}"
        )


def too_few_for_signed_ranks(pairing: Pairing) -> str:
    """The design phrase of a paired cell whose ratios need ranks but whose rounds are too
    few for signed ranks at the level asked (runs/inference/ranks.py)."""
    return (
        f"unpaired ranks: {len(pairing.rounds)} complete rounds are too few for signed "
        "ranks at this level"
    )


def pair_rounds(
    values: Sequence[float],
    value_rounds: Sequence[int],
    baseline: Sequence[float],
    baseline_rounds: Sequence[int],
    simultaneous: bool = False,
) -> Pairing:
    """Match each side's repeats by round (each sequence gives the round of the value at
    the same position); a round measured once on each side is complete. `simultaneous`:
    each round's two sides ran at the same time (a duet)."""
    if len(values) != len(value_rounds) or len(baseline) != len(baseline_rounds):
        raise ValueError("each repeat needs the round it was measured in")
    mine = _once(values, value_rounds)
    theirs = _once(baseline, baseline_rounds)
    every = sorted(set(value_rounds) | set(baseline_rounds))
    complete = [r for r in every if r in mine and r in theirs]
    return Pairing(
        values=tuple(mine[r] for r in complete),
        baseline=tuple(theirs[r] for r in complete),
        rounds=tuple(complete),
        incomplete=tuple(r for r in every if r not in complete),
        simultaneous=simultaneous,
    )


def _once(values: Sequence[float], rounds: Sequence[int]) -> dict[int, float]:
    """Round -> its value, for the rounds holding exactly one value."""
    seen: dict[int, list[float]] = {}
    for value, round_number in zip(values, rounds, strict=True):
        seen.setdefault(round_number, []).append(value)
    return {r: found[0] for r, found in seen.items() if len(found) == 1}


@dataclass(frozen=True)
class PairedSpread:
    """What a paired comparison rests on: the rounds' mean log ratio, their sd and count."""

    log_estimate: float
    sd: float
    n: int

    @property
    def se(self) -> float:
        return self.sd / math.sqrt(self.n)

    @property
    def df(self) -> int:
        return self.n - 1


def paired_spread(log_ratios: np.ndarray) -> PairedSpread | None:
    """The rounds' mean log ratio and its spread; None below two rounds."""
    if log_ratios.size < 2:
        return None
    return PairedSpread(float(log_ratios.mean()), float(log_ratios.std(ddof=1)), log_ratios.size)


def paired_difference(log_ratios: np.ndarray) -> Difference | None:
    """Student's t on the rounds' log ratios: the ratio of geometric means less one in
    percent, its 95 % interval and p, and the 1 - 2 ALPHA interval on the log scale (TOST);
    None below two rounds. No spread at all: the difference is exact."""
    spread = paired_spread(log_ratios)
    if spread is None:
        return None
    estimate, se = spread.log_estimate, spread.se
    if se > 0:  # as scipy.stats.ttest_1samp(log_ratios, 0), without its per-call overhead
        p = float(2 * stats.t.sf(abs(estimate) / se, spread.df))
    else:
        p = 1.0 if estimate == 0 else 0.0
    half = float(stats.t.ppf(1 - ALPHA / 2, spread.df)) * se
    narrow = float(stats.t.ppf(1 - ALPHA, spread.df)) * se
    return Difference(
        pct=math.expm1(estimate) * 100.0,
        ci_low_pct=math.expm1(estimate - half) * 100.0,
        ci_high_pct=math.expm1(estimate + half) * 100.0,
        p=p,
        log_equivalence=(estimate - narrow, estimate + narrow),
    )


def paired_detectable_effect_pct(sd: float, n: int) -> float | None:
    """Smallest ratio difference (percent, upwards) the paired t-test over `n` rounds whose
    log ratios spread by `sd` detects with POWER at ALPHA; None below two rounds."""
    if n < 2:
        return None
    return math.expm1(noncentrality_for_power(float(n - 1)) * sd / math.sqrt(n)) * 100.0
