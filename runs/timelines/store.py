"""A run's timelines as the pages read them: reduced once, kept, zoomed at full resolution.

The pages never read every sample of a run. `digests` gives each run's
`Digest`: where each point starts on the time axis, its checkpoints, the
validity warnings found in each point's samples, where a point's warning mark
goes, and its timelines reduced to about a thousand samples each with
MinMax-LTTB (runs/timelines/downsample.py). Digests are stored (RunTimeline,
TimelineTrace) under a key of the run's state (its status, and for a final run
the time of its last event). Only the control worker stores them
(`digest_refresh`): a final run's when it ends and when a late event changes
the key (task runs.tasks.digest_build), a running run's from the reaper's pass,
at most every RUNNING_REBUILD_S while events arrive. A page that finds none
current builds one for itself and stores nothing. A running run's stored digest serves its pages
whatever its age: it records the last progress and host sample it holds
(`cursor`), and the page's live stream sends every sample after those.

`window` reads one timeline of a run between two x positions at full
resolution, for a chart the user zoomed into.
"""

import logging
import operator
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Literal, TypedDict

from django.db import transaction
from django.db.models import Exists, OuterRef, Q, QuerySet
from django.utils import timezone

from runs import selectors
from runs.analysis import validity as checks
from runs.analysis.validity import CheckpointEvent, PointSamples, ValidityWarning
from runs.inference.steady import SteadyState
from runs.models import (
    HostSample,
    ProgressSample,
    Run,
    RunTimeline,
    ServerSample,
    TimelineTrace,
)
from runs.timelines.downsample import MIN_TRACE_SAMPLES, Timeline, build_timeline
from runs.timelines.samples import (
    CLIENT_HOST_TRACES,
    HOST_TRACES,
    SERVER_RATE_KEYS,
    host_sample_values,
    offsets_for,
    run_checkpoints,
    wait_event_types,
    wait_type_counts,
    written_per_second,
)

logger = logging.getLogger(__name__)

# Raised whenever what a digest holds or how it is built changes: stored ones are rebuilt.
DIGEST_VERSION = 8
# How often the control worker rebuilds a running run's digest while events arrive (the
# page's live stream sends what is newer than the digest).
RUNNING_REBUILD_S = 60
RUNNING_REBUILD = timedelta(seconds=RUNNING_REBUILD_S)
# A zoomed range holding more samples than this is reduced too (it is not a zoom any more).
ZOOM_MAX_SAMPLES = 5000

PROGRESS_TRACES = ("tps", "latency_ms", "p50_ms", "p95_ms", "p99_ms")
HOST_KEYS = tuple(key for key, _label in HOST_TRACES)
CLIENT_KEYS = tuple(key for key, _label in CLIENT_HOST_TRACES)
COMPARE_TRACES = ("tps", "latency_ms", "server.written")
# The compared traces are also kept reduced to MIN_TRACE_SAMPLES under `name + OVERVIEW`:
# a chart of many runs reads those instead of ten times the samples it would throw away.
OVERVIEW = "~overview"

Sample = ProgressSample | HostSample | ServerSample
# Where a trace's samples are: progress, the server host's, the client host's, the server's.
SampleKind = Literal["progress", "host", "client", "server"]
# The value of a row of that kind (each reads its own kind's rows).
Source = tuple[SampleKind, Callable[..., float | None]]


class DigestFacts(TypedDict):
    """A digest but its traces as RunTimeline.facts keeps it (JSON: string keys, lists)."""

    offsets: dict[str, float]
    checkpoints: list[tuple[int, float, str, str]]
    warnings: dict[str, list[tuple[str, str]]]
    marks: dict[str, list[float]]
    cursor: dict[str, int]
    warm_ups: dict[str, float]


@dataclass
class Digest:
    """What the pages read of one run's samples (see the module docstring)."""

    offsets: dict[int, float]
    checkpoints: list[CheckpointEvent]
    warnings: dict[int, list[ValidityWarning]]
    marks: dict[int, tuple[float, float]]
    cursor: dict[str, int] = field(default_factory=dict)
    traces: dict[str, Timeline] = field(default_factory=dict)
    # Point -> seconds into the point when its tps settled (runs/inference/steady.py).
    warm_ups: dict[int, float] = field(default_factory=dict)

    def facts(self) -> DigestFacts:
        """The stored form of everything but the traces (RunTimeline.facts)."""
        return {
            "offsets": {str(p): start for p, start in self.offsets.items()},
            "checkpoints": [(e.point, e.t, e.kind, e.edge) for e in self.checkpoints],
            "warnings": {
                str(p): [(w.code, w.detail) for w in found] for p, found in self.warnings.items()
            },
            "marks": {str(p): list(mark) for p, mark in self.marks.items()},
            "cursor": self.cursor,
            "warm_ups": {str(p): seconds for p, seconds in self.warm_ups.items()},
        }

    @classmethod
    def from_facts(cls, facts: DigestFacts) -> "Digest":
        return cls(
            offsets={int(p): start for p, start in facts["offsets"].items()},
            checkpoints=[CheckpointEvent(*row) for row in facts["checkpoints"]],
            warnings={
                int(p): [ValidityWarning(code, detail) for code, detail in found]
                for p, found in facts["warnings"].items()
            },
            marks={int(p): (mark[0], mark[1]) for p, mark in facts["marks"].items()},
            cursor=facts["cursor"],
            warm_ups={int(p): seconds for p, seconds in facts["warm_ups"].items()},
        )


def _wait_count(kind: str) -> Callable[[ServerSample], int]:
    def count(sample: ServerSample) -> int:
        return wait_type_counts(sample.data).get(kind, 0)

    return count


def source_of(name: str) -> Source | None:
    """The kind of sample and value behind a trace name (`tps`, `host.cpu_user`,
    `client.cpu_user`, `server.written`, `server.<buffer key>`, `wait.<wait-event type>`);
    None if unknown."""
    kind, _dot, key = name.partition(".")
    if name in PROGRESS_TRACES:
        return "progress", operator.attrgetter(name)
    if kind == "host" and key in HOST_KEYS:
        return "host", lambda s: host_sample_values(s.data)[key]
    if kind == "client" and key in CLIENT_KEYS:
        return "client", lambda s: host_sample_values(s.data)[key]
    if kind == "server" and key == "written":
        return "server", written_per_second
    if kind == "server" and key in SERVER_RATE_KEYS:
        return "server", lambda s: s.data.get(key)
    if kind == "wait" and key:
        return "server", _wait_count(key)
    return None


def _stored_rows(
    run: Run, kind: SampleKind
) -> QuerySet[ProgressSample] | QuerySet[HostSample] | QuerySet[ServerSample]:
    """The run's rows of one kind of sample."""
    if kind == "progress":
        return run.progress.all()
    if kind == "server":
        return run.server_samples.all()
    role = HostSample.Role.CLIENT if kind == "client" else HostSample.Role.SERVER
    return run.host_samples.filter(role=role)


def _trace_names(server: list[ServerSample], client: list[HostSample]) -> list[str]:
    waits = [f"wait.{kind}" for kind in wait_event_types(server)]
    return [
        *PROGRESS_TRACES,
        *(f"host.{key}" for key in HOST_KEYS),
        *(f"client.{key}" for key in CLIENT_KEYS if client),
        *(f"server.{key}" for key in SERVER_RATE_KEYS),
        "server.written",
        *waits,
    ]


def _trace(name: str, rows: Iterable[Sample], offsets: dict[int, float]) -> Timeline:
    source = source_of(name)
    if source is None:
        raise ValueError(f"unknown timeline {name!r}")
    _kind, value = source
    rows = list(rows)
    # A second read from a sampled log rests on its logged transactions (`sampled`).
    counts = [r.sampled for r in rows if isinstance(r, ProgressSample)] or None
    return build_timeline(
        [r.point for r in rows],
        [r.t or 0.0 for r in rows],
        [value(r) for r in rows],
        offsets,
        counts,
    )


def _by_point(
    progress: list[ProgressSample],
    host: list[HostSample],
    server: list[ServerSample],
    client: list[HostSample],
) -> dict[int, PointSamples]:
    points: dict[int, PointSamples] = {}
    kinds = (("progress", progress), ("host", host), ("server", server), ("client", client))
    for kind, rows in kinds:
        for row in rows:
            getattr(points.setdefault(row.point, PointSamples()), kind).append(row)
    return points


def _marks(
    progress: list[ProgressSample], offsets: dict[int, float]
) -> dict[int, tuple[float, float]]:
    """Point -> (x, y) of its warning mark: mid-window, above its highest tps."""
    measured: dict[int, list[ProgressSample]] = {}
    for sample in progress:
        if sample.tps is not None:
            measured.setdefault(sample.point, []).append(sample)
    return {
        point: (
            offsets.get(point, 0.0) + max(s.t or 0.0 for s in rows) / 2,
            max(s.tps or 0.0 for s in rows),
        )
        for point, rows in measured.items()
    }


def _warm_up_end(steady: SteadyState | None) -> float | None:
    """The time within the point when its tps settled after rising (None: no rise, or it
    never settled): the same settle time its warm_up_in_window warning gives."""
    if steady is None or not steady.settled or not steady.start or not steady.rose:
        return None
    return steady.skipped_s


def build_digest(
    progress: list[ProgressSample],
    host: list[HostSample],
    server: list[ServerSample],
    client: list[HostSample] | None = None,
) -> Digest:
    """The digest of one run from all of its samples, in point and time order (`client`:
    the client host's, for a run with one)."""
    client = client or []
    offsets = offsets_for(progress, host, server)
    by_point = _by_point(progress, host, server, client)
    steady = {point: checks.point_steady_state(samples) for point, samples in by_point.items()}
    found = {p: checks.sample_warnings(p, samples, steady[p]) for p, samples in by_point.items()}
    warm_ups = {p: _warm_up_end(steady[p]) for p in by_point}
    rows_of: dict[SampleKind, list[Sample]] = {
        "progress": list(progress),
        "host": list(host),
        "server": list(server),
        "client": list(client),
    }
    traces = {}
    for name in _trace_names(server, client):
        source = source_of(name)
        if source is not None:
            traces[name] = _trace(name, rows_of[source[0]], offsets).reduced().rounded()
    for name in COMPARE_TRACES:
        traces[name + OVERVIEW] = traces[name].reduced(MIN_TRACE_SAMPLES)
    return Digest(
        offsets=offsets,
        checkpoints=run_checkpoints(server),
        warnings={point: found_here for point, found_here in found.items() if found_here},
        marks=_marks(progress, offsets),
        warm_ups={point: end for point, end in warm_ups.items() if end is not None},
        cursor={
            "p": max((sample.pk for sample in progress), default=0),
            "h": max((sample.pk for sample in host), default=0),
            "c": max((sample.pk for sample in client), default=0),
            "s": max((sample.pk for sample in server), default=0),
        },
        traces=traces,
    )


def digest_key(run: Run) -> str:
    """The run state a stored digest is valid for: a final run's last event, or a run
    not final yet's status (its digest's `cursor` says how far it reaches)."""
    if not run.is_final:
        return f"v{DIGEST_VERSION}|{run.status}"
    last = run.last_event_at.isoformat() if run.last_event_at else ""
    return f"v{DIGEST_VERSION}|{run.status}|{last}"


def digests(
    runs: Iterable[Run], names: Collection[str] | None = None, overview: bool = False
) -> dict[int, Digest]:
    """Run id -> its digest with the traces named in `names` (every trace with None);
    with `overview`, each of those traces at MIN_TRACE_SAMPLES (the compared ones only).

    Reads two queries for runs whose stored digest is current; builds the
    others from their samples (three queries) and stores nothing: storing is the
    control worker's (`digest_refresh`).
    """
    if overview and names is not None:
        names = {name + OVERVIEW: name for name in names}
    by_pk = {run.pk: run for run in runs}
    stored = {row.run_id: row for row in RunTimeline.objects.filter(run_id__in=list(by_pk))}
    current = {
        pk: Digest.from_facts(row.facts)
        for pk, row in stored.items()
        if row.key == digest_key(by_pk[pk])
    }
    _attach_stored_traces(current, names)
    missing = [run for pk, run in by_pk.items() if pk not in current]
    if missing:
        built = _build(missing)
        for pk, digest in built.items():
            if names is not None:
                digest.traces = {
                    _named(k, names): t for k, t in digest.traces.items() if k in names
                }
            current[pk] = digest
    return current


def _named(stored: str, names: Collection[str]) -> str:
    """The name a stored trace goes by in a digest (an overview goes by its trace's name)."""
    return names[stored] if isinstance(names, dict) else stored


def _attach_stored_traces(found: dict[int, Digest], names: Collection[str] | None) -> None:
    if not found:
        return
    rows = TimelineTrace.objects.filter(run_id__in=list(found))
    if names is not None:
        rows = rows.filter(name__in=list(names))
    for run_id, name, samples in rows.values_list("run_id", "name", "samples"):
        found[run_id].traces[_named(name, names or ())] = Timeline.from_json(samples)


def _build(runs: list[Run]) -> dict[int, Digest]:
    found = selectors.timelines_by_run({run.pk for run in runs})
    return {
        run.pk: build_digest(
            found.progress[run.pk], found.host[run.pk], found.server[run.pk], found.client[run.pk]
        )
        for run in runs
    }


def digest_refresh(run_pk: int) -> bool:
    """Build and store the digest of a run unless the stored one is current (a running
    run's: stored less than RUNNING_REBUILD_S ago); whether it was built. The run stays
    locked meanwhile, so an event arriving for it waits and then has it built again (a
    missing or queued run: nothing, logged)."""
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).filter(pk=run_pk).first()
        if run is None or run.status == Run.Status.QUEUED:
            logger.info("run %s: %s, no digest built", run_pk, run.status if run else "gone")
            return False
        current = RunTimeline.objects.filter(run=run, key=digest_key(run))
        if not run.is_final:
            current = current.filter(built_at__gt=timezone.now() - RUNNING_REBUILD)
        if current.exists():
            return False
        _store([run], _build([run]))
    return True


def digests_refresh_running() -> int:
    """Rebuild the digests of the running runs that got events since theirs was stored, at
    most every RUNNING_REBUILD_S (the control worker's reaper pass); how many were built."""
    recently = Q(built_at__gt=timezone.now() - RUNNING_REBUILD)
    fresh = RunTimeline.objects.filter(run=OuterRef("pk")).filter(
        recently | Q(built_at__gte=OuterRef("last_event_at"))
    )
    due = (
        Run.objects.filter(status=Run.Status.RUNNING)
        .exclude(Exists(fresh))
        .values_list("pk", flat=True)
    )
    return sum(digest_refresh(pk) for pk in due)


def _store(runs: list[Run], built: dict[int, Digest]) -> None:
    """Keep the digests, replacing older ones, of the runs whose state is still the one
    they were built for; the runs are locked meanwhile so two builders of the same run
    at once store one of them, and a page's build of a run that has ended since never
    replaces the control worker's."""
    if not runs:
        return
    with transaction.atomic():
        locked = (
            Run.objects.select_for_update(no_key=True)
            .filter(pk__in=[run.pk for run in runs])
            .order_by("pk")
        )
        now_keys = {run.pk: digest_key(run) for run in locked.only("status", "last_event_at")}
        runs = [run for run in runs if now_keys.get(run.pk) == digest_key(run)]
        ids = [run.pk for run in runs]
        TimelineTrace.objects.filter(run_id__in=ids).delete()
        RunTimeline.objects.filter(run_id__in=ids).delete()
        now = timezone.now()
        RunTimeline.objects.bulk_create(
            RunTimeline(run=run, key=digest_key(run), facts=built[run.pk].facts(), built_at=now)
            for run in runs
        )
        TimelineTrace.objects.bulk_create(
            TimelineTrace(run=run, name=name, samples=trace.as_json())
            for run in runs
            for name, trace in built[run.pk].traces.items()
        )


@dataclass(frozen=True)
class Window:
    """One timeline between two x positions: every sample, unless more than ZOOM_MAX_SAMPLES."""

    trace: Timeline
    samples: int
    reduced: bool


def window(run: Run, name: str, x0: float, x1: float) -> Window:
    """The samples of trace `name` of `run` with x0 <= x <= x1 (raises ValueError for an
    unknown trace name)."""
    source = source_of(name)
    if source is None:
        raise ValueError(f"unknown timeline {name!r}")
    kind, _value = source
    offsets = digests([run], names=())[run.pk].offsets
    rows: list[Sample] = list(
        _stored_rows(run, kind).filter(_overlapping(offsets, x0, x1)).order_by("point", "t", "pk")
    )
    trace = _trace(name, rows, offsets)
    if len(trace) > ZOOM_MAX_SAMPLES:
        return Window(trace.reduced(ZOOM_MAX_SAMPLES), len(trace), True)
    return Window(trace, len(trace), False)


def _overlapping(offsets: dict[int, float], x0: float, x1: float) -> Q:
    """Rows of the points that reach into [x0, x1], at the times that fall inside it."""
    starts = sorted(offsets.items(), key=lambda item: item[1])
    query = Q(pk__in=[])
    for n, (point, start) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else float("inf")
        if start <= x1 and end >= x0:
            query |= Q(point=point, t__gte=x0 - start, t__lte=x1 - start)
    return query
