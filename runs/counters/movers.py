"""The counters that moved most between a compared cell and the baseline cell.

Each counter's per-transaction values over the repeats of both cells are
compared as the tps verdicts are: the ratio of geometric means with Welch's
interval on logs (runs/inference/stats.py), its p-value adjusted with the
cell's other counters (Benjamini-Hochberg). A counter that moved is one whose
adjusted p is at most FDR_Q and whose change reaches the minimum effect.

Zeros have no logarithm and a ratio from zero means nothing, so:

- zero in every repeat of the baseline and above zero in every repeat of the
  cell: the counter *appears*; the other way round it *vanishes*, and reads
  "0 → 2.1". A zero over n transactions only says the rate is below 3 / n
  (the 95 % Poisson bound for no event seen, in the counter's unit), so the
  change is at least the ratio of the other side's mean to that floor; it is
  ranked by that least ratio beside the others, and left out when the mean does
  not clear the floor. Two buffer writes in 100,000 transactions appearing then
  rank below blocks read going from none to two a transaction;
- zero in some repeats of a side and not in others: not ranked (there is no
  honest interval for it with a few repeats);
- zero everywhere: nothing moved.

Every mover is ranked by the size of the change on the log scale (a doubling
and a halving weigh the same), largest first.
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

from agents.contract.reports.counters import COUNTERS, Counter
from runs.inference import stats

TOP_MOVERS = 3
# An increase whose whole interval is at least this reads as a multiple ("×12")
# rather than a percent ("+1,100 %").
TIMES_FROM_PCT = 900.0
# No event in n transactions bounds the rate below this many over n (95 %, Poisson).
EVENTS_A_ZERO_CAN_HIDE = 3.0
# Appearing or vanishing needs the same answer in at least this many repeats a side,
# as an interval needs two.
MIN_REPEATS_A_SIDE = 2


class Change(StrEnum):
    """How a counter moved; stable values (API, exports)."""

    RATIO = "ratio"
    APPEARS = "appears"
    VANISHES = "vanishes"


@dataclass(frozen=True)
class CellCounters:
    """One cell's counters over its repeats: each counter key -> its per-transaction value
    in every repeat (None where a repeat could not count it), and the transactions each
    repeat counted (None where pgbench reported none), in the same order."""

    values: Mapping[str, Sequence[float | None]]
    transactions: Sequence[int | None]

    def counted(self, key: str) -> tuple[list[float], int | None]:
        """The repeats' values of `key` that were counted, and the transactions they rest
        on (None when a counted repeat's count is unknown)."""
        pairs = [
            (value, count)
            for value, count in zip(self.values.get(key, []), self.transactions, strict=False)
            if value is not None
        ]
        counts = [count for _value, count in pairs]
        total = None if None in counts else sum(c for c in counts if c is not None)
        return [value for value, _count in pairs], total


@dataclass(frozen=True)
class Mover:
    """One counter that moved: its means per transaction on both sides and, for a ratio,
    the difference with its interval and adjusted p; for an appearing or vanishing one,
    `floor`, the highest rate per transaction the zero side's repeats could hide."""

    key: str
    change: Change
    mean: float
    baseline_mean: float
    difference: stats.Difference | None = None
    q: float | None = None
    floor: float | None = None

    @property
    def counter(self) -> Counter:
        return COUNTERS[self.key]

    @property
    def words(self) -> str:
        """ "full-page images per transaction +310 % [+280, +340]", "... ×13,111 [×9,764,
        ×17,606]" when even the interval's low end is ten times, or "... appear (0 → 2.1)"."""
        subject = f"{self.counter.label} per transaction"
        if self.change is Change.APPEARS:
            return f"{subject} appear (0 → {_plain(self.mean)})"
        if self.change is Change.VANISHES:
            return f"{subject} vanish ({_plain(self.baseline_mean)} → 0)"
        if self.difference is None:
            raise ValueError(f"a ratio mover of {self.key} without its difference")
        found = self.difference
        if found.ci_low_pct >= TIMES_FROM_PCT:
            low, high = _times(found.ci_low_pct), _times(found.ci_high_pct)
            return f"{subject} {_times(found.pct)} [{low}, {high}]"
        interval = f"[{_signed(found.ci_low_pct)}, {_signed(found.ci_high_pct)}]"
        return f"{subject} {_signed(found.pct)} % {interval}"

    @property
    def weight(self) -> float:
        """How far it moved on the log scale; for an appearing or vanishing counter, at
        least how far (from the zero side's floor)."""
        if self.difference is not None:
            return abs(math.log1p(self.difference.pct / 100.0))
        if self.floor is None:
            raise ValueError(f"an {self.change} mover of {self.key} without its floor")
        return math.log(max(self.mean, self.baseline_mean) / self.floor)

    def as_document(self) -> dict[str, object]:
        """The mover as the API and the JSON export give it."""
        found = self.difference
        return {
            "counter": self.key,
            "label": self.counter.label,
            "source": self.counter.source,
            "unit": self.counter.unit,
            "change": self.change.value,
            "mean_per_transaction": self.mean,
            "baseline_mean_per_transaction": self.baseline_mean,
            "diff_pct": found.pct if found else None,
            "diff_ci_low_pct": found.ci_low_pct if found else None,
            "diff_ci_high_pct": found.ci_high_pct if found else None,
            "p": found.p if found else None,
            "q": self.q,
            "zero_floor_per_transaction": self.floor,
            "words": self.words,
        }


def _times(pct: float) -> str:
    """+1,311,044 % as "×13,111"."""
    ratio = 1 + pct / 100
    return f"×{ratio:,.0f}" if ratio >= 100 else f"×{ratio:.1f}"


def _signed(pct: float) -> str:
    return f"{pct:+.0f}" if abs(pct) >= 10 else f"{pct:+.1f}"


def _plain(value: float) -> str:
    return f"{value:.3g}"


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values)


def _floor(transactions: int | None) -> float | None:
    """The highest rate per transaction that zero events in `transactions` can hide."""
    if not transactions:
        return None
    return EVENTS_A_ZERO_CAN_HIDE / transactions


def _zero_change(
    key: str, own: tuple[list[float], int | None], base: tuple[list[float], int | None]
) -> Mover | None:
    """The counter as appearing or vanishing, when one side is zero in every repeat, the
    other in none, and the other's mean clears what the zeros could hide; else None."""
    (values, own_transactions), (base_values, base_transactions) = own, base
    if all(v == 0 for v in base_values) and all(v > 0 for v in values):
        mover = Mover(key, Change.APPEARS, _mean(values), 0.0, floor=_floor(base_transactions))
    elif all(v > 0 for v in base_values) and all(v == 0 for v in values):
        mover = Mover(key, Change.VANISHES, 0.0, _mean(base_values), floor=_floor(own_transactions))
    else:
        return None
    return mover if mover.floor is not None and mover.weight > 0 else None


def top_movers(
    cell: CellCounters,
    baseline: CellCounters,
    min_effect_pct: float = stats.DEFAULT_MIN_EFFECT_PCT,
    limit: int = TOP_MOVERS,
) -> list[Mover]:
    """The `limit` counters that moved most from `baseline` to `cell`."""
    moved: list[Mover] = []
    keys: list[str] = []
    pairs: list[tuple[list[float], list[float]]] = []
    for key in COUNTERS:
        counted, baseline_counted = cell.counted(key), baseline.counted(key)
        own, base = counted[0], baseline_counted[0]
        if min(len(own), len(base)) < MIN_REPEATS_A_SIDE:
            continue
        if 0 in own or 0 in base:
            zero_change = _zero_change(key, counted, baseline_counted)
            moved.extend([zero_change] if zero_change else [])
            continue
        keys.append(key)
        pairs.append((own, base))
    differences = stats.relative_differences(pairs)
    tested = [(k, p, d) for k, p, d in zip(keys, pairs, differences, strict=True) if d]
    q_values = stats.adjust_p_values([d.p for _k, _p, d in tested])
    for (key, (own, base), found), q in zip(tested, q_values, strict=True):
        if q <= stats.FDR_Q and abs(found.pct) >= min_effect_pct:
            moved.append(Mover(key, Change.RATIO, _mean(own), _mean(base), found, q))
    order = list(COUNTERS)
    moved.sort(key=lambda mover: (-mover.weight, order.index(mover.key)))
    return moved[:limit]
