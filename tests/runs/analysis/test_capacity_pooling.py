"""A capacity search's probes pooled (runs/analysis/capacity.py): the rate a probe reached
counts every transaction its schedule started, the skipped and failed ones too; a window
the host stalled in is set aside from its rate's pool, flagged with what stalled it."""

from hdrh.histogram import HdrHistogram

from runs.analysis.capacity import pooled_measure, rate_reading
from runs.inference.capacity import Decision, Objective, decide_probe
from runs.inference.stalls import WindowSecond
from runs.models import Result

OBJECTIVE = Objective(percentile=99.0, limit_ms=20.0, max_skipped_pct=10.0)


def probe(tps: float, processed: int, skipped: int, failed: int = 0) -> Result:
    """A 60 s probe as PostgreSQL 15+ reports it: tps and processed leave out the skipped
    and failed transactions."""
    return Result(
        index=0,
        clients=8,
        duration_s=60.0,
        tps=tps,
        transactions=processed,
        skipped=skipped,
        failed=failed,
    )


def rate_reasons(results: list[Result]) -> list[str]:
    verdict = decide_probe(pooled_measure(1000.0, results, OBJECTIVE), OBJECTIVE)
    return [reason for reason in verdict.reasons if reason.startswith("rate not reached")]


def test_skips_the_objective_allows_count_towards_the_rate_reached() -> None:
    results = [probe(950.0, 57_000, 3_000), probe(940.0, 56_400, 3_000, failed=600)]
    measure = pooled_measure(1000.0, results, OBJECTIVE)
    assert measure.reached_tps == 1000.0
    assert measure.transactions == 120_000 and measure.skipped == 6_000
    assert rate_reasons(results) == []


def test_a_schedule_that_falls_behind_still_misses_the_rate() -> None:
    results = [probe(900.0, 54_000, 0), probe(910.0, 54_600, 0)]
    assert pooled_measure(1000.0, results, OBJECTIVE).reached_tps == 905.0
    assert rate_reasons(results) == ["rate not reached (90.5 % of the offered rate)"]


def test_a_probe_that_processed_nothing_counts_its_skips_over_its_seconds() -> None:
    measure = pooled_measure(1000.0, [probe(0.0, 0, 60_000)], OBJECTIVE)
    assert measure.reached_tps == 1000.0


def window(run_id: int, slow_share: float) -> Result:
    """A 60 s probe at 1,000 tps logging 6,000 transactions: 5 ms, but `slow_share` of
    them 300 ms."""
    histogram = HdrHistogram(1, 3_600_000_000, 3)
    slow = round(6000 * slow_share)
    histogram.record_value(5_000, 6000 - slow)
    if slow:
        histogram.record_value(300_000, slow)
    return Result(
        run_id=run_id,
        index=0,
        clients=4,
        duration_s=60.0,
        tps=1000.0,
        transactions=60_000,
        percentiles={"histogram": histogram.encode().decode()},
    )


def steady_seconds(burst_at: int | None = None) -> list[WindowSecond]:
    """A window's timeline: every second's p99 12 ms, but a burst second's 300 ms."""
    return [
        WindowSecond(float(t), 100, {50.0: 5.0, 95.0: 300.0, 99.0: 300.0})
        if t == burst_at
        else WindowSecond(float(t), 100, {50.0: 5.0, 95.0: 8.0, 99.0: 12.0})
        for t in range(1, 61)
    ]


P99 = Objective(percentile=99.0, limit_ms=20.0)


def test_a_stalled_window_is_not_pooled_and_keeps_what_stalled_it() -> None:
    results = [window(1, 0.0), window(2, 0.02)]
    timelines = {1: steady_seconds(), 2: steady_seconds(burst_at=34)}
    reading = rate_reading(1000.0, results, P99, timelines)
    assert reading.outcome.verdict.decision == Decision.PASS
    assert reading.outcome.windows == (Decision.PASS,)
    assert (reading.outcome.probes, reading.outcome.stalled, reading.outcome.counted) == (2, 1, 1)
    assert reading.stalls[1] is None
    assert (reading.stalls[2] or "").startswith("p99 over 20 ms only in a burst of 1")
    # Its timeline missing (a point stored before the agent sent one), it counts as it is.
    unread = rate_reading(1000.0, results, P99, {1: steady_seconds()})
    assert unread.outcome.mixed and unread.outcome.stalled == 0


def test_a_rate_whose_only_window_stalled_is_undecided_and_beyond_the_bound_all_count() -> None:
    alone = rate_reading(1000.0, [window(2, 0.02)], P99, {2: steady_seconds(burst_at=34)})
    assert alone.outcome.verdict.decision == Decision.UNDECIDED
    assert alone.outcome.verdict.reasons == (
        "1 window stalled (the host's, not the load's): probed again",
    )
    assert alone.outcome.estimate_ms is None and alone.outcome.counted == 0
    stalled = [window(run_id, 0.02) for run_id in (2, 3, 4)]
    timelines = {run_id: steady_seconds(burst_at=34) for run_id in (1, 2, 3, 4)}
    beyond = rate_reading(1000.0, [window(1, 0.0), *stalled], P99, timelines)
    assert beyond.outcome.stalls_counted and beyond.outcome.counted == 4
    assert beyond.outcome.windows == (Decision.PASS, Decision.FAIL, Decision.FAIL, Decision.FAIL)
    assert beyond.outcome.mixed
