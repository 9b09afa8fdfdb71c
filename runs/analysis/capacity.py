"""A capacity search's probes read from its runs, decided, and the capacity they give.

Each run of a capacity search is one probe: one point at the offered rate its spec
gives pgbench (-R). The probes of one rate pool (their transactions added, their
latency histograms merged) into one decision (runs/inference/capacity.py), and each
is decided alone too, so that a rate one window passed and another failed is seen as
mixed, and a window that did not pass is checked against its timeline for a stall of
the host (runs/inference/stalls.py): a stalled window stays a probe of the search,
flagged with what stalled it, but is not pooled while its rate has at most
MAX_STALLED_WINDOWS of them. The search (runs/inference/capacity_search.py) says what to
offer next and the capacity.
"""

import math
import statistics
from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from django.db.models import Max

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
    Found,
    RateOutcome,
    SearchPlan,
    capacity_of,
    expected_probes,
    outcomes_spread,
)
from runs.inference.capacity_spread import WindowSpread
from runs.inference.quantiles import HistogramSample, percentile_interval
from runs.inference.stalls import (
    SECOND_PERCENTILES,
    WindowSecond,
    stalled_rate_verdict,
    window_stall,
    windows_set_aside,
)
from runs.models import Experiment, ProgressSample, Result, Run

# The percentiles the curve draws for every probe.
CURVE_PERCENTILES = (50.0, 95.0, 99.0, 99.9)
# A host's latest capacity searches, which tell how much its windows spread and how many
# probes a search takes there.
LEARNED_SEARCHES = 3


@dataclass(frozen=True)
class Probe:
    """One run of the search: its offered rate, what it reached, its percentiles (ms,
    by CURVE_PERCENTILES; None where it logged none), its rate's pooled verdict, what
    stalled its window (None: not stalled) and whether its rate's stalled windows count as
    they are (more than MAX_STALLED_WINDOWS of them)."""

    run_id: int
    number: int
    status: str
    offered_tps: float
    reached_tps: float | None
    percentiles: dict[float, float | None]
    verdict: ProbeVerdict | None
    stall: str | None = None
    stall_counted: bool = False


@dataclass(frozen=True)
class RateReading:
    """One offered rate's outcome and what stalled each of its windows (by run id; None:
    not stalled)."""

    outcome: RateOutcome
    stalls: dict[int, str | None]


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


@dataclass(frozen=True)
class ProbesExpected:
    """How many probes one cell's search is expected to take on its hosts, and what that
    learned from their latest searches with probes as long: how much their windows at one
    rate spread (None: too few rates probed again) and the median of the probes each ended
    search took beyond a steady host's schedule (None: none ended)."""

    probes: int
    spread: WindowSpread | None
    beyond_schedule: int | None


def probes_expected(
    experiment: Experiment, cells: int, host_ids: Collection[int]
) -> ProbesExpected:
    """The probes a cell's search is expected to take (its budget at most): the schedule
    with the probes the hosts' window spread costs (`expected_probes`), or as many more
    than a steady host's as their latest searches took, whichever is more. The spread
    alone undercounts where the latency curve is flat near the limit: there a window's
    spread moves the crossing further in rate."""
    searches = [
        (search, capacity_reading(search, cell))
        for search, cell in _latest_searches(host_ids, experiment.duration_s)
    ]
    spread = outcomes_spread([outcome for _, reading in searches for outcome in reading.outcomes])
    plan = plan_of(experiment, cells > 1)
    beyond = _probes_beyond_schedule(searches)
    learned = expected_probes(plan) + (beyond or 0)
    probes = min(plan.budget, max(expected_probes(plan, spread), learned))
    return ProbesExpected(probes, spread, beyond)


def _latest_searches(
    host_ids: Collection[int], probe_s: int | None
) -> list[tuple[Experiment, int]]:
    """The hosts' latest LEARNED_SEARCHES capacity searches whose probes lasted `probe_s` (a
    short window spreads more), latest first; a search: an experiment's cell."""
    probed = Run.objects.filter(
        host_id__in=host_ids,
        round__isnull=False,
        experiment__capacity=True,
        experiment__duration_s=probe_s,
    )
    searches = list(
        probed.values("experiment_id", "cell")
        .annotate(last=Max("pk"))
        .order_by("-last")[:LEARNED_SEARCHES]
    )
    experiments = Experiment.objects.in_bulk({search["experiment_id"] for search in searches})
    return [(experiments[search["experiment_id"]], search["cell"]) for search in searches]


def _probes_beyond_schedule(searches: Sequence[tuple[Experiment, CapacityReading]]) -> int | None:
    """The median of the probes each ended search of `searches` that found a capacity took
    beyond a steady host's schedule for its plan (one cut by its budget counts its budget);
    None where none did with every probe measured. A search that ended below, above or
    without a capacity ended for its range or objective, not for the host's windows."""
    beyond = []
    for experiment, reading in searches:
        if not experiment.capacity_state.get("ended") or reading.capacity.found != Found.FOUND:
            continue
        if any(probe.status != Run.Status.SUCCEEDED for probe in reading.probes):
            continue
        beyond.append(len(reading.probes) - expected_probes(reading.plan))
    return max(0, round(statistics.median(beyond))) if beyond else None


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
    timelines = window_timelines(list(results))
    rates = {
        rate: rate_reading(rate, pooled, objective, timelines)
        for rate, pooled in sorted(by_rate.items())
    }
    outcomes = [reading.outcome for reading in rates.values()]
    probes = []
    for run in runs:
        rate = rates.get(offered_rate(run))
        probes.append(
            Probe(
                run_id=run.pk,
                number=run.round or 0,
                status=run.status,
                offered_tps=offered_rate(run),
                reached_tps=_tps(results.get(run.pk)),
                percentiles=curve_percentiles(results.get(run.pk)),
                verdict=_rate_verdict(rate.outcome) if rate else None,
                stall=rate.stalls.get(run.pk) if rate else None,
                stall_counted=bool(rate and rate.outcome.stalls_counted),
            )
        )
    return CapacityReading(
        objective, plan, probes, outcomes, capacity_of(plan, objective, outcomes)
    )


def rate_reading(
    rate: float,
    results: Sequence[Result],
    objective: Objective,
    timelines: dict[int, list[WindowSecond]],
) -> RateReading:
    """The probes of one offered rate decided: each window alone and checked for a stall
    of the host (its timeline in `timelines`, by run id), then the windows that count
    pooled (runs/inference/stalls.py sets the stalled ones aside)."""
    alone = [_decided(rate, [result], objective) for result in results]
    stalls = [
        window_stall(verdict, timelines.get(result.run_id, []), result.duration_s, objective)
        for result, (_measure, verdict) in zip(results, alone, strict=True)
    ]
    aside = windows_set_aside(stalls)
    counted = [i for i, set_aside in enumerate(aside) if not set_aside]
    stalled = sum(stall is not None for stall in stalls)
    by_run = {result.run_id: stall for result, stall in zip(results, stalls, strict=True)}
    if not counted:
        outcome = RateOutcome(rate, stalled_rate_verdict(stalled), None, len(results), (), stalled)
        return RateReading(outcome, by_run)
    # A rate with one window that counts is that window: its histogram is not read twice.
    measure, verdict = (
        alone[counted[0]]
        if len(counted) == 1
        else _decided(rate, [results[i] for i in counted], objective)
    )
    windows = tuple(alone[i][1].decision for i in counted)
    estimates = tuple(_estimate(alone[i][0]) for i in counted)
    outcome = RateOutcome(
        rate, verdict, _estimate(measure), len(results), windows, stalled, estimates
    )
    return RateReading(outcome, by_run)


def _estimate(measure: ProbeMeasure) -> float | None:
    return measure.interval.estimate if measure.interval else None


def _decided(
    rate: float, results: Sequence[Result], objective: Objective
) -> tuple[ProbeMeasure, ProbeVerdict]:
    measure = pooled_measure(rate, results, objective)
    return measure, decide_probe(measure, objective)


def window_timelines(run_ids: Sequence[int]) -> dict[int, list[WindowSecond]]:
    """Each probe's timeline (the progress lines of its one point), by run id."""
    rows = ProgressSample.objects.filter(run_id__in=run_ids, point=0).order_by("run_id", "t")
    timelines: dict[int, list[WindowSecond]] = {}
    for run_id, t, sampled, *percentiles in rows.values_list(
        "run_id", "t", "sampled", "p50_ms", "p95_ms", "p99_ms"
    ):
        by_percent = dict(zip(SECOND_PERCENTILES, percentiles, strict=True))
        timelines.setdefault(run_id, []).append(WindowSecond(t, sampled, by_percent))
    return timelines


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
