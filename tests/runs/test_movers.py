"""Top movers: which counters moved between two cells, how zeros are read, the ranking
and the words (runs/counters/movers.py). No server: the values are given."""

from collections.abc import Mapping, Sequence

import pytest

from runs.counters.movers import CellCounters, Change, Mover
from runs.counters.movers import top_movers as ranked
from runs.inference.stats import DEFAULT_MIN_EFFECT_PCT, Difference

STEADY = [1.0, 1.01, 0.99]
TRANSACTIONS = 100_000


def cell(
    values: Mapping[str, Sequence[float | None]], transactions: int = TRANSACTIONS
) -> CellCounters:
    """A cell whose every repeat counted `transactions`."""
    repeats = max(len(found) for found in values.values())
    return CellCounters(values, [transactions] * repeats)


def top_movers(
    values: Mapping[str, Sequence[float | None]],
    baseline: Mapping[str, Sequence[float | None]],
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
) -> list[Mover]:
    """The top movers of two cells of 100,000 transactions a repeat."""
    return ranked(cell(values), cell(baseline), min_effect_pct)


def test_a_counter_that_tripled_reads_as_a_percent_with_its_interval() -> None:
    [mover] = top_movers(
        {"wal.bytes": [3000.0, 3050.0, 2950.0]}, {"wal.bytes": [1000.0, 1010.0, 990.0]}
    )
    assert mover.change is Change.RATIO
    assert mover.difference is not None and mover.difference.pct == pytest.approx(200, abs=2)
    assert mover.words.startswith("WAL bytes per transaction +200 % [+")
    assert mover.q is not None and mover.q <= 0.05


def test_zero_in_every_baseline_repeat_appears_and_the_other_way_vanishes() -> None:
    movers = top_movers(
        {"wal.fpi": [2.1, 2.0, 2.2], "wal.syncs": [0.0, 0.0, 0.0]},
        {"wal.fpi": [0.0, 0.0, 0.0], "wal.syncs": [1.0, 1.0, 1.0]},
    )
    assert [(m.key, m.change) for m in movers] == [
        ("wal.fpi", Change.APPEARS),
        ("wal.syncs", Change.VANISHES),
    ]
    assert movers[0].words == "full-page images per transaction appear (0 → 2.1)"
    assert movers[1].words == "WAL syncs (fsync) per transaction vanish (1 → 0)"


def test_zeros_in_some_repeats_only_or_everywhere_are_not_ranked() -> None:
    movers = top_movers(
        {"checkpoints.requested": [0.0, 0.001, 0.0], "db.deadlocks": [0.0, 0.0, 0.0]},
        {"checkpoints.requested": [0.0, 0.0, 0.0], "db.deadlocks": [0.0, 0.0, 0.0]},
    )
    assert movers == []


def test_unknown_values_and_single_repeats_are_left_out() -> None:
    assert top_movers({"wal.bytes": [3.0, None]}, {"wal.bytes": [1.0, 1.0]}) == []
    assert top_movers({"wal.bytes": [3.0, 3.0]}, {"wal.bytes": [None, 1.0]}) == []
    assert top_movers({"wal.fpi": [2.0]}, {"wal.fpi": [0.0]}) == []


def test_movers_rank_by_the_size_of_the_change_on_the_log_scale_and_keep_three() -> None:
    values = {
        "wal.bytes": [2.0, 2.02, 1.98],  # +100 %
        "db.blks_hit": [0.25, 0.252, 0.248],  # -75 %: a quadrupling's size, the largest
        "wal.records": [1.5, 1.51, 1.49],  # +50 %
        "io.hits": [1.2, 1.21, 1.19],  # +20 %
        "db.tup_fetched": STEADY,  # no change
    }
    baseline = {key: STEADY for key in values}
    movers = top_movers(values, baseline)
    assert [m.key for m in movers] == ["db.blks_hit", "wal.bytes", "wal.records"]
    assert movers[0].words.startswith("blocks hit in shared buffers per transaction -75 % [")


def test_an_appearance_ranks_by_how_far_it_rose_above_what_the_zeros_could_hide() -> None:
    # 0.1 a transaction against at most 1e-05 hidden in 300,000: at least x10,000, above a
    # x20; 3e-05 (nine writes in 300,000) is x3 above its floor, below the x20.
    values = {
        "wal.bytes": [20.0, 20.2, 19.8],
        "wal.fpi": [0.1, 0.1, 0.1],
        "io.writes": [3e-05, 3e-05, 3e-05],
    }
    baseline = {"wal.bytes": STEADY, "wal.fpi": [0.0, 0.0, 0.0], "io.writes": [0.0, 0.0, 0.0]}
    movers = top_movers(values, baseline)
    assert [m.key for m in movers] == ["wal.fpi", "wal.bytes", "io.writes"]
    assert movers[0].floor == pytest.approx(1e-05)
    assert movers[0].as_document()["zero_floor_per_transaction"] == pytest.approx(1e-05)


def test_an_appearance_the_zeros_could_have_hidden_is_no_mover() -> None:
    # 2e-06 a transaction is below the 1e-05 that no event in 300,000 transactions allows.
    values = {"io.writes": [2e-06, 2e-06, 2e-06]}
    assert top_movers(values, {"io.writes": [0.0, 0.0, 0.0]}) == []


def test_an_appearance_needs_the_transactions_the_zeros_were_counted_over() -> None:
    unknown = CellCounters({"wal.fpi": [0.0, 0.0]}, [None, None])
    assert ranked(cell({"wal.fpi": [2.0, 2.0]}), unknown) == []


def test_a_change_below_the_minimum_effect_or_within_the_noise_is_no_mover() -> None:
    small = {"wal.bytes": [1.005, 1.006, 1.004]}
    noisy = {"wal.records": [0.5, 1.5, 1.0]}
    base = {"wal.bytes": [1.0, 1.001, 0.999], "wal.records": STEADY}
    assert top_movers(small, base, min_effect_pct=1.0) == []
    assert top_movers(noisy, base) == []


def test_small_changes_read_with_a_decimal_and_the_document_names_the_view() -> None:
    found = Difference(pct=-4.25, ci_low_pct=-6.0, ci_high_pct=-2.5, p=0.001)
    mover = Mover("wal.syncs", Change.RATIO, 0.96, 1.0, found, 0.002)
    assert mover.words == "WAL syncs (fsync) per transaction -4.2 % [-6.0, -2.5]"
    document = mover.as_document()
    assert document["source"].startswith("pg_stat_wal.wal_sync")
    assert (document["change"], document["diff_pct"], document["q"]) == ("ratio", -4.25, 0.002)


def test_an_increase_of_more_than_ten_times_reads_as_a_multiple() -> None:
    found = Difference(pct=1_311_044.0, ci_low_pct=976_326.0, ci_high_pct=1_760_503.0, p=1e-6)
    mover = Mover("bgwriter.buffers_alloc", Change.RATIO, 2.0, 1.5e-4, found, 1e-5)
    assert mover.words == "buffers allocated per transaction ×13,111 [×9,764, ×17,606]"
    near = Difference(pct=1_100.0, ci_low_pct=950.0, ci_high_pct=1_300.0, p=1e-4)
    assert Mover("wal.bytes", Change.RATIO, 12.0, 1.0, near, 1e-3).words.endswith(
        "×12.0 [×10.5, ×14.0]"
    )
    straddling = Difference(pct=1_100.0, ci_low_pct=800.0, ci_high_pct=1_300.0, p=1e-4)
    assert "+1100 % [+800, +1300]" in Mover("wal.bytes", Change.RATIO, 12.0, 1.0, straddling).words
