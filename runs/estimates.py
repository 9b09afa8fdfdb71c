"""How long a run takes, learned from the runs a host finished.

A run is a cluster setup (finding or building PostgreSQL, initdb, start,
settings; and at the end stopping and removing the cluster), a dataset load
(`pgbench -i` and the setup SQL, per scale unit), its warm-up and its points,
each its duration plus an overhead (the calibration run, CHECKPOINT/VACUUM
between points, samplers and the transaction log read afterwards). The
agent's status events say when each phase began (`provisioning`, `loading`,
`running N points`, `stopping`), so each succeeded run measures the three
costs; the median of a host's latest runs of the same build (else of any
build on that host) is what the next estimate uses. With nothing learned the
estimate falls back to the constants below.

A point measured by transactions (pgbench -t, per client) lasts transactions x
clients / tps: the rate is the median tps the host measured for the workload at
that client count in its latest succeeded runs, else GUESSED_TPS, said as a guess.
"""

import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.utils.dateparse import parse_datetime

from agents.contract.spec.document import warm_up_seconds
from runs.analysis import sequential
from runs.inference.stats import MIN_REPEATS
from runs.models import Experiment, Result, Run, RunEvent

# Rough cost of one cluster lifecycle besides the measured points (initdb, start,
# settings and restart, stop) and of `pgbench -i` per scale unit, when nothing was
# learned on the host yet. Rounds pay them once per repeat.
RUN_OVERHEAD_S = 30.0
SCALE_LOAD_S_PER_UNIT = 0.5
POINT_OVERHEAD_S = 0.0
# How many of a host's latest succeeded runs its estimates learn from.
LEARNED_RUNS = 20
# How many of the hosts' latest points in rounds the expected time learns the spread from,
# and the transaction rates.
LEARNED_RESULTS = 2000
# The rate of a point measured by transactions when its host measured none for its workload
# and client count: a guess (estimates built on it say so).
GUESSED_TPS = 1000.0


@dataclass(frozen=True)
class Timings:
    """What a run costs besides its measured seconds; `runs` is how many it was learned from."""

    setup_s: float
    load_s_per_unit: float
    point_overhead_s: float
    runs: int = 0

    def setup_seconds(self, scale: float) -> float:
        """A run's seconds besides its sweep: the cluster setup and the load at `scale`."""
        return self.setup_s + scale * self.load_s_per_unit


DEFAULT_TIMINGS = Timings(RUN_OVERHEAD_S, SCALE_LOAD_S_PER_UNIT, POINT_OVERHEAD_S)


def sweep_seconds(
    sweep: Mapping[str, Any], scale: float, timings: Timings = DEFAULT_TIMINGS
) -> float | None:
    """How long a run of this sweep takes on a dataset of `scale` at a host's `timings`
    (timed_sweep_seconds); None for a sweep measured by transactions (its time is unknown)."""
    duration = sweep.get("duration_s")
    return timed_sweep_seconds(sweep, duration, scale, timings) if duration else None


def timed_sweep_seconds(
    sweep: Mapping[str, Any], duration_s: float, scale: float, timings: Timings
) -> float:
    """How long a run of this sweep takes with points of `duration_s`, the one rule the
    queues and the experiment estimate use: the setup and load at `scale`, the warm-up and
    every point (the measured ones and a CPU-profile pass), each its duration plus the
    overhead."""
    points = _points(sweep) * (duration_s + timings.point_overhead_s)
    return timings.setup_seconds(scale) + warm_up_seconds(sweep) + points


def _points(sweep: Mapping[str, Any]) -> int:
    """How many points a job of this sweep runs: the measured ones and its CPU-profile pass."""
    measured = len(sweep.get("clients") or [1]) * (sweep.get("repeats") or 1)
    return measured + cpu_profile_points(sweep)


@dataclass(frozen=True)
class Learned:
    """Timings learned per (host, build) and per host; `for_cell` picks the closest."""

    by_build: dict[tuple[int, int], Timings]
    by_host: dict[int, Timings]

    def for_cell(self, host_id: int | None, build_id: int | None) -> Timings:
        if host_id is not None and build_id is not None and (host_id, build_id) in self.by_build:
            return self.by_build[(host_id, build_id)]
        return self.by_host.get(host_id or 0, DEFAULT_TIMINGS)

    def for_run(self, run: Run) -> Timings:
        return self.for_cell(run.host_id, run.build_id)


@dataclass(frozen=True)
class PointLength:
    """The mean seconds of a point of a sweep by transactions over its client counts, and
    whether every client count's rate was learned (else some are GUESSED_TPS)."""

    seconds: float
    learned: bool


@dataclass(frozen=True)
class Rates:
    """Median tps per (host, workload, client count) learned from succeeded runs."""

    tps: dict[tuple[int, int, int], float]

    def point_length(
        self, host_id: int, workload_id: int, clients: Sequence[int], transactions: int
    ) -> PointLength:
        """How long a point of `transactions` per client lasts on average over `clients`:
        the one length that, given to timed_sweep_seconds as the points' duration, sums to
        every point's transactions x clients / tps."""
        counts = list(clients) or [1]
        rates = [self.tps.get((host_id, workload_id, count)) for count in counts]
        seconds = [
            transactions * count / (rate or GUESSED_TPS)
            for count, rate in zip(counts, rates, strict=True)
        ]
        return PointLength(statistics.fmean(seconds), all(rates))


def learned_rates(host_ids: Iterable[int], workload_ids: Iterable[int]) -> Rates:
    """The median tps of the latest LEARNED_RESULTS points the hosts measured in succeeded
    runs of the workloads, per (host, workload, client count); points by duration teach
    the rate as well as points by transactions."""
    results = (
        Result.objects.filter(
            run__host_id__in=set(host_ids),
            run__workload_id__in=set(workload_ids),
            run__status=Run.Status.SUCCEEDED,
            tps__gt=0,
        )
        .order_by("-run_id")
        .values_list("run__host_id", "run__workload_id", "clients", "tps")[:LEARNED_RESULTS]
    )
    found: dict[tuple[int, int, int], list[float]] = defaultdict(list)
    for host_id, workload_id, clients, tps in results:
        found[(host_id, workload_id, clients)].append(float(tps or 0.0))
    return Rates({key: statistics.median(values) for key, values in found.items()})


def cpu_profile_points(sweep: Mapping[str, Any]) -> int:
    """The points of a job's CPU-profile pass (agents/sweep/driver.py): one per client
    count after the measured ones, in the job that measures the first repeat."""
    if not sweep.get("cpu_profile") or (sweep.get("first_repeat") or 1) != 1:
        return 0
    return len(set(sweep.get("clients") or [1]))


def run_phases(run: Run, statuses: list[tuple[datetime, str, str]]) -> Timings | None:
    """One finished run's setup, load per scale unit and per-point overhead, from its
    status events (time, state, message) in order; None when a phase is missing."""
    sweep, dataset = run.spec.get("sweep") or {}, run.spec.get("dataset") or {}
    points = _points(sweep)
    duration = sweep.get("duration_s")
    loading = _first(statuses, lambda state, message: state == "loading")
    running = _first(statuses, lambda state, message: message.endswith(" points"))
    stopping = _first(statuses, lambda state, message: state == "stopping")
    started, finished = run.started_at, run.finished_at
    if loading is None or running is None or stopping is None or not duration:
        return None
    if started is None or finished is None:
        return None
    setup = (loading - started) + (finished - stopping)
    load = (running - loading).total_seconds()
    measured = (stopping - running).total_seconds() - warm_up_seconds(sweep)
    return Timings(
        setup_s=max(setup.total_seconds(), 0.0),
        load_s_per_unit=max(load, 0.0) / max(dataset.get("scale") or 1, 1),
        point_overhead_s=max(measured / max(points, 1) - duration, 0.0),
        runs=1,
    )


def _first(
    statuses: list[tuple[datetime, str, str]], wanted: Callable[[str, str], bool]
) -> datetime | None:
    """When the first status (state, message) that is `wanted` was said."""
    return next((ts for ts, state, message in statuses if wanted(state, message)), None)


def learned_timings(host_ids: Iterable[int]) -> Learned:
    """Timings learned from the latest LEARNED_RUNS succeeded runs of each host."""
    runs: list[Run] = []
    for host_id in set(host_ids):
        latest = Run.objects.filter(host_id=host_id, status=Run.Status.SUCCEEDED)
        runs += latest.exclude(started_at=None).order_by("-finished_at")[:LEARNED_RUNS]
    statuses = _statuses([run.pk for run in runs])
    by_build: dict[tuple[int, int], list[Timings]] = defaultdict(list)
    by_host: dict[int, list[Timings]] = defaultdict(list)
    for run in runs:
        phases = run_phases(run, statuses.get(run.pk, []))
        if phases is not None:
            by_build[(run.host_id, run.build_id)].append(phases)
            by_host[run.host_id].append(phases)
    return Learned(
        {key: _median(found) for key, found in by_build.items()},
        {key: _median(found) for key, found in by_host.items()},
    )


def _statuses(run_ids: list[int]) -> dict[int, list[tuple[datetime, str, str]]]:
    """Run id -> its status events (time, state, message) in order."""
    found: dict[int, list[tuple[datetime, str, str]]] = defaultdict(list)
    rows = (
        RunEvent.objects.filter(run_id__in=run_ids, type="status")
        .exclude(ts=None)
        .order_by("run_id", "seq")
        .values_list("run_id", "ts", "payload")
    )
    for run_id, ts, payload in rows:
        when = ts if isinstance(ts, datetime) else parse_datetime(str(ts))
        if when is not None:
            state, message = str(payload.get("state", "")), str(payload.get("message", ""))
            found[run_id].append((when, state, message))
    return found


def _median(found: list[Timings]) -> Timings:
    return Timings(
        statistics.median(t.setup_s for t in found),
        statistics.median(t.load_s_per_unit for t in found),
        statistics.median(t.point_overhead_s for t in found),
        len(found),
    )


def adaptive_seconds(
    experiment: Experiment,
    hosts: Collection[int],
    round_seconds: float,
    longer_round_seconds: float,
) -> tuple[float, float]:
    """(expected, most) seconds of an adaptive experiment whose every round costs
    `round_seconds` on its busiest host, `longer_round_seconds` with longer points: the
    rounds an A/A cell takes on average at the spread earlier rounds on its `hosts` showed
    (sequential.expected_rounds), and the budget's, every round after the first look
    with longer points. The first cell runs every round while another is undecided."""
    most = experiment.max_rounds or experiment.repeats
    expected = sequential.expected_rounds(
        experiment.repeats,
        most,
        experiment.margin_pct,
        experiment.min_effect_pct,
        round_log_sd(hosts),
    )
    first = experiment.repeats
    return expected * round_seconds, first * round_seconds + (most - first) * longer_round_seconds


def round_log_sd(hosts: Collection[int]) -> float | None:
    """The median log sd of tps between the rounds of a cell, over the latest cells
    measured in rounds on these hosts (None: none with MIN_REPEATS rounds)."""
    results = (
        Result.objects.filter(run__host__in=hosts, run__round__isnull=False, tps__gt=0)
        .order_by("-run_id")
        .values_list("run__experiment_id", "run__cell", "clients", "tps")[:LEARNED_RESULTS]
    )
    by_point: dict[tuple[int, int, int], list[float]] = {}
    for experiment_id, cell, clients, tps in results:
        by_point.setdefault((experiment_id, cell, clients), []).append(math.log(tps or 1.0))
    sds = [statistics.stdev(logs) for logs in by_point.values() if len(logs) >= MIN_REPEATS]
    return statistics.median(sds) if sds else None
