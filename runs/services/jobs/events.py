"""Agent events into the database (docs/contracts.md, sections 2 and 4).

`record_event` (runs/services/hosts/events.py) validates an event from the
stream once and hands it on: `run_record_event` here stores a run's event once
per (run, seq) and applies it; `agent_record_event` there handles registration
and heartbeats. All expect to run inside the caller's transaction (the consumer
acknowledges the stream entry only after the commit).

Storage is append-only. A live sample (progress line, host or server sample)
is stored when its event arrives; a point's own timelines, repeated by its
`point` event and by the final `result` event, only add the samples no live
event brought (one row per point and `t`), and a point result is stored once.
Nothing is deleted and stored again, so the live page's cursor sends every
row exactly once.

A RunEvent row keeps what no typed row holds (`compact_payload`): a progress
or sample event's data is one sample row, so its event row keeps none; a
point or result event row keeps its scalars, not the point's timelines and
output (Result, the sample rows) or the run's snapshot (the Run row). Event
rows are the idempotency key; those holding nothing else are deleted
BENCHLAB_EVENT_RETENTION_DAYS after their run finished (`events_purge`).
"""

import logging
from collections.abc import Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any, TypeVar

from django.conf import settings
from django.db.models import QuerySet
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from agents.contract.reports.events import (
    LogData,
    ProgressData,
    SampleData,
    StatusData,
    StepData,
)
from agents.contract.reports.events import RunEvent as RunEventDocument
from agents.contract.reports.noise import PointNoise
from agents.contract.reports.results import PointResult, ProgressLine, ResultDocument, Sample
from runs.flamegraphs.store import cpu_profile_store
from runs.models import (
    Host,
    HostSample,
    ProgressSample,
    Result,
    Run,
    RunEvent,
    ServerSample,
)
from runs.services.catalogues import catalogue_keep
from runs.services.hosts.noise import canary_record
from runs.services.hosts.reconcile import job_settled_after_commit
from runs.services.jobs.failed_builds import build_failure_shared
from runs.services.runs import digest_build_after_commit, run_finish, run_mark_running

logger = logging.getLogger(__name__)

FINAL_STATUSES = {Run.Status.SUCCEEDED, Run.Status.FAILED, Run.Status.CANCELLED}


def parse_event_time(value: object) -> datetime | None:
    """An event's aware ISO timestamp; None when missing, naive or unreadable."""
    parsed = parse_datetime(value) if isinstance(value, str) else None
    return parsed if parsed is None or timezone.is_aware(parsed) else None


def run_record_event(event: RunEventDocument) -> bool:
    """Store and apply one validated run event; False when it is dropped or a duplicate.

    Dropped (and logged): unknown run, wrong token. A duplicate (same run and
    seq) changes nothing. Terminal states are final: later events still store
    their data (points, logs) but never change the status, and have the run's
    timeline digest built again (runs.services.runs.digest_build_after_commit).
    """
    run = _locked_run(event["run_id"])
    if run is None:
        logger.warning("event %s of unknown run %s dropped", event["seq"], event["run_id"])
        return False
    if event.get("token") != run.token:
        logger.warning("run %s: event %s with a wrong token dropped", run.pk, event["seq"])
        return False
    if RunEvent.objects.filter(run=run, seq=event["seq"]).exists():
        logger.info("run %s: event %s already stored", run.pk, event["seq"])
        return False
    RunEvent.objects.create(**event_values(run.pk, event))
    Run.objects.filter(pk=run.pk).update(last_event_at=timezone.now())
    _apply(run, event)
    if run.status in FINAL_STATUSES:  # a late event: the digest's key (and samples) changed
        digest_build_after_commit(run)
    return True


def event_values(run_pk: int, event: RunEventDocument) -> dict[str, object]:
    """The RunEvent row (column attname -> value) that stores `event` once, its data
    compacted (`compact_payload`)."""
    return {
        "run_id": run_pk,
        "agent": event.get("agent") or "",
        "seq": event["seq"],
        "type": event["type"],
        "ts": parse_event_time(event.get("ts")),
        "payload": compact_payload(event["type"], event["data"]),
        "received_at": timezone.now(),
    }


# What typed rows hold of each event type's data, left out of its RunEvent row.
STORED_ELSEWHERE: dict[str, frozenset[str] | None] = {
    "progress": None,  # all of it: one ProgressSample
    "sample": None,  # all of it: HostSample (server and/or client host) and/or ServerSample
    "point": frozenset({"progress", "host_samples", "server_samples", "stdout", "stderr"}),
    "cpu_profile": frozenset({"folded"}),
    "result": frozenset(
        {
            "points",
            "cpu_profiles",
            "facts",
            "install",
            "storage",
            "settings",
            "steps",
            "server_log_tail",
        }
    ),
}
# The event types whose rows hold nothing once compacted but the idempotency key
# (and a point's or result's scalars, which the Result and Run rows hold too).
KEY_ONLY_TYPES = ("progress", "sample", "point", "result")
PURGE_BATCH = 10_000


def compact_payload(event_type: str, data: Mapping[str, object]) -> dict[str, object]:
    """An event's data without what the typed rows it is stored in already hold."""
    if event_type not in STORED_ELSEWHERE:
        return dict(data)
    elsewhere = STORED_ELSEWHERE[event_type]
    if elsewhere is None:
        return {}
    return {key: value for key, value in data.items() if key not in elsewhere}


def events_purge() -> int:
    """Delete up to PURGE_BATCH key-only event rows (KEY_ONLY_TYPES) of runs that finished
    more than BENCHLAB_EVENT_RETENTION_DAYS ago; how many were deleted. Log, status and
    step events stay: they are the run's log."""
    days = settings.BENCHLAB_EVENT_RETENTION_DAYS
    if days <= 0:
        return 0
    cutoff = timezone.now() - timedelta(days=days)
    old = RunEvent.objects.filter(type__in=KEY_ONLY_TYPES, run__finished_at__lt=cutoff)
    ids = list(old.values_list("pk", flat=True)[:PURGE_BATCH])
    deleted, _by_model = RunEvent.objects.filter(pk__in=ids).delete()
    if deleted:
        logger.info("deleted %d event rows of runs finished over %d days ago", deleted, days)
    return deleted


def _apply(run: Run, event: RunEventDocument) -> None:
    """What an event of each type changes, besides its own RunEvent row."""
    if event["type"] == "status":
        _apply_status(run, event["data"])
    elif event["type"] == "step":
        _apply_step(run, event["data"])
    elif event["type"] == "progress":
        _apply_progress(run, event["data"])
    elif event["type"] == "sample":
        _apply_sample(run, event["data"])
    elif event["type"] == "point":
        store_point(run, event["data"])
    elif event["type"] == "cpu_profile":
        cpu_profile_store(run, event["data"])
    elif event["type"] == "log":
        _apply_log(run, event["data"])
    else:
        _apply_result(run, event["data"])


def _locked_run(run_id: str | None) -> Run | None:
    """The run, locked for this transaction so events of one run apply one at a time."""
    try:
        pk = int(run_id or "")
    except ValueError:
        return None
    locked = Run.objects.select_for_update(of=("self",), no_key=True)  # never the host
    # The experiment comes along: a final event reads it (adaptive, series occurrence).
    return locked.filter(pk=pk).select_related("host", "experiment").first()


def _set_step(run: Run, text: str) -> None:
    if run.status not in FINAL_STATUSES:
        run_mark_running(run)
    Run.objects.filter(pk=run.pk, status=Run.Status.RUNNING).update(step=text[:300])


def _apply_status(run: Run, data: StatusData) -> None:
    message = data.get("message") or ""
    _set_step(run, f"{data.get('state', '')}: {message}" if message else data.get("state", ""))


def _apply_step(run: Run, data: StepData) -> None:
    percent = data.get("percent")
    parts = [data.get("name", ""), f"{percent:g}%" if isinstance(percent, int | float) else ""]
    parts.append(data.get("message") or "")
    _set_step(run, " ".join(part for part in parts if part))


def _apply_progress(run: Run, data: ProgressData) -> None:
    if run.status == Run.Status.QUEUED:
        run_mark_running(run)
    _add_progress(run, data.get("point", 0), [data])


def _add_progress(run: Run, point: int, lines: Sequence[ProgressLine]) -> None:
    """Store the progress lines of `point` that are not stored yet (one row per `t`)."""
    new = _not_stored(ProgressSample.objects.filter(run=run, point=point), lines)
    ProgressSample.objects.bulk_create(
        ProgressSample(**progress_values(run.pk, point, line)) for line in new
    )


PROGRESS_VALUES = (
    "tps", "latency_ms", "stddev_ms", "failed", "sampled", "sampling_rate",
    "p50_ms", "p95_ms", "p99_ms",
)  # fmt: skip


def _replace_progress(run: Run, point: int, lines: Sequence[ProgressLine]) -> None:
    """The point's own timeline in place of what live events stored (kept if it has none).

    Stored seconds are updated in place: a live page has drawn them, and its stream
    (runs/sse.py) sends only rows it has not sent, so new rows would be drawn twice.
    """
    if not lines:
        return
    stored = {row.t: row for row in ProgressSample.objects.filter(run=run, point=point)}
    changed = []
    for line in lines:
        row = stored.pop(line.get("t", 0.0), None)
        values = progress_values(run.pk, point, line)
        if row is not None and any(getattr(row, key) != values[key] for key in PROGRESS_VALUES):
            for key in PROGRESS_VALUES:
                setattr(row, key, values[key])
            changed.append(row)
    ProgressSample.objects.bulk_update(changed, PROGRESS_VALUES)
    ProgressSample.objects.filter(pk__in=[row.pk for row in stored.values()]).delete()
    _add_progress(run, point, lines)


def progress_values(
    run_pk: int, point: int, line: ProgressLine | ProgressData
) -> dict[str, object]:
    """The ProgressSample row (column attname -> value) of one progress line of `point`."""
    return {
        "run_id": run_pk,
        "point": point,
        "t": line.get("t", 0.0),
        "tps": line.get("tps"),
        "latency_ms": line.get("latency_ms"),
        "stddev_ms": line.get("stddev_ms"),
        "failed": line.get("failed") or 0,
        "sampled": line.get("sampled"),
        "sampling_rate": line.get("sampling_rate"),
        "p50_ms": line.get("p50_ms"),
        "p95_ms": line.get("p95_ms"),
        "p99_ms": line.get("p99_ms"),
    }


def _add_host_samples(run: Run, role: HostSample.Role, point: int, samples: list[Sample]) -> None:
    """Store the samples of the host in `role` during `point` not stored yet (one row per
    `t`)."""
    stored = HostSample.objects.filter(run=run, role=role, point=point)
    HostSample.objects.bulk_create(
        HostSample(run=run, role=role, point=point, t=s.get("t"), data=s)
        for s in _not_stored(stored, samples)
    )


def _add_server_samples(run: Run, point: int, samples: list[Sample]) -> None:
    """Store the server samples of `point` not stored yet (one row per `t`)."""
    stored = ServerSample.objects.filter(run=run, point=point)
    ServerSample.objects.bulk_create(
        ServerSample(run=run, point=point, t=s.get("t"), data=s)
        for s in _not_stored(stored, samples)
    )


Row = TypeVar("Row", ProgressLine, Sample)
StoredRows = QuerySet[ProgressSample] | QuerySet[HostSample] | QuerySet[ServerSample]


def _not_stored(stored_rows: StoredRows, rows: Sequence[Row]) -> list[Row]:
    """The rows whose `t` is not among `stored_rows` (of one point; the run row is locked)."""
    wanted = {row.get("t") for row in rows}
    found = stored_rows.filter(t__in=[t for t in wanted if t is not None])
    stored = set(found.values_list("t", flat=True))
    if None in wanted and stored_rows.filter(t__isnull=True).exists():
        stored.add(None)
    new = []
    for row in rows:
        if row.get("t") not in stored:
            stored.add(row.get("t"))
            new.append(row)
    return new


def _apply_sample(run: Run, data: SampleData) -> None:
    point = data.get("point", 0)
    if isinstance(data.get("host"), dict):
        _add_host_samples(run, HostSample.Role.SERVER, point, [data["host"]])
    if isinstance(data.get("server"), dict):
        _add_server_samples(run, point, [data["server"]])
    if isinstance(data.get("client_host"), dict):
        _add_host_samples(run, HostSample.Role.CLIENT, point, [data["client_host"]])


def _apply_log(run: Run, data: LogData) -> None:
    log = logger.warning if data.get("level") in ("warning", "error") else logger.debug
    log("run %s: agent says: %s", run.pk, data.get("message", ""))


def _apply_result(run: Run, data: ResultDocument) -> None:
    stored = set(Result.objects.filter(run=run).values_list("index", flat=True))
    for point in data.get("points") or []:
        if point["index"] not in stored:
            store_point(run, point)
    for cpu_profile in data.get("cpu_profiles") or []:
        cpu_profile_store(run, cpu_profile)
    settings = data.get("settings") or {}
    snapshot: dict[str, object] = {
        "install": data.get("install") or {},
        "facts": data.get("facts") or {},
        "storage_facts": data.get("storage") or {},
        "effective_settings": settings.get("effective") or [],
        "steps": data.get("steps") or [],
        "server_log_tail": data.get("server_log_tail") or "",
        "agent_version": data.get("agent_version") or "",
        "network": data.get("network") or {},
        "build_record": data.get("build") or {},
        "compiled_settings": settings.get("compiled") or {},
        "step": "",
    }
    canary = data.get("canary")
    if canary is not None:
        snapshot["host_noise"] = canary_record(run, canary, parse_event_time(canary.get("at")))
    started = parse_event_time(data.get("started_at"))
    if started is not None:  # the agent's, as `finished_at` is: one clock for the run's span
        snapshot["started_at"] = started
    if isinstance(settings.get("catalogue"), dict):
        _keep_catalogue(run, settings["catalogue"])
    status = data.get("status") if data.get("status") in FINAL_STATUSES else Run.Status.FAILED
    when = parse_event_time(data.get("finished_at"))
    finished = run_finish(run, status, data.get("error"), when, snapshot=snapshot)
    if finished:
        build_failure_shared(run)
    else:
        _keep_late_result(run, data, snapshot)
    job_settled_after_commit(run)
    hosts = [pk for pk in (run.host_id, run.client_host_id) if pk is not None]
    Host.objects.filter(pk__in=hosts, current_run=run).update(current_run=None)


def _keep_catalogue(run: Run, catalogue: dict[str, Any]) -> None:
    """The catalogue a run's agent read from its server (none cached), for its version."""
    version = catalogue.get("version")
    if not isinstance(version, str) or not version:
        logger.warning("run %s: a catalogue without a version was sent; not kept", run.pk)
        return
    catalogue_keep(version, catalogue, run.host.name if run.host_id else "")


def _keep_late_result(run: Run, data: ResultDocument, snapshot: dict[str, object]) -> None:
    """A result for a run the lab already settled (cancelled, failed as agent_lost or
    agent_restarted, or a result sent again): its points are stored (once), and its
    snapshot fills what the run lacks; the status and what the run holds stay."""
    held = Run.objects.filter(pk=run.pk).values(*snapshot).first() or {}
    missing = {key: value for key, value in snapshot.items() if value and not held.get(key)}
    Run.objects.filter(pk=run.pk).update(**missing)
    error = data.get("error")
    logger.warning(
        "run %s: late result (%s%s) for a run already final: kept as a late result",
        run.pk,
        data.get("status"),
        f" {error['code']}" if error else "",
    )


def store_point(run: Run, point: PointResult) -> Result:
    """Store a point result once, with the samples of its timelines no live event brought.

    The `point` event stores it; the final `result` event repeats it and
    changes nothing then (it stores only points whose `point` event is missing).
    The point's timeline replaces the live one: a second read from the
    transaction log may have been sent live before every log line of it had
    arrived (agents/pgbench/log_tail.py).
    """
    index = point["index"]
    result, _created = Result.objects.get_or_create(
        run=run, index=index, defaults=_result_values(point)
    )
    _replace_progress(run, index, point.get("progress") or [])
    _add_host_samples(run, HostSample.Role.SERVER, index, point.get("host_samples") or [])
    _add_server_samples(run, index, point.get("server_samples") or [])
    _add_host_samples(run, HostSample.Role.CLIENT, index, point.get("client_host_samples") or [])
    return result


def _result_values(point: PointResult) -> dict[str, object]:
    return {
        "clients": point.get("clients") or 0,
        "threads": point.get("threads"),
        "repeat": point.get("repeat") or 1,
        "tps": point.get("tps"),
        "latency_avg_ms": point.get("latency_avg_ms"),
        "latency_stddev_ms": point.get("latency_stddev_ms"),
        "percentiles": point.get("latency_percentiles_ms") or {},
        "transactions": point.get("transactions"),
        "failed": point.get("failed") or 0,
        "retried": point.get("retried"),
        "skipped": point.get("skipped"),
        "late": point.get("late"),
        "latency_limit_ms": point.get("latency_limit_ms"),
        "schedule_lag_avg_ms": point.get("lag_avg_ms"),
        "schedule_lag_max_ms": point.get("lag_max_ms"),
        "aborted_clients": point.get("aborted_clients") or 0,
        "duration_s": point.get("duration_s"),
        "pgbench_cpu_s": point.get("pgbench_cpu_s"),
        "pgbench_cpus": point.get("pgbench_cpus"),
        "started_epoch": point.get("started_epoch"),
        "ended_epoch": point.get("ended_epoch"),
        "agent_cpu_s": point.get("agent_cpu_s"),
        "statements": point.get("statements") or [],
        "messages": point.get("messages") or [],
        "argv": point.get("argv") or [],
        "exit_code": point.get("exit_code"),
        "stdout": point.get("stdout") or "",
        "stderr": point.get("stderr") or "",
        "scripts": point.get("scripts") or [],
        "processes": point.get("processes") or [],
        "counters": point.get("counters") or {},
        **_noise_values(point.get("noise")),
    }


def _noise_values(noise: PointNoise | None) -> dict[str, object]:
    """The point's noise columns; an agent before them sends none."""
    if noise is None:
        return {"cpu_steal_percent": None, "foreign_cpu_percent": None, "noise": {}}
    return {
        "cpu_steal_percent": noise["cpu_steal_percent"],
        "foreign_cpu_percent": noise["foreign_cpu_percent"],
        "noise": dict(noise),
    }
