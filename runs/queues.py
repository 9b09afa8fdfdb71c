"""What each host is doing and what waits for it, with an estimated start per waiting run.

`runs_occupying` is the one query saying which runs hold or wait for a host
(a run that is queued or running on it, as its server host or as the client
host that runs its pgbench); everything else here reads it. A host runs one
job at a time (the agent's concurrency is 1) and takes its queue in the order
the runs were sent, so a waiting run starts when the run in progress and every
run before it have taken their estimated time; a run with a client host waits
for both hosts and keeps both busy. A run's time is learned from the runs its
host finished (runs/estimates.py); the first run of a source build its host has
not compiled adds the compile.
"""

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Q, QuerySet
from django.utils import timezone

from runs.estimates import (
    DEFAULT_TIMINGS,
    Learned,
    Timings,
    definition_key,
    learned_timings,
    sweep_seconds,
)
from runs.models import Host, Run


def runs_occupying(hosts: list[Host]) -> QuerySet[Run]:
    """The runs that hold or wait for these hosts, in the order each host takes them."""
    return (
        Run.objects.filter(
            Q(host__in=hosts) | Q(client_host__in=hosts), status__in=Run.ACTIVE_STATES
        )
        .select_related("experiment", "build", "config_profile", "workload", "host", "client_host")
        .order_by("queued_at", "position", "pk")
    )


def estimated_seconds(run: Run, timings: Timings = DEFAULT_TIMINGS) -> float | None:
    """How long a run takes by its spec's sweep and its host's `timings`
    (runs.estimates.sweep_seconds); None for runs measured by transactions."""
    scale = (run.spec.get("dataset") or {}).get("scale") or 1
    return sweep_seconds(run.spec.get("sweep") or {}, scale, timings)


@dataclass(frozen=True)
class Waiting:
    """A queued run and when it should start (None once an earlier run's time is unknown)."""

    run: Run
    starts_at: datetime | None


@dataclass
class HostQueue:
    """What one host does now and what waits for it, in order."""

    current: Run | None = None
    waiting: list[Waiting] = field(default_factory=list)


def _compile_seconds(run: Run, learned: Learned, compiling: set[tuple[int, str]]) -> float:
    """What compiling `run`'s source build adds before it: once per host and definition the
    host has not built (Learned.build_seconds), paid by the first run of it in the queue,
    which `compiling` records."""
    if run.build is None or run.host is None:
        return 0.0
    compile_time = learned.build_seconds(run.host, run.build)
    key = (run.host.pk, definition_key(run.build.definition))
    if compile_time is None or key in compiling:
        return 0.0
    compiling.add(key)
    return compile_time.seconds


def _busy_until(
    current: Run | None, now: datetime, learned: Learned, compiling: set[tuple[int, str]]
) -> datetime | None:
    if current is None:
        return now
    seconds = estimated_seconds(current, learned.for_run(current))
    if seconds is None:
        return None
    seconds += _compile_seconds(current, learned, compiling)
    return max(now, (current.started_at or now) + timedelta(seconds=seconds))


def _occupied(run: Run, queues: dict[int, HostQueue]) -> list[int]:
    """The ids of the hosts among `queues` that `run` holds: its host and its client host."""
    return [pk for pk in (run.host_id, run.client_host_id) if pk in queues]


def _latest(times: list[datetime | None]) -> datetime | None:
    """When every one of several hosts is free (None when any of them is unknown)."""
    return None if None in times else max(t for t in times if t is not None)


def host_queues(hosts: list[Host]) -> dict[int, HostQueue]:
    """Host id -> its running run and its waiting runs with their estimated starts."""
    queues = {host.pk: HostQueue() for host in hosts}
    occupying = list(runs_occupying(hosts))
    for run in occupying:
        for pk in _occupied(run, queues):
            if run.status == Run.Status.RUNNING and queues[pk].current is None:
                queues[pk].current = run
    now = timezone.now()
    learned = learned_timings({run.host_id for run in occupying})
    compiling: set[tuple[int, str]] = set()
    free_at = {
        pk: _busy_until(queue.current, now, learned, compiling) for pk, queue in queues.items()
    }
    for run in occupying:
        if run.status != Run.Status.QUEUED:
            continue
        held = _occupied(run, queues)
        starts = _latest([free_at[pk] for pk in held])
        seconds = estimated_seconds(run, learned.for_run(run))
        if seconds is not None:
            seconds += _compile_seconds(run, learned, compiling)
        for pk in held:
            queues[pk].waiting.append(Waiting(run, starts))
            free_at[pk] = starts + timedelta(seconds=seconds) if starts and seconds else None
    return queues
