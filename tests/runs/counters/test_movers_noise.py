"""Top movers under realistic counter noise, simulated (seeded, no server): A/A cell pairs
rarely name a mover, and a planted 30 % change in one of the catalogue's counters (68, of
which 61 can be planted: not per window, compared) is found.

Each simulated cell has repeats of about 6,000 transactions (pgbench's count varies
with tps from repeat to repeat, windows of 60 s). Per counter:

- an event counter: Poisson counts at a rate per transaction from 0.0001 (a block read
  now and then) to 30, the rate itself wandering 3 % between repeats;
- bytes and times: a value per transaction wandering 3 % between repeats;
- the counters that follow the clock: a fixed count a window (five buffers from the
  background writer, no timed checkpoint), whatever the transactions.

Measured with this seed over the 66 counters (2026-11-29, with the tables' and wait
events' counters and the exact test's division by the repeats' dispersion): A/A pairs
name a mover in 0.5 % (3 repeats) and 3 % (5 repeats); a planted 30 % change is found in
92 % of pairs at 5 repeats (over the 41 counters before: 1.5 %, 3 % and 95 %). With
pgbench_accounts' two counters (68) every draw after the first moved, and the planted
change's 200 pairs found 88 %: sampling luck (seeds 1, 2 and 3: 93.5 % each; this seed's
1,000 pairs: 92.9 %), so the planted change is measured over PLANTED_PAIRS (91.5 %).
"""

import math

import numpy as np

from agents.contract.reports.counter_catalogue import COUNTERS
from runs.counters import kinds
from runs.counters.movers import CellCounters, counter_changes

PAIRS = 200
# 200 pairs measure a share near 90 % within about 2 points, too coarse for that bound.
PLANTED_PAIRS = 400
SEED = 20261128
TRANSACTIONS = 6_000
WINDOW_S = 60.0
REPEAT_SPREAD = 0.03
PER_WINDOW_COUNTS = {"bgwriter.buffers_clean": 5}
# A planted change goes to a counter that counts at least this many events a repeat: at
# 100 (Poisson noise of 10 % a repeat) a 30 % change among the 66 tests is found in about
# 69 % of pairs at 5 repeats, at 300 in 92 %, at 1,000 in all (seed SEED).
PLANTED_EVENTS_A_REPEAT = 300


def counter_rates(rng: np.random.Generator) -> dict[str, float]:
    """A rate per transaction for each counter (log-uniform from 1e-4 to 30)."""
    return {key: float(math.exp(rng.uniform(math.log(1e-4), math.log(30)))) for key in COUNTERS}


def simulated_cell(rng: np.random.Generator, rates: dict[str, float], repeats: int) -> CellCounters:
    transactions = [int(TRANSACTIONS * rng.lognormal(0, 0.05)) for _ in range(repeats)]
    values: dict[str, list[float | None]] = {}
    counts: dict[str, list[float | None]] = {}
    for key, rate in rates.items():
        wandering = rate * rng.lognormal(0, REPEAT_SPREAD, repeats)
        if key in kinds.PER_WINDOW:
            found = [float(PER_WINDOW_COUNTS.get(key, 0))] * repeats
        elif kinds.counts_events(key):
            found = [
                float(rng.poisson(r * n)) for r, n in zip(wandering, transactions, strict=True)
            ]
        else:
            found = [float(r * n) for r, n in zip(wandering, transactions, strict=True)]
        counts[key] = list(found)
        values[key] = [c / n for c, n in zip(found, transactions, strict=True)]
    return CellCounters(values, transactions, counts, [WINDOW_S] * repeats)


def share_with_a_mover(
    repeats: int, planted_pct: float = 0.0, pairs: int = PAIRS
) -> tuple[float, float]:
    """(share of pairs naming any mover, share naming the planted counter first or among
    its movers) over `pairs` simulated pairs."""
    rng = np.random.default_rng(SEED + repeats + int(planted_pct))
    candidates = [k for k in COUNTERS if k not in kinds.PER_WINDOW and kinds.compared(k)]
    any_mover = found_planted = 0
    for _ in range(pairs):
        rates = counter_rates(rng)
        planted = candidates[int(rng.integers(len(candidates)))]
        rates[planted] = max(rates[planted], PLANTED_EVENTS_A_REPEAT / TRANSACTIONS)
        changed = {**rates, planted: rates[planted] * (1 + planted_pct / 100)}
        base = simulated_cell(rng, rates, repeats)
        other = simulated_cell(rng, changed, repeats)
        moved = counter_changes(other, base, limit=len(COUNTERS)).moved
        any_mover += bool(moved)
        named = {m.key for m in moved} | {k for m in moved for k in m.copies}
        found_planted += planted in named
    return any_mover / pairs, found_planted / pairs


def test_a_a_pairs_name_a_mover_in_at_most_five_percent() -> None:
    with_mover, _ = share_with_a_mover(repeats=3)
    assert with_mover <= 0.05, with_mover


def test_a_a_pairs_at_five_repeats_name_a_mover_in_at_most_five_percent() -> None:
    with_mover, _ = share_with_a_mover(repeats=5)
    assert with_mover <= 0.05, with_mover


def test_a_planted_thirty_percent_change_is_found_in_nine_of_ten_at_five_repeats() -> None:
    _, found = share_with_a_mover(repeats=5, planted_pct=30.0, pairs=PLANTED_PAIRS)
    assert found >= 0.90, found
