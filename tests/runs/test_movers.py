"""Top movers: which counters moved between two cells, how zeros are read, the ranking
and the words (runs/counters/movers.py). No server: the values are given."""

import pytest

from runs.analysis.stats import Difference
from runs.counters.movers import Change, Mover, top_movers

STEADY = [1.0, 1.01, 0.99]


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


def test_appearing_counters_rank_before_any_ratio() -> None:
    values = {"wal.bytes": [20.0, 20.2, 19.8], "wal.fpi": [0.1, 0.1, 0.1]}
    baseline = {"wal.bytes": STEADY, "wal.fpi": [0.0, 0.0, 0.0]}
    assert [m.key for m in top_movers(values, baseline)] == ["wal.fpi", "wal.bytes"]


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
