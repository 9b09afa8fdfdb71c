"""Top movers: every mover is a test, zeros are tested on their counts, copies of one
quantity show once, counters that follow the clock are not read per transaction, the words
give rates, interval and counts, and "nothing moved" is said (runs/counters/movers.py).
No server: the values are given."""

from collections.abc import Mapping, Sequence

import pytest

from runs.counters.evidence import count_ratio
from runs.counters.movers import CellCounters, Change, Mover, counter_changes
from runs.counters.movers import top_movers as ranked
from runs.inference.stats import DEFAULT_MIN_EFFECT_PCT

STEADY = [1.0, 1.01, 0.99]
TRANSACTIONS = 100_000


def cell(
    values: Mapping[str, Sequence[float | None]],
    transactions: int = TRANSACTIONS,
    seconds: float | None = None,
) -> CellCounters:
    """A cell whose every repeat counted `transactions` in a window of `seconds`."""
    repeats = max(len(found) for found in values.values())
    return CellCounters(values, [transactions] * repeats, seconds=[seconds] * repeats)


def top_movers(
    values: Mapping[str, Sequence[float | None]],
    baseline: Mapping[str, Sequence[float | None]],
    min_effect_pct: float = DEFAULT_MIN_EFFECT_PCT,
) -> list[Mover]:
    """The top movers of two cells of 100,000 transactions a repeat."""
    return ranked(cell(values), cell(baseline), min_effect_pct)


def test_a_counter_that_tripled_reads_as_rates_interval_and_counts() -> None:
    [mover] = top_movers(
        {"wal.bytes": [3000.0, 3050.0, 2950.0]}, {"wal.bytes": [1000.0, 1010.0, 990.0]}
    )
    assert mover.change is Change.RATIO
    assert mover.words.startswith("WAL bytes per transaction 1,000 → 3,000 (+200 % [+")
    assert mover.words.endswith("), from 300 MB and 900 MB")
    assert mover.q <= 0.05
    assert mover.as_document()["test"] == "Welch t on log rates"


def test_a_few_blocks_against_none_in_an_a_a_is_tested_and_is_no_mover() -> None:
    # 1, 2 and 1 blocks read against none, in about 17,000 transactions a side: the exact
    # test gives p = 0.125, so nothing appears; it is not even near.
    n = 5_700
    own = CellCounters({"db.blks_read": [1 / n, 2 / n, 1 / n]}, [n] * 3)
    base = CellCounters({"db.blks_read": [0.0, 0.0, 0.0]}, [n] * 3)
    changes = counter_changes(own, base)
    assert changes.moved == [] and changes.near == [] and changes.collected
    assert count_ratio(4, 3 * n, 0, 3 * n).p == pytest.approx(0.125)


def test_a_lump_of_events_in_one_repeat_is_not_taken_for_many_independent_ones() -> None:
    # Seen on synchronous_commit: 32 blocks read against 4, nearly all in a cold first
    # repeat. The exact test on 32 against 4 says p < 1e-5; the repeats say otherwise.
    n = 3_000
    own = CellCounters({"db.blks_read": [30 / n, 1 / n, 1 / n]}, [n] * 3)
    base = CellCounters({"db.blks_read": [4 / n, 0.0, 0.0]}, [n] * 3)
    assert counter_changes(own, base).moved == []
    # Spread evenly, the same totals are a mover.
    even = CellCounters({"db.blks_read": [11 / n, 10 / n, 11 / n]}, [n] * 3)
    steady = CellCounters({"db.blks_read": [1 / n, 2 / n, 1 / n]}, [n] * 3)
    assert [m.key for m in counter_changes(even, steady).moved] == ["db.blks_read"]


def test_zero_on_one_side_appears_or_vanishes_through_the_exact_test() -> None:
    movers = top_movers(
        {"wal.fpi": [2.1, 2.0, 2.2], "wal.syncs": [0.0, 0.0, 0.0]},
        {"wal.fpi": [0.0, 0.0, 0.0], "wal.syncs": [1.0, 1.0, 1.0]},
    )
    # The syncs rank first: one a transaction in every repeat, where the images vary by 5 %
    # between repeats (their dispersion widens the exact test's interval).
    assert [(m.key, m.change) for m in movers] == [
        ("wal.syncs", Change.VANISHES),
        ("wal.fpi", Change.APPEARS),
    ]
    syncs, images = movers
    assert images.words.startswith("full-page images per transaction 0 → 2.1 (appear, at least ×")
    assert images.words.endswith("), from 0 and 630,000 images")
    assert "vanish, at least -100 %" in syncs.words
    assert all(m.as_document()["test"] == "exact Poisson" for m in movers)
    assert images.as_document()["diff_ci_high_pct"] is None


def test_appearances_and_ratios_share_one_family_and_one_ranking() -> None:
    # An appearance of 12 events against none is surely at least x2.8, a tight x4 at least
    # x3.9: the appearance ranks second, it no longer fills the top places by default.
    values = {
        "wal.bytes": [4.0, 4.04, 3.96],
        "wal.fpi": [4e-5, 4e-5, 4e-5],
    }
    baseline = {"wal.bytes": STEADY, "wal.fpi": [0.0, 0.0, 0.0]}
    movers = top_movers(values, baseline)
    assert [m.key for m in movers] == ["wal.bytes", "wal.fpi"]
    assert movers[0].found.least_change > movers[1].found.least_change


def test_too_few_events_on_the_busier_side_never_rank() -> None:
    # nine writes against none: fewer than MIN_EVENTS, so untested
    values = {"io.writes": [3e-05, 3e-05, 3e-05]}
    assert top_movers(values, {"io.writes": [0.0, 0.0, 0.0]}) == []


def test_copies_of_one_quantity_show_once_and_name_the_others() -> None:
    values = {"db.blks_read": [2.0, 2.02, 1.98], "io.reads": [2.0, 2.01, 1.99]}
    baseline = {"db.blks_read": STEADY, "io.reads": STEADY}
    [mover] = top_movers(values, baseline)
    assert mover.key == "db.blks_read" and mover.copies == ("io.reads",)
    assert mover.words.endswith("; the same quantity as relation blocks read")
    assert mover.as_document()["copies"] == ["io.reads"]


def test_a_fixed_count_per_window_is_compared_per_second_and_does_not_move() -> None:
    # Five buffers a 60 s window both sides; tps fell by a third, so per transaction it
    # would read +50 %.
    own = cell({"bgwriter.buffers_clean": [5 / 4000] * 3}, transactions=4000, seconds=60.0)
    base = cell({"bgwriter.buffers_clean": [5 / 6000] * 3}, transactions=6000, seconds=60.0)
    changes = counter_changes(own, base)
    assert changes.moved == [] and changes.near == []


def test_a_per_window_counter_that_moved_says_per_second_of_the_window() -> None:
    own = cell({"bgwriter.buffers_clean": [2e-3, 2.1e-3, 1.9e-3]}, seconds=60.0)
    base = cell({"bgwriter.buffers_clean": [1e-3, 1.05e-3, 0.95e-3]}, seconds=60.0)
    [mover] = ranked(own, base)
    assert mover.words.startswith(
        "buffers written by the background writer per second of the window 1.67 → 3.33 (+100 %"
    )
    assert "bgwriter_lru_maxpages" in mover.why_basis
    assert mover.as_document()["basis"] == "window_second"
    # The page's tooltip (the catalogue's words) says so too.
    assert f"not per transaction: {mover.why_basis}" in mover.counter.explained


def test_a_per_window_counter_without_its_window_seconds_is_not_compared() -> None:
    own = cell({"bgwriter.buffers_clean": [2e-3, 2.1e-3, 1.9e-3]})
    base = cell({"bgwriter.buffers_clean": [1e-3, 1.05e-3, 0.95e-3]})
    assert ranked(own, base) == []


def test_nothing_moved_is_said_apart_from_nothing_collected() -> None:
    quiet = counter_changes(cell({"wal.bytes": STEADY}), cell({"wal.bytes": STEADY}))
    assert quiet.collected and quiet.moved == []
    missing = counter_changes(cell({"wal.bytes": STEADY}), CellCounters({}, [None] * 3))
    assert not missing.collected
    assert quiet.as_document() == {
        "collected": True,
        "movers": [],
        "near": [],
        "not_collected": [],
    }


def test_forwarded_backend_writes_are_never_a_mover_however_they_jump() -> None:
    # pg_stat_bgwriter.buffers_backend before 17 reaches the view at checkpoints: a
    # window with one reads hundreds, one without none, whatever backends wrote.
    own = cell({"bgwriter.buffers_backend": [0.02, 0.021, 0.019], "wal.bytes": STEADY})
    base = cell({"bgwriter.buffers_backend": [0.0, 0.0, 0.0], "wal.bytes": STEADY})
    changes = counter_changes(own, base)
    assert changes.moved == [] and changes.near == []


def test_what_a_version_or_its_settings_could_not_collect_is_named() -> None:
    on_15 = CellCounters({"wal.bytes": STEADY}, [TRANSACTIONS] * 3, server_version_num=150019)
    on_17 = CellCounters({"wal.bytes": STEADY}, [TRANSACTIONS] * 3, server_version_num=170011)
    missing = counter_changes(on_17, on_15).not_collected
    assert "pg_stat_io (from 16)" in missing
    assert "block read time (track_io_timing off)" in missing
    assert missing.count("pg_stat_io (from 16)") == 1
    assert any(said.endswith("(up to 16)") for said in missing)


def test_a_change_that_is_not_significant_after_bh_is_listed_as_near() -> None:
    # 20 events against 7 over the same transactions: p ~ 0.02 alone, not a mover beside
    # nine other counters' tests.
    n = 100_000
    values: dict[str, list[float]] = {"db.temp_files": [7 / n, 7 / n, 6 / n]}
    baseline: dict[str, list[float]] = {"db.temp_files": [2 / n, 3 / n, 2 / n]}
    for key in ("wal.records", "wal.bytes", "db.tup_fetched", "db.tup_returned", "io.hits"):
        values[key], baseline[key] = STEADY, STEADY
    for key in ("db.tup_updated", "db.tup_inserted", "db.xact_commit", "db.blks_hit"):
        values[key], baseline[key] = [1.0, 1.02, 0.98], [1.0, 0.98, 1.02]
    changes = counter_changes(cell(values, n), cell(baseline, n))
    if changes.moved:
        pytest.fail(f"moved: {[m.words for m in changes.moved]}")
    [near] = changes.near
    assert near.key == "db.temp_files" and near.found.p < 0.05 < near.q


def test_unknown_values_and_single_repeats_are_left_out() -> None:
    assert top_movers({"wal.bytes": [3.0, None]}, {"wal.bytes": [1.0, 1.0]}) == []
    assert top_movers({"wal.bytes": [3.0, 3.0]}, {"wal.bytes": [None, 1.0]}) == []
    assert top_movers({"wal.fpi": [2.0]}, {"wal.fpi": [0.0]}) == []


def test_an_appearance_needs_the_transactions_the_zeros_were_counted_over() -> None:
    unknown = CellCounters({"wal.fpi": [0.0, 0.0]}, [None, None])
    assert ranked(cell({"wal.fpi": [2.0, 2.0]}), unknown) == []


def test_movers_rank_by_the_least_change_their_interval_allows_and_keep_three() -> None:
    values = {
        "wal.bytes": [2.0, 2.02, 1.98],  # +100 %
        "db.blks_hit": [0.25, 0.252, 0.248],  # -75 %: a quadrupling's size, the largest
        "wal.records": [1.5, 1.51, 1.49],  # +50 %
        "io.evictions": [1.2, 1.21, 1.19],  # +20 %
        "db.tup_fetched": STEADY,  # no change
    }
    baseline = {key: STEADY for key in values}
    movers = top_movers(values, baseline)
    assert [m.key for m in movers] == ["db.blks_hit", "wal.bytes", "wal.records"]
    assert movers[0].words.startswith(
        "blocks hit in shared buffers per transaction 1 → 0.25 (-75 % ["
    )


def test_a_change_below_the_minimum_effect_or_within_the_noise_is_no_mover() -> None:
    small = {"wal.bytes": [1.005, 1.006, 1.004]}
    noisy = {"wal.records": [0.5, 1.5, 1.0]}
    base = {"wal.bytes": [1.0, 1.001, 0.999], "wal.records": STEADY}
    assert top_movers(small, base, min_effect_pct=1.0) == []
    assert top_movers(noisy, base) == []


def test_an_increase_of_more_than_ten_times_reads_as_a_multiple() -> None:
    values = {"bgwriter.buffers_alloc": [2.0, 2.02, 1.98]}
    baseline = {"bgwriter.buffers_alloc": [1.5e-3, 1.52e-3, 1.48e-3]}
    [mover] = top_movers(values, baseline)
    assert "(×1,333 [×" in mover.words
