"""A run's timelines as the pages read them: reduced once, kept, zoomed at full resolution.

The pages never read every sample of a run. `digests` gives each run's
`Digest`: where each point starts on the time axis, its checkpoints, the
validity warnings found in each point's samples, where a point's warning mark
goes, and its timelines reduced to about a thousand samples each with
MinMax-LTTB (runs/timelines/downsample.py). Digests are stored (RunTimeline, TimelineSeries)
under a key of the run's state (status and the time of its last event). A
final run's digest is built by the control worker (`digest_refresh`, task
runs.tasks.digest_build) when the run ends and again when an event arrives
for it later (which changes the key); a page that finds none current builds
one for itself and stores nothing. A run still running is built by its page
views, again at most every RUNNING_REBUILD_S: its digest records the last
progress and host sample it holds (`cursor`), and its page's live stream sends
every sample after those.

`window` reads one timeline of a run between two x positions at full
resolution, for a chart the user zoomed into.
"""

import logging
import operator
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs import selectors
from runs.analysis import validity as checks
from runs.analysis.validity import CheckpointEvent, PointSamples, ValidityWarning
from runs.models import (
    ClientHostSample,
    HostSample,
    ProgressSample,
    Run,
    RunTimeline,
    ServerSample,
    TimelineSeries,
)
from runs.timelines.downsample import MIN_TRACE_SAMPLES, Timeline, build_timeline
from runs.timelines.samples import (
    BUFFER_SERIES,
    CLIENT_HOST_SERIES,
    HOST_SERIES,
    host_sample_values,
    offsets_for,
    run_checkpoints,
    wait_event_types,
    written_per_second,
)

logger = logging.getLogger(__name__)

# Raised whenever what a digest holds or how it is built changes: stored ones are rebuilt.
DIGEST_VERSION = 4
# How old the stored digest of a running run may be (its live stream sends what is newer).
RUNNING_REBUILD_S = 60
# A zoomed range holding more samples than this is reduced too (it is not a zoom any more).
ZOOM_MAX_SAMPLES = 5000

PROGRESS_SERIES = ("tps", "latency_ms")
HOST_KEYS = tuple(key for key, _label in HOST_SERIES)
CLIENT_KEYS = tuple(key for key, _label in CLIENT_HOST_SERIES)
BUFFER_KEYS = tuple(key for key, _label in BUFFER_SERIES)
COMPARE_SERIES = ("tps", "latency_ms", "server.written")
# The compared series are also kept reduced to MIN_TRACE_SAMPLES under `name + OVERVIEW`:
# a chart of many runs reads those instead of ten times the samples it would throw away.
OVERVIEW = "~overview"

Sample = ProgressSample | HostSample | ServerSample | ClientHostSample
Source = tuple[
    type[ProgressSample] | type[HostSample] | type[ServerSample] | type[ClientHostSample],
    Callable,
]


@dataclass
class Digest:
    """What the pages read of one run's samples (see the module docstring)."""

    offsets: dict[int, float]
    checkpoints: list[CheckpointEvent]
    warnings: dict[int, list[ValidityWarning]]
    marks: dict[int, tuple[float, float]]
    cursor: dict[str, int] = field(default_factory=dict)
    series: dict[str, Timeline] = field(default_factory=dict)

    def facts(self) -> dict:
        """The stored form of everything but the series (RunTimeline.facts)."""
        return {
            "offsets": {str(p): start for p, start in self.offsets.items()},
            "checkpoints": [[e.point, e.t, e.kind, e.edge] for e in self.checkpoints],
            "warnings": {
                str(p): [[w.code, w.detail] for w in found] for p, found in self.warnings.items()
            },
            "marks": {str(p): list(mark) for p, mark in self.marks.items()},
            "cursor": self.cursor,
        }

    @classmethod
    def from_facts(cls, facts: dict) -> "Digest":
        return cls(
            offsets={int(p): start for p, start in facts["offsets"].items()},
            checkpoints=[CheckpointEvent(*row) for row in facts["checkpoints"]],
            warnings={
                int(p): [ValidityWarning(code, detail) for code, detail in found]
                for p, found in facts["warnings"].items()
            },
            marks={int(p): (mark[0], mark[1]) for p, mark in facts["marks"].items()},
            cursor=facts["cursor"],
        )


def _wait_count(kind: str) -> Callable[[ServerSample], int]:
    def count(sample: ServerSample) -> int:
        waits = sample.data.get("wait_events") or {}
        return sum(n for key, n in waits.items() if key.split(":")[0] == kind)

    return count


def source_of(name: str) -> Source | None:
    """The sample model and value behind a series name (`tps`, `host.cpu_user`,
    `client.cpu_user`, `server.written`, `server.<buffer key>`, `wait.<wait-event type>`);
    None if unknown."""
    kind, _dot, key = name.partition(".")
    if name in PROGRESS_SERIES:
        return ProgressSample, operator.attrgetter(name)
    if kind == "host" and key in HOST_KEYS:
        return HostSample, lambda s: host_sample_values(s.data)[key]
    if kind == "client" and key in CLIENT_KEYS:
        return ClientHostSample, lambda s: host_sample_values(s.data)[key]
    if kind == "server" and key == "written":
        return ServerSample, written_per_second
    if kind == "server" and key in BUFFER_KEYS:
        return ServerSample, lambda s: s.data.get(key)
    if kind == "wait" and key:
        return ServerSample, _wait_count(key)
    return None


def _series_names(server: list[ServerSample], client: list[ClientHostSample]) -> list[str]:
    waits = [f"wait.{kind}" for kind in wait_event_types(server)]
    return [
        *PROGRESS_SERIES,
        *(f"host.{key}" for key in HOST_KEYS),
        *(f"client.{key}" for key in CLIENT_KEYS if client),
        *(f"server.{key}" for key in BUFFER_KEYS),
        "server.written",
        *waits,
    ]


def _series(name: str, rows: Iterable[Sample], offsets: dict[int, float]) -> Timeline:
    source = source_of(name)
    if source is None:
        raise ValueError(f"unknown timeline {name!r}")
    _model, value = source
    rows = list(rows)
    return build_timeline(
        [r.point for r in rows], [r.t or 0.0 for r in rows], [value(r) for r in rows], offsets
    )


def _by_point(
    progress: list[ProgressSample],
    host: list[HostSample],
    server: list[ServerSample],
    client: list[ClientHostSample],
) -> dict[int, PointSamples]:
    points: dict[int, PointSamples] = {}
    kinds = (("progress", progress), ("host", host), ("server", server), ("client", client))
    for kind, rows in kinds:
        for row in rows:
            getattr(points.setdefault(row.point, PointSamples()), kind).append(row)
    return points


def _marks(progress: list[ProgressSample], offsets: dict[int, float]) -> dict[int, tuple]:
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


def build_digest(
    progress: list[ProgressSample],
    host: list[HostSample],
    server: list[ServerSample],
    client: list[ClientHostSample] | None = None,
) -> Digest:
    """The digest of one run from all of its samples, in point and time order (`client`:
    the client host's, for a run with one)."""
    client = client or []
    offsets = offsets_for(progress, host, server)
    found = {
        point: checks.sample_warnings(point, samples)
        for point, samples in _by_point(progress, host, server, client).items()
    }
    rows_of: dict[type, list[Sample]] = {
        ProgressSample: list(progress),
        HostSample: list(host),
        ServerSample: list(server),
        ClientHostSample: list(client),
    }
    series = {}
    for name in _series_names(server, client):
        source = source_of(name)
        if source is not None:
            series[name] = _series(name, rows_of[source[0]], offsets).reduced().rounded()
    for name in COMPARE_SERIES:
        series[name + OVERVIEW] = series[name].reduced(MIN_TRACE_SAMPLES)
    return Digest(
        offsets=offsets,
        checkpoints=run_checkpoints(server),
        warnings={point: found_here for point, found_here in found.items() if found_here},
        marks=_marks(progress, offsets),
        cursor={
            "p": max((sample.pk for sample in progress), default=0),
            "h": max((sample.pk for sample in host), default=0),
            "c": max((sample.pk for sample in client), default=0),
        },
        series=series,
    )


def digest_key(run: Run) -> str:
    """The run state a stored digest is valid for: a final run's last event, or for a
    run not final yet the current RUNNING_REBUILD_S period."""
    if not run.is_final:
        return f"v{DIGEST_VERSION}|{run.status}|{int(time.time() // RUNNING_REBUILD_S)}"
    last = run.last_event_at.isoformat() if run.last_event_at else ""
    return f"v{DIGEST_VERSION}|{run.status}|{last}"


def digests(
    runs: Iterable[Run], names: Collection[str] | None = None, overview: bool = False
) -> dict[int, Digest]:
    """Run id -> its digest with the series named in `names` (every series with None);
    with `overview`, each of those series at MIN_TRACE_SAMPLES (the compared ones only).

    Reads two queries for runs whose stored digest is current; builds the
    others from their samples (three queries) and stores those of runs not
    final: a final run's digest is the control worker's to store (`digest_refresh`).
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
    _attach_stored_series(current, names)
    missing = [run for pk, run in by_pk.items() if pk not in current]
    if missing:
        built = _build(missing)
        _store([run for run in missing if not run.is_final], built)
        for pk, digest in built.items():
            if names is not None:
                digest.series = {
                    _named(k, names): s for k, s in digest.series.items() if k in names
                }
            current[pk] = digest
    return current


def _named(stored: str, names: Collection[str]) -> str:
    """The name a stored series goes by in a digest (an overview goes by its series' name)."""
    return names[stored] if isinstance(names, dict) else stored


def _attach_stored_series(found: dict[int, Digest], names: Collection[str] | None) -> None:
    if not found:
        return
    rows = TimelineSeries.objects.filter(run_id__in=list(found))
    if names is not None:
        rows = rows.filter(name__in=list(names))
    for run_id, name, samples in rows.values_list("run_id", "name", "samples"):
        found[run_id].series[_named(name, names or ())] = Timeline.from_json(samples)


def _build(runs: list[Run]) -> dict[int, Digest]:
    found = selectors.timelines_by_run({run.pk for run in runs})
    return {
        run.pk: build_digest(
            found.progress[run.pk], found.host[run.pk], found.server[run.pk], found.client[run.pk]
        )
        for run in runs
    }


def digest_refresh(run_pk: int) -> bool:
    """Build and store the digest of a final run unless the stored one is current; whether
    it was built. The run stays locked meanwhile, so an event arriving for it waits and
    then has it built again (a missing or not yet final run: nothing, logged)."""
    with transaction.atomic():
        run = Run.objects.select_for_update(no_key=True).filter(pk=run_pk).first()
        if run is None or not run.is_final:
            logger.info("run %s: %s, no digest built", run_pk, run.status if run else "gone")
            return False
        if RunTimeline.objects.filter(run=run, key=digest_key(run)).exists():
            return False
        _store([run], _build([run]))
    return True


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
        TimelineSeries.objects.filter(run_id__in=ids).delete()
        RunTimeline.objects.filter(run_id__in=ids).delete()
        now = timezone.now()
        RunTimeline.objects.bulk_create(
            RunTimeline(run=run, key=digest_key(run), facts=built[run.pk].facts(), built_at=now)
            for run in runs
        )
        TimelineSeries.objects.bulk_create(
            TimelineSeries(run=run, name=name, samples=series.as_json())
            for run in runs
            for name, series in built[run.pk].series.items()
        )


@dataclass(frozen=True)
class Window:
    """One timeline between two x positions: every sample, unless more than ZOOM_MAX_SAMPLES."""

    series: Timeline
    samples: int
    reduced: bool


def window(run: Run, name: str, x0: float, x1: float) -> Window:
    """The samples of series `name` of `run` with x0 <= x <= x1 (raises ValueError for an
    unknown series name)."""
    source = source_of(name)
    if source is None:
        raise ValueError(f"unknown timeline {name!r}")
    model, _value = source
    offsets = digests([run], names=())[run.pk].offsets
    rows: list[Sample] = list(
        model.objects.filter(run=run)
        .filter(_overlapping(offsets, x0, x1))
        .order_by("point", "t", "pk")
    )
    series = _series(name, rows, offsets)
    if len(series) > ZOOM_MAX_SAMPLES:
        return Window(series.reduced(ZOOM_MAX_SAMPLES), len(series), True)
    return Window(series, len(series), False)


def _overlapping(offsets: dict[int, float], x0: float, x1: float) -> Q:
    """Rows of the points that reach into [x0, x1], at the times that fall inside it."""
    starts = sorted(offsets.items(), key=lambda item: item[1])
    query = Q(pk__in=[])
    for n, (point, start) in enumerate(starts):
        end = starts[n + 1][1] if n + 1 < len(starts) else float("inf")
        if start <= x1 and end >= x0:
            query |= Q(point=point, t__gte=x0 - start, t__lte=x1 - start)
    return query
