"""A capacity search's probes pooled (runs/analysis/capacity.py): the rate a probe reached
counts every transaction its schedule started, the skipped and failed ones too."""

from runs.analysis.capacity import pooled_measure
from runs.inference.capacity import Objective, decide_probe
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
