"""How long a run takes, learned from the runs a host finished.

A run is a cluster setup (finding or building PostgreSQL, initdb, start,
settings; and at the end stopping and removing the cluster), a dataset load
(`pgbench -i` and the setup SQL: a fixed part and a part per scale unit), its
warm-up and its points,
each its duration plus an overhead (the calibration run, CHECKPOINT/VACUUM
between points, samplers and the transaction log read afterwards). The
agent's status events say when each phase began (`provisioning`, `loading`,
`running N points`, `stopping`), so each succeeded run measures the three
costs. Each phase is learned apart, as the recency-weighted midmean of the
host's latest runs (recent_midmean: one run under unusual load, or a first run
that fetched the binaries, does not set the next estimate once a few runs
agree): the cluster setup from the runs of the same build (else of any build on
the host), the load, the warm-up's overhead and the per-point overhead from every
run of the host. The load is a line over the scales the host loaded (load_line):
a host that only loaded scale 1 has learned mostly the load's fixed part, which
must not be multiplied by 50 for a dataset of scale 50. A run by transactions teaches them too,
its points lasting what they measured. With nothing learned the estimate falls
back to the constants below.

A point measured by transactions (pgbench -t, per client) lasts transactions x
clients / tps: the rate is the recency-weighted midmean tps the host measured for
the workload at that client count in its latest succeeded runs; else a rate borrowed
from what the host measured of the same scripts in the same query mode (this workload
at another client count first, then another workload's, at the nearest scale and then
the nearest client count), scaled by the CPUs the clients can keep busy
(min(clients, host CPUs): a closed loop's tps grows with its clients until the CPUs
are busy), said as borrowed; else GUESSED_TPS, said as a guess.

A source build the host has not built yet compiles before its first run: the seconds
the host's source builds took (their build records, one per cache key), else
BUILD_CPU_S over the host's CPUs, said as a guess. A definition the host built before
(its build records say which) is in its cache and adds nothing, whatever build names it.
"""

import json
import math
import statistics
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from django.db.models import F, Window
from django.db.models.functions import RowNumber
from django.utils.dateparse import parse_datetime

from agents.contract.spec.document import warm_up_seconds
from runs.analysis import sequential
from runs.inference.stats import MIN_REPEATS
from runs.models import Experiment, Host, PgBuild, Result, Run, RunEvent, Workload

# Rough cost of one cluster lifecycle besides the measured points (initdb, start,
# settings and restart, stop) and of `pgbench -i` per scale unit, when nothing was
# learned on the host yet. Rounds pay them once per repeat.
RUN_OVERHEAD_S = 30.0
SCALE_LOAD_S_PER_UNIT = 0.5
POINT_OVERHEAD_S = 0.0
WARM_UP_OVERHEAD_S = 0.0
# How many of a host's latest succeeded runs its estimates learn from.
LEARNED_RUNS = 20
# A source build's CPU-seconds when its host has built none: PostgreSQL 15.18 at -O2 took
# 3 min 29 s with make -j2 on 2 vCPUs (docs/benchmarks.md, "Source builds").
BUILD_CPU_S = 420.0
# How many of a host's latest build records its build time learns from.
LEARNED_BUILDS = 20
# How many of a host's latest runs with a build record are read for what it has built (a
# live estimate reads them on every update): a definition built only before those counts
# as not built, and its compile is added (the estimate errs long).
BUILD_RECORDS_READ = 1000
# How many of the hosts' latest points in rounds the expected time learns the spread from,
# and the transaction rates.
LEARNED_RESULTS = 2000
# The rate of a point measured by transactions when its host measured none for its workload
# and client count: a guess (estimates built on it say so).
GUESSED_TPS = 1000.0
# A run (or a point's tps) counts half as much as one this many runs newer.
HALF_LIFE_RUNS = 10.0
# The share of the weight a midmean leaves out on each side.
TRIMMED_SHARE = 0.25


@dataclass(frozen=True)
class Timings:
    """What a run costs besides its measured seconds; `runs` is how many it was learned from.
    `warm_up_overhead_s` is what the warm-up (or the calibration run without one) takes
    beyond its seconds."""

    setup_s: float
    load_s_per_unit: float
    point_overhead_s: float
    runs: int = 0
    warm_up_overhead_s: float = WARM_UP_OVERHEAD_S
    load_fixed_s: float = 0.0

    def setup_seconds(self, scale: float) -> float:
        """A run's seconds besides its sweep: the cluster setup and the load at `scale`."""
        return self.setup_s + self.load_fixed_s + scale * self.load_s_per_unit


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
    warm_up = warm_up_seconds(sweep) + timings.warm_up_overhead_s
    return timings.setup_seconds(scale) + warm_up + points


def _points(sweep: Mapping[str, Any]) -> int:
    """How many points a job of this sweep runs: the measured ones and its CPU-profile pass."""
    measured = len(sweep.get("clients") or [1]) * (sweep.get("repeats") or 1)
    return measured + cpu_profile_points(sweep)


@dataclass(frozen=True)
class BuildTime:
    """A source build's compile seconds on a host, and whether the host's own builds
    taught them ("learned") or BUILD_CPU_S did ("guessed")."""

    seconds: float
    source: str


@dataclass(frozen=True)
class Learned:
    """Timings learned per (host, build) and per host; `for_cell` takes the cluster setup
    from the build's runs when the host ran it, every other phase from all the host's runs."""

    by_build: dict[tuple[int, int], Timings]
    by_host: dict[int, Timings]
    # Host -> the seconds its source builds took to compile; the (host, definition) pairs
    # the host has in its cache (a run of it built or reused it; `definition_key`).
    build_s: dict[int, float] = field(default_factory=dict)
    built: frozenset[tuple[int, str]] = frozenset()

    def for_cell(self, host_id: int | None, build_id: int | None) -> Timings:
        host = self.by_host.get(host_id or 0, DEFAULT_TIMINGS)
        build = self.by_build.get((host_id or 0, build_id or 0))
        return host if build is None else replace(host, setup_s=build.setup_s)

    def for_run(self, run: Run) -> Timings:
        return self.for_cell(run.host_id, run.build_id)

    def build_seconds(self, host: Host, build: PgBuild) -> BuildTime | None:
        """What compiling `build` adds on `host` before its first run there; None for
        prebuilt binaries and for a source build the host has in its cache."""
        if not build.definition or (host.pk, definition_key(build.definition)) in self.built:
            return None
        learned = self.build_s.get(host.pk)
        if learned is not None:
            return BuildTime(learned, "learned")
        return BuildTime(BUILD_CPU_S / _cpus(host), "guessed")


# Where a point's tps came from, best first: the worst of a sweep's points names it.
RATE_SOURCES = ("learned", "borrowed", "guessed")


@dataclass(frozen=True)
class PointLength:
    """The mean seconds of a point of a sweep by transactions over its client counts, and
    where the worst of their rates came from (RATE_SOURCES)."""

    seconds: float
    source: str


@dataclass(frozen=True)
class Rates:
    """The tps per (host, workload, client count) learned from succeeded runs, with what
    a rate is borrowed from: each workload's kin (the workloads of the same scripts and
    query mode, itself included) and scale, and each host's CPUs."""

    tps: dict[tuple[int, int, int], float]
    kin: Mapping[int, Sequence[int]] = field(default_factory=dict)
    scales: Mapping[int, int] = field(default_factory=dict)
    cpus: Mapping[int, int] = field(default_factory=dict)

    def point_length(
        self, host_id: int, workload_id: int, clients: Sequence[int], transactions: int
    ) -> PointLength:
        """How long a point of `transactions` per client lasts on average over `clients`:
        the one length that, given to timed_sweep_seconds as the points' duration, sums to
        every point's transactions x clients / tps."""
        counts = list(clients) or [1]
        seconds, sources = [], []
        for count in counts:
            rate, source = self.rate(host_id, workload_id, count)
            seconds.append(transactions * count / rate)
            sources.append(source)
        return PointLength(statistics.fmean(seconds), max(sources, key=RATE_SOURCES.index))

    def rate(self, host_id: int, workload_id: int, clients: int) -> tuple[float, str]:
        """The tps of `clients` of the workload on the host, and where it came from."""
        learned = self.tps.get((host_id, workload_id, clients))
        if learned:
            return learned, "learned"
        scale = self.scales.get(workload_id, 1)
        cpus = self.cpus.get(host_id, 1)
        candidates = [
            (abs(math.log(self.scales.get(kin, 1) / scale)), kin != workload_id, count, tps)
            for (host, kin, count), tps in self.tps.items()
            if host == host_id and kin in self.kin.get(workload_id, ())
        ]
        if not candidates:
            return GUESSED_TPS, "guessed"
        _scale_apart, _other, count, tps = min(
            candidates,
            key=lambda found: (found[0], found[1], abs(math.log(found[2] / clients))),
        )
        return tps * min(clients, cpus) / min(count, cpus), "borrowed"


def learned_rates(host_ids: Iterable[int], workload_ids: Iterable[int]) -> Rates:
    """The recency-weighted midmean tps (recent_midmean, by run) of the latest
    LEARNED_RESULTS points the hosts measured in succeeded runs of the workloads and their
    kin, per (host, workload, client count); points by duration teach the rate as well as
    points by transactions."""
    hosts = set(host_ids)
    kin = _kin(set(workload_ids))
    related = {related for kins in kin.values() for related in kins}
    results = (
        Result.objects.filter(
            run__host_id__in=hosts,
            run__workload_id__in=related,
            run__status=Run.Status.SUCCEEDED,
            tps__gt=0,
        )
        .order_by("-run_id")
        .values_list("run_id", "run__host_id", "run__workload_id", "clients", "tps")[
            :LEARNED_RESULTS
        ]
    )
    found: dict[tuple[int, int, int], list[tuple[int, float]]] = defaultdict(list)
    for run_id, host_id, workload_id, clients, tps in results:
        found[(host_id, workload_id, clients)].append((run_id, float(tps or 0.0)))
    scales = dict(Workload.objects.filter(pk__in=related).values_list("pk", "scale"))
    cpus = {host.pk: _cpus(host) for host in Host.objects.filter(pk__in=hosts).only("pk", "facts")}
    rates = {key: _by_run_midmean(values) for key, values in found.items()}
    return Rates(rates, kin, scales, cpus)


def _cpus(host: Host) -> int:
    """The CPUs the host's facts give (hardware threads, else cores), 1 where unknown."""
    cpu = host.facts.get("cpu") or {}
    return int(cpu.get("threads") or cpu.get("cores") or 1)


def _kin(workload_ids: set[int]) -> dict[int, list[int]]:
    """Each workload's kin: every workload with the same scripts and query mode."""

    def signature(scripts: object, query_mode: str) -> str:
        return json.dumps([scripts, query_mode], sort_keys=True)

    every = Workload.objects.values_list("pk", "scripts", "query_mode")
    by_signature: dict[str, list[int]] = defaultdict(list)
    signatures = {}
    for pk, scripts, query_mode in every:
        signatures[pk] = signature(scripts, query_mode)
        by_signature[signatures[pk]].append(pk)
    return {pk: by_signature[signatures[pk]] for pk in workload_ids if pk in signatures}


def _by_run_midmean(values: list[tuple[int, float]]) -> float:
    """recent_midmean of (run id, value) pairs, newest run first, a run's values (its
    repeats) sharing its age."""
    ages = {run_id: age for age, run_id in enumerate(dict.fromkeys(r for r, _ in values))}
    return recent_midmean([value for _, value in values], [ages[r] for r, _ in values])


def recent_midmean(values: Sequence[float], ages: Sequence[int] | None = None) -> float:
    """The mean of the middle half of `values`, each weighing 2^(-age / HALF_LIFE_RUNS)
    (ages: 0 for the newest run; by default the values' order, newest first): the weighted
    quantile function averaged from TRIMMED_SHARE to 1 - TRIMMED_SHARE. One value is itself
    and two are a weighted mean, but a run far from the others is left out once they
    outweigh it three to one, and an older host's speed fades as newer runs come."""
    ages = list(range(len(values))) if ages is None else list(ages)
    weighted = sorted(
        (value, 0.5 ** (age / HALF_LIFE_RUNS)) for value, age in zip(values, ages, strict=True)
    )
    total = sum(weight for _, weight in weighted)
    low, high = TRIMMED_SHARE * total, (1 - TRIMMED_SHARE) * total
    kept, below = 0.0, 0.0
    for value, weight in weighted:
        inside = max(0.0, min(below + weight, high) - max(below, low))
        kept += inside * value
        below += weight
    return kept / (high - low)


def cpu_profile_points(sweep: Mapping[str, Any]) -> int:
    """The points of a job's CPU-profile pass (agents/sweep/driver.py): one per client
    count after the measured ones, in the job that measures the first repeat."""
    if not sweep.get("cpu_profile") or (sweep.get("first_repeat") or 1) != 1:
        return 0
    return len(set(sweep.get("clients") or [1]))


def run_phases(
    run: Run, statuses: list[tuple[datetime, str, str]], measured_s: float | None
) -> Timings | None:
    """One finished run's phases from its status events (time, state, message) in order:
    the cluster setup (from the start to `loading`, and from `stopping` to the end), the
    load per scale unit (to `running N points`), the warm-up's overhead (to the first
    point) and the per-point overhead (to `stopping`, beyond the `measured_s` its points
    lasted); None when a phase is missing."""
    sweep, dataset = run.spec.get("sweep") or {}, run.spec.get("dataset") or {}
    points = _points(sweep)
    loading = _first(statuses, lambda state, message: state == "loading")
    running = _first(statuses, lambda state, message: message.endswith(" points"))
    first_point = _first(statuses, lambda state, message: message.startswith("point "))
    stopping = _first(statuses, lambda state, message: state == "stopping")
    started, finished = run.started_at, run.finished_at
    if loading is None or running is None or stopping is None or measured_s is None:
        return None
    if started is None or finished is None:
        return None
    points_began = first_point or running
    setup = (loading - started) + (finished - stopping)
    load = (running - loading).total_seconds()
    warm_up = (points_began - running).total_seconds() - warm_up_seconds(sweep)
    sweeping = (stopping - points_began).total_seconds() - measured_s
    if first_point is None:
        sweeping -= warm_up_seconds(sweep)
    return Timings(
        setup_s=max(setup.total_seconds(), 0.0),
        load_s_per_unit=max(load, 0.0) / max(dataset.get("scale") or 1, 1),
        point_overhead_s=max(sweeping / max(points, 1), 0.0),
        runs=1,
        warm_up_overhead_s=max(warm_up, 0.0) if first_point else 0.0,
    )


def _first(
    statuses: list[tuple[datetime, str, str]], wanted: Callable[[str, str], bool]
) -> datetime | None:
    """When the first status (state, message) that is `wanted` was said."""
    return next((ts for ts, state, message in statuses if wanted(state, message)), None)


def learned_timings(host_ids: Iterable[int]) -> Learned:
    """Timings learned from the latest LEARNED_RUNS succeeded runs of each host, each phase
    the recency-weighted midmean of the runs that measured it (recent_midmean)."""
    runs: list[Run] = []
    for host_id in set(host_ids):
        latest = Run.objects.filter(host_id=host_id, status=Run.Status.SUCCEEDED)
        runs += latest.exclude(started_at=None).order_by("-finished_at")[:LEARNED_RUNS]
    statuses = _statuses([run.pk for run in runs])
    measured = _measured_seconds(runs)
    by_build: dict[tuple[int, int], list[tuple[Timings, float]]] = defaultdict(list)
    by_host: dict[int, list[tuple[Timings, float]]] = defaultdict(list)
    for run in runs:
        phases = run_phases(run, statuses.get(run.pk, []), measured.get(run.pk))
        compiled = (
            run.build_record.get("seconds") if run.build_record.get("reused") is False else None
        )
        if phases is not None and compiled:
            # Its setup compiled the build: later runs find it cached (build_seconds).
            phases = replace(phases, setup_s=max(phases.setup_s - float(compiled), 0.0))
        if phases is not None:
            scale = float(max((run.spec.get("dataset") or {}).get("scale") or 1, 1))
            by_build[(run.host_id, run.build_id)].append((phases, scale))
            by_host[run.host_id].append((phases, scale))
    build_s, built = _learned_builds(set(host_ids))
    return Learned(
        {key: _midmean(found) for key, found in by_build.items()},
        {key: _midmean(found) for key, found in by_host.items()},
        build_s,
        frozenset(built),
    )


def definition_key(definition: Mapping[str, Any]) -> str:
    """A source build's definition as one comparable string: the same build, whatever
    catalogue row or run names it (a row whose definition changed is a new build)."""
    return json.dumps(definition, sort_keys=True)


def _learned_builds(host_ids: set[int]) -> tuple[dict[int, float], set[tuple[int, str]]]:
    """Host -> the recency-weighted midmean of its latest LEARNED_BUILDS source builds'
    compile seconds (a build record's `seconds` is its original build's, whichever run
    reused it: each cache key counts once); and the (host, definition_key) pairs it built,
    from its latest BUILD_RECORDS_READ runs with a build record."""
    seconds: dict[int, list[float]] = defaultdict(list)
    keys: set[tuple[int, str]] = set()
    built: set[tuple[int, str]] = set()
    newest_first = F("finished_at").desc()
    records = (
        Run.objects.filter(host_id__in=host_ids)
        .exclude(build_record={})
        .exclude(finished_at=None)
        .annotate(recency=Window(RowNumber(), partition_by=F("host_id"), order_by=newest_first))
        .filter(recency__lte=BUILD_RECORDS_READ)
        .order_by("host_id", newest_first)
        .values_list(
            "host_id",
            "build_record__definition",
            "build_record__key",
            "build_record__seconds",
            "build_record__failed_step",
        )
    )
    for host_id, definition, key, took, failed_step in records:
        if failed_step or not key:
            continue
        if isinstance(definition, dict):
            built.add((host_id, definition_key(definition)))
        if (host_id, key) in keys or not took:
            continue
        keys.add((host_id, key))
        if len(seconds[host_id]) < LEARNED_BUILDS:
            seconds[host_id].append(float(took))
    return {host: recent_midmean(found) for host, found in seconds.items()}, built


def _measured_seconds(runs: list[Run]) -> dict[int, float]:
    """Run id -> the seconds its points lasted: each point its duration in a sweep by
    duration; in one by transactions each measured point its transactions / tps, and a
    CPU-profile pass's points the mean of those. A run by transactions without its points'
    counts is left out."""
    found = {
        run.pk: _points(sweep) * float(sweep["duration_s"])
        for run in runs
        if (sweep := run.spec.get("sweep") or {}).get("duration_s")
    }
    by_transactions = [run for run in runs if run.pk not in found]
    lengths: dict[int, list[float]] = defaultdict(list)
    rows = Result.objects.filter(
        run__in=by_transactions, tps__gt=0, transactions__gt=0
    ).values_list("run_id", "transactions", "tps")
    for run_id, transactions, tps in rows:
        lengths[run_id].append(float(transactions or 0) / float(tps or 1.0))
    for run in by_transactions:
        if lengths.get(run.pk):
            extra = cpu_profile_points(run.spec.get("sweep") or {})
            found[run.pk] = sum(lengths[run.pk]) + extra * statistics.fmean(lengths[run.pk])
    return found


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


def _midmean(found: list[tuple[Timings, float]]) -> Timings:
    """Each phase's recent_midmean over one host's (or build's) runs (each with the scale
    it loaded), newest first; the load as load_line over them."""
    timings = [phases for phases, _ in found]
    fixed, per_unit = load_line([(scale, t.load_s_per_unit * scale) for t, scale in found])
    return Timings(
        recent_midmean([t.setup_s for t in timings]),
        per_unit,
        recent_midmean([t.point_overhead_s for t in timings]),
        len(timings),
        recent_midmean([t.warm_up_overhead_s for t in timings]),
        load_fixed_s=fixed,
    )


def load_line(loads: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """The load's fixed seconds and seconds per scale unit from (scale, seconds) of a
    host's runs, newest first: each scale's recent_midmean, then the least-squares line
    through them, neither part below zero. From one scale alone the per-unit part is not
    known: it is taken as the load over the scale but at most SCALE_LOAD_S_PER_UNIT, the
    rest fixed (`pgbench -i` at scale 1 is mostly creating, vacuuming and indexing)."""
    by_scale: dict[float, list[tuple[float, int]]] = defaultdict(list)
    for age, (scale, seconds) in enumerate(loads):
        by_scale[scale].append((seconds, age))
    points = [
        (scale, recent_midmean([s for s, _ in found], [a for _, a in found]))
        for scale, found in by_scale.items()
    ]
    if len(points) == 1:
        scale, seconds = points[0]
        per_unit = min(seconds / scale, SCALE_LOAD_S_PER_UNIT)
        return seconds - per_unit * scale, per_unit
    scales = [x for x, _ in points]
    mean_x, mean_y = statistics.fmean(scales), statistics.fmean(y for _, y in points)
    spread = sum((x - mean_x) ** 2 for x in scales)
    slope = sum((x - mean_x) * (y - mean_y) for x, y in points) / spread
    if slope < 0:
        return mean_y, 0.0
    if mean_y - slope * mean_x < 0:
        return 0.0, sum(x * y for x, y in points) / sum(x * x for x in scales)
    return mean_y - slope * mean_x, slope


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
