"""A capacity search's probes read from its runs, decided, and the capacity they give.

Each run of a capacity search is one probe: one point at the offered rate its spec
gives pgbench (-R). The probes of one rate pool (their transactions added, their
latency histograms merged) into one decision (runs/inference/capacity.py), and each
is decided alone too, so that a rate one window passed and another failed is seen as
mixed; the search (runs/inference/capacity_search.py) says what to offer next and the
capacity.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from runs.inference.capacity import (
    GENERATOR_BUSY_SHARE,
    Decision,
    Objective,
    ProbeMeasure,
    ProbeVerdict,
    decide_probe,
)
from runs.inference.capacity_compare import COMPARED_CONFIRMING_PROBES, comparison_precision
from runs.inference.capacity_search import (
    DEFAULT_CONFIRMING_PROBES,
    DEFAULT_PRECISION,
    Capacity,
    RateOutcome,
    SearchPlan,
    capacity_of,
    expected_probes,
)
from runs.inference.quantiles import HistogramSample, percentile_interval
from runs.models import Experiment, Result, Run

# The percentiles the curve draws for every probe.
CURVE_PERCENTILES = (50.0, 95.0, 99.0, 99.9)


@dataclass(frozen=True)
class Probe:
    """One run of the search: its offered rate, what it reached, its percentiles (ms,
    by CURVE_PERCENTILES; None where it logged none) and its rate's pooled verdict."""

    run_id: int
    number: int
    status: str
    offered_tps: float
    reached_tps: float | None
    percentiles: dict[float, float | None]
    verdict: ProbeVerdict | None


@dataclass(frozen=True)
class CapacityReading:
    objective: Objective
    plan: SearchPlan
    probes: list[Probe]
    outcomes: list[RateOutcome]
    capacity: Capacity


def objective_of(experiment: Experiment) -> Objective:
    return Objective(
        percentile=experiment.capacity_percentile,
        limit_ms=experiment.capacity_limit_ms or 0.0,
        max_skipped_pct=experiment.capacity_max_skipped_pct,
    )


def plan_of(experiment: Experiment, compared: bool) -> SearchPlan:
    """The search of one cell; `compared`: the experiment compares several cells' capacities,
    so each is narrowed to half the margin and its ceiling confirmed in more windows
    (runs/inference/capacity_compare.py)."""
    return SearchPlan(
        low_tps=experiment.capacity_low_tps or 0.0,
        high_tps=experiment.capacity_high_tps or 0.0,
        budget=experiment.capacity_probes,
        precision=comparison_precision(experiment.margin_pct) if compared else DEFAULT_PRECISION,
        confirming_probes=COMPARED_CONFIRMING_PROBES if compared else DEFAULT_CONFIRMING_PROBES,
    )


def probe_count_expected(experiment: Experiment, cells: int) -> int:
    """How many probes one cell's search is expected to take (its budget at most)."""
    return expected_probes(plan_of(experiment, cells > 1))


def searched_cells(experiment: Experiment) -> list[int]:
    """The cells the search probes, in matrix order (the first is the baseline)."""
    cells = experiment.runs.filter(round__isnull=False).values_list("cell", flat=True)
    return sorted(set(cells))


def offered_rate(run: Run) -> float:
    return float((run.spec.get("workload") or {}).get("rate_tps") or 0.0)


def capacity_reading(
    experiment: Experiment, cell: int = 0, compared: bool | None = None
) -> CapacityReading:
    """Every probe of `cell`'s search so far, each rate's pooled verdict and the capacity;
    `compared` None: whether the experiment searched several cells is read from its runs."""
    if compared is None:
        compared = len(searched_cells(experiment)) > 1
    objective, plan = objective_of(experiment), plan_of(experiment, compared)
    probed = experiment.runs.filter(round__isnull=False, cell=cell)
    runs = list(probed.order_by("round", "pk"))
    results = {
        result.run_id: result
        for result in Result.objects.filter(run__in=runs, index=0).order_by("run_id")
    }
    by_rate: dict[float, list[Result]] = {}
    for run in runs:
        result = results.get(run.pk)
        if run.status == Run.Status.SUCCEEDED and result is not None:
            by_rate.setdefault(offered_rate(run), []).append(result)
    outcomes: list[RateOutcome] = []
    verdicts: dict[float, ProbeVerdict] = {}
    for rate, pooled in sorted(by_rate.items()):
        measure = pooled_measure(rate, pooled, objective)
        verdict = decide_probe(measure, objective)
        # A rate probed once is its own window: its histogram is not read twice.
        windows = (
            (verdict.decision,)
            if len(pooled) == 1
            else tuple(
                decide_probe(pooled_measure(rate, [result], objective), objective).decision
                for result in pooled
            )
        )
        estimate = measure.interval.estimate if measure.interval else None
        outcome = RateOutcome(rate, verdict, estimate, len(pooled), windows)
        verdicts[rate] = _rate_verdict(outcome)
        outcomes.append(outcome)
    probes = [
        Probe(
            run_id=run.pk,
            number=run.round or 0,
            status=run.status,
            offered_tps=offered_rate(run),
            reached_tps=_tps(results.get(run.pk)),
            percentiles=curve_percentiles(results.get(run.pk)),
            verdict=verdicts.get(offered_rate(run)),
        )
        for run in runs
    ]
    return CapacityReading(
        objective, plan, probes, outcomes, capacity_of(plan, objective, outcomes)
    )


def _rate_verdict(outcome: RateOutcome) -> ProbeVerdict:
    """The rate's pooled verdict as its probes show it; undecided, saying so, where one of
    its probes passed and another failed."""
    verdict = outcome.verdict
    if not outcome.mixed:
        return verdict
    passed = outcome.windows.count(Decision.PASS)
    failed = outcome.windows.count(Decision.FAIL)
    disagree = f"its probes disagree ({passed} passed, {failed} failed): the host's noise"
    return replace(verdict, decision=Decision.UNDECIDED, reasons=(disagree, *verdict.reasons))


def pooled_measure(rate: float, results: Sequence[Result], objective: Objective) -> ProbeMeasure:
    """The probes of one offered rate as one measure: counts and seconds added, the rate
    reached over all their seconds (every transaction the schedule started: processed,
    skipped and failed), their latency histograms merged."""
    seconds = sum(result.duration_s or 0.0 for result in results)
    processed = sum(result.transactions or 0 for result in results)
    failed = sum(result.failed for result in results)
    skipped = sum(result.skipped or 0 for result in results)
    reached = (
        sum(scheduled_tps(result) * (result.duration_s or 0.0) for result in results) / seconds
        if seconds
        else 0.0
    )
    histograms = [
        encoded for result in results if (encoded := (result.percentiles or {}).get("histogram"))
    ]
    interval = None
    if histograms:
        interval = percentile_interval(HistogramSample(histograms), objective.percentile)
    busy = any((result.pgbench_busy_share or 0.0) >= GENERATOR_BUSY_SHARE for result in results)
    return ProbeMeasure(
        offered_tps=rate,
        reached_tps=reached,
        transactions=processed + failed + skipped,
        failed=failed,
        skipped=skipped,
        seconds=seconds,
        interval=interval,
        generator_busy=busy,
    )


def scheduled_tps(result: Result) -> float:
    """The rate of transactions one probe's schedule started: pgbench's tps counts the
    processed ones only (skipped and failed left out, PostgreSQL 11+ and 15+), so it is
    scaled up by their share; a probe that processed none counts them over its seconds."""
    processed = result.transactions or 0
    others = (result.skipped or 0) + result.failed
    if processed:
        return (result.tps or 0.0) * (processed + others) / processed
    return others / result.duration_s if result.duration_s else 0.0


def curve_percentiles(result: Result | None) -> dict[float, float | None]:
    """A probe's latency at each of CURVE_PERCENTILES (ms), from its histogram (the
    stored percentiles for a point without one; p99.9 then None)."""
    stored = (result.percentiles or {}) if result else {}
    encoded = stored.get("histogram")
    if encoded:
        sample = HistogramSample([encoded])
        return {p: sample.percentile(p) for p in CURVE_PERCENTILES}
    return {p: _float(stored.get(f"p{p:g}")) for p in CURVE_PERCENTILES}


def _float(value: object) -> float | None:
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _tps(result: Result | None) -> float | None:
    return result.tps if result is not None else None
