"""The counters that moved between a compared cell and the baseline cell, each a test.

Each counter is compared on its own basis (runs/counters/kinds.py): per
transaction, or per second of the window for the few that follow the clock. The
test (runs/counters/evidence.py) is quasi-Poisson on the totals for events both
sides counted plenty of, Welch's on the logs of the repeats' rates for bytes and
times, and the exact Poisson test on the two totals where a side counted few
events or none ("appear", "vanish"): no mover skips its test. Every p-value of
the cell sits in one Benjamini-Hochberg family; a counter moved when its q is at
most FDR_Q and its change reaches the minimum effect.

Before anything is tested, the busier side must have counted MIN_EVENTS events
of an event counter: fewer cannot say how large a change is. Movers rank by the
least change their interval allows (effect and evidence together), and a group
of counters that read one quantity shows once. When nothing moved the cell says
so, with the closest counters listed apart as not significant (`near`).
"""

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import StrEnum

from agents.contract.reports.counter_catalogue import COUNTERS, Counter, missing_on
from runs.counters import kinds
from runs.counters.evidence import (
    RateRatio,
    count_ratio,
    dispersed_count_ratio,
    pooled_dispersion,
    repeat_ratios,
)
from runs.counters.wording import change_words, counts_words, rate_words
from runs.inference import stats

TOP_MOVERS = 3
# A test needs this many repeats a side (a spread needs two).
MIN_REPEATS_A_SIDE = 2
# The busier side must have counted this many events of an event counter before it is
# tested: with fewer, even the exact test's interval spans more than a factor of four.
MIN_EVENTS = 10
# Tested counters not moved but with an unadjusted p below this are listed as near.
NEAR_P = 0.05
# No event over an exposure bounds the rate below this many over it (95 %, Poisson).
EVENTS_A_ZERO_CAN_HIDE = 3.0

Number = int | float


class Change(StrEnum):
    """How a counter moved; stable values (API, exports)."""

    RATIO = "ratio"
    APPEARS = "appears"
    VANISHES = "vanishes"


@dataclass(frozen=True)
class Side:
    """One cell's counter over its repeats: each repeat's count and what it is divided by
    (transactions, or seconds for a counter that follows the clock)."""

    counts: list[float]
    exposures: list[float]

    @property
    def count(self) -> float:
        return sum(self.counts)

    @property
    def exposure(self) -> float:
        return sum(self.exposures)

    @property
    def rates(self) -> list[float]:
        return [
            count / exposure for count, exposure in zip(self.counts, self.exposures, strict=True)
        ]

    @property
    def rate(self) -> float:
        return self.count / self.exposure


@dataclass(frozen=True)
class CellCounters:
    """One cell's counters over its repeats, in repeat order: each counter's value per
    transaction (None where a repeat could not count it), its raw count in the window
    (`counts`, derived from the value when absent), the transactions each repeat counted
    and its window's seconds (None where unknown), and the server's version."""

    values: Mapping[str, Sequence[float | None]]
    transactions: Sequence[int | None]
    counts: Mapping[str, Sequence[Number | None]] = field(default_factory=dict)
    seconds: Sequence[float | None] = ()
    server_version_num: int | None = None

    def not_collected(self) -> list[str]:
        """What this cell's server version or configuration could not collect, in words."""
        if self.server_version_num is None:
            return []
        counted = {key for key, values in self.values.items() if any(v is not None for v in values)}
        return missing_on(self.server_version_num, counted)

    def side(self, key: str) -> Side | None:
        """`key` on its basis over the repeats that counted it; None when a counted repeat
        lacks the transactions or seconds to divide by."""
        per_window = kinds.basis(key) is kinds.Basis.WINDOW_SECOND
        values, counts = self.values.get(key, []), self.counts.get(key, [])
        counted: list[float] = []
        exposures: list[float] = []
        for index, value in enumerate(values):
            if value is None:
                continue
            transactions = _at(self.transactions, index)
            count = _at(counts, index)
            if count is None and transactions is not None:
                count = round(value * transactions, 6)
            divisor = _at(self.seconds, index) if per_window else transactions
            if count is None or not divisor:
                return None
            counted.append(float(count))
            exposures.append(float(divisor))
        return Side(counted, exposures) if counted else None


def _at(items: Sequence[Number | None], index: int) -> Number | None:
    return items[index] if index < len(items) else None


@dataclass(frozen=True)
class Mover:
    """One counter compared: its rates and totals on both sides, the test's ratio, its
    BH-adjusted q, and the counters that read the same quantity and moved too (`copies`)."""

    key: str
    own: Side
    base: Side
    found: RateRatio
    q: float
    copies: tuple[str, ...] = ()

    @property
    def counter(self) -> Counter:
        return COUNTERS[self.key]

    @property
    def basis(self) -> kinds.Basis:
        return kinds.basis(self.key)

    @property
    def change(self) -> Change:
        if self.base.count == 0:
            return Change.APPEARS
        if self.own.count == 0:
            return Change.VANISHES
        return Change.RATIO

    @property
    def why_basis(self) -> str:
        """Why the counter is compared per second of the window ("" per transaction)."""
        return kinds.PER_WINDOW.get(self.key, "")

    @property
    def words(self) -> str:
        """ "WAL bytes per transaction 1,273 → 2,873 (+126 % [+80, +183]), from 21 MB and
        32 MB": the rates, the change with its interval, and the counts behind them."""
        per = (
            "per second of the window"
            if self.basis is kinds.Basis.WINDOW_SECOND
            else ("per transaction")
        )
        unit = self.counter.unit
        rates = f"{rate_words(self.base.rate)} → {rate_words(self.own.rate)}"
        counts = counts_words(self.base.count, self.own.count, unit)
        said = f"{self.counter.label} {per} {rates} ({change_words(self.found)}), from {counts}"
        if self.copies:
            said += "; the same quantity as " + ", ".join(COUNTERS[k].label for k in self.copies)
        return said

    def as_document(self) -> dict[str, object]:
        """The mover as the API and the JSON export give it."""
        found = self.found
        finite_high = math.isfinite(found.high)
        return {
            "counter": self.key,
            "label": self.counter.label,
            "source": self.counter.source,
            "unit": self.counter.unit,
            "basis": self.basis.value,
            "change": self.change.value,
            "mean_per_transaction": self.own.rate,
            "baseline_mean_per_transaction": self.base.rate,
            "count": self.own.count,
            "baseline_count": self.base.count,
            "diff_pct": (found.ratio - 1) * 100 if found.finite else None,
            "diff_ci_low_pct": (found.low - 1) * 100,
            "diff_ci_high_pct": (found.high - 1) * 100 if finite_high else None,
            "p": found.p,
            "q": self.q,
            "test": found.test,
            "zero_floor_per_transaction": self._zero_floor(),
            "copies": list(self.copies),
            "words": self.words,
        }

    def _zero_floor(self) -> float | None:
        """For an appearing or vanishing counter, the highest rate its zero side could hide."""
        zero = {Change.APPEARS: self.base, Change.VANISHES: self.own}.get(self.change)
        return EVENTS_A_ZERO_CAN_HIDE / zero.exposure if zero else None


@dataclass(frozen=True)
class CounterChanges:
    """A compared cell's counters against the baseline's: those that moved, strongest
    first; the near ones (p below NEAR_P, not significant after BH or below the minimum
    effect); `collected` False when either cell has no counters to compare; what either
    cell's version or configuration could not collect (`not_collected`)."""

    moved: list[Mover]
    near: list[Mover]
    collected: bool
    not_collected: list[str] = field(default_factory=list)

    def as_document(self) -> dict[str, object]:
        return {
            "collected": self.collected,
            "movers": [mover.as_document() for mover in self.moved],
            "near": [mover.as_document() for mover in self.near],
            "not_collected": list(self.not_collected),
        }


def _count_test(own: Side, base: Side) -> RateRatio:
    """The test of an event counter's totals: quasi-Poisson when both sides counted plenty,
    else exact on the totals over the repeats' dispersion (so a cold first repeat's events
    weigh as what they are: one lump, not many independent events)."""
    if min(own.count, base.count) >= MIN_EVENTS:
        return dispersed_count_ratio(own.counts, own.exposures, base.counts, base.exposures)
    dispersion = pooled_dispersion([(own.counts, own.exposures), (base.counts, base.exposures)])
    return count_ratio(
        round(own.count / dispersion), own.exposure, round(base.count / dispersion), base.exposure
    )


def _testable(own: Side, base: Side, events: bool) -> bool:
    """Whether there is enough to test: something counted, two repeats a side, and for an
    event counter MIN_EVENTS on the busier side."""
    if own.count == 0 and base.count == 0:
        return False
    if min(len(own.rates), len(base.rates)) < MIN_REPEATS_A_SIDE:
        return False
    return not events or max(own.count, base.count) >= MIN_EVENTS


def _tested(cell: CellCounters, baseline: CellCounters) -> list[tuple[str, Side, Side, RateRatio]]:
    """Every counter with enough to test, and its test (the Welch ones in one pass)."""
    counted: list[tuple[str, Side, Side, RateRatio | None]] = []
    for key in filter(kinds.compared, COUNTERS):
        own, base = cell.side(key), baseline.side(key)
        if own is None or base is None:
            continue
        events = kinds.counts_events(key)
        if _testable(own, base, events):
            counted.append((key, own, base, _count_test(own, base) if events else None))
    welch = iter(repeat_ratios([(o.rates, b.rates) for _k, o, b, r in counted if r is None]))
    found = []
    for key, own, base, ratio in counted:
        tested = ratio if ratio is not None else next(welch)
        if tested is not None:
            found.append((key, own, base, tested))
    return found


def _rank_key(mover: Mover) -> tuple[float, float, int]:
    order = list(COUNTERS)
    size = abs(math.log(mover.found.ratio)) if mover.found.finite else math.inf
    return (-mover.found.least_change, -size, order.index(mover.key))


def _once_per_quantity(movers: list[Mover], shown: list[Mover]) -> list[Mover]:
    """`movers` (ranked) with each group of copies reduced to one, at the place of its best:
    the group's first declared member among them, naming the others; `shown`: movers
    already listed, whose groups are left out."""
    taken = {kinds.same_quantity(mover.key) for mover in shown}
    members: dict[tuple[str, ...], list[Mover]] = {}
    for mover in movers:
        group = kinds.same_quantity(mover.key)
        if group not in taken:
            members.setdefault(group, []).append(mover)
    kept = []
    for group, found in members.items():
        named = min(found, key=lambda mover: group.index(mover.key))
        copies = tuple(mover.key for mover in found if mover is not named)
        kept.append(replace(named, copies=copies))
    return kept


def counter_changes(
    cell: CellCounters,
    baseline: CellCounters,
    min_effect_pct: float = stats.DEFAULT_MIN_EFFECT_PCT,
    limit: int = TOP_MOVERS,
) -> CounterChanges:
    """How `cell`'s counters moved from `baseline`'s: at most `limit` movers and near ones."""
    tested = _tested(cell, baseline)
    q_values = stats.adjust_p_values([ratio.p for _k, _o, _b, ratio in tested])
    movers = [
        Mover(key, own, base, ratio, q)
        for (key, own, base, ratio), q in zip(tested, q_values, strict=True)
    ]
    moved = sorted((m for m in movers if _is_mover(m, min_effect_pct)), key=_rank_key)
    near = sorted(
        (m for m in movers if not _is_mover(m, min_effect_pct) and m.found.p < NEAR_P),
        key=lambda m: (m.found.p, _rank_key(m)),
    )
    shown = _once_per_quantity(moved, [])
    collected = bool(cell.values) and bool(baseline.values)
    missing = list(dict.fromkeys(cell.not_collected() + baseline.not_collected()))
    return CounterChanges(
        shown[:limit], _once_per_quantity(near, shown)[:limit], collected, missing
    )


def _is_mover(mover: Mover, min_effect_pct: float) -> bool:
    found = mover.found
    reaches = not found.finite or abs(found.ratio - 1) * 100 >= min_effect_pct
    return mover.q <= stats.FDR_Q and found.least_change > 0 and reaches


def top_movers(
    cell: CellCounters,
    baseline: CellCounters,
    min_effect_pct: float = stats.DEFAULT_MIN_EFFECT_PCT,
    limit: int = TOP_MOVERS,
) -> list[Mover]:
    """The `limit` counters that moved most from `baseline` to `cell`."""
    return counter_changes(cell, baseline, min_effect_pct, limit).moved
