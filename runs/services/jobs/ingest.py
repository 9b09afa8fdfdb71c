"""The per-second events of many agents, stored a batch at a time.

Nearly every event a control worker stores is a `progress` or `sample` event
of a running run (about three a second per agent). `record_live_events`
stores consecutive ones of a batch with the checks and effects of
`event_refusal` and `run_record_event` (authenticated by the run's approved
agent, the run's token, once per (run, seq), one sample row per point and
`t`, the run's `last_event_at`), but with one query per kind of row for the
whole batch instead of several per event. Live events of a run that is not
running (its first progress marks it running; a final run keeps its status)
go through `run_record_event` one by one. The caller keeps the stream's order
by passing consecutive live events only, inside its transaction.
`record_heartbeats` does the same for the agents' heartbeats (one every few
seconds per agent): only the last one of each agent in a batch counts.
"""

import logging
from typing import cast

from django.db import connection
from django.db.models import JSONField, Model, QuerySet
from django.utils import timezone
from psycopg.types.json import Jsonb

from agents.contract.reports.events import (
    LIVE_EVENT_TYPES,
    AgentEvent,
    HeartbeatData,
    SampleData,
    validate_event,
)
from agents.contract.reports.events import RunEvent as RunEventDocument
from runs.models import (
    Host,
    HostSample,
    ProgressSample,
    Run,
    RunEvent,
    ServerSample,
)
from runs.services.hosts.enrollment import heartbeat_refusal, run_event_refusal
from runs.services.hosts.reconcile import agent_report, reconcile_after_commit
from runs.services.hosts.space import host_record_space
from runs.services.jobs.events import (
    event_values,
    parse_event_time,
    progress_values,
    run_record_event,
)

logger = logging.getLogger(__name__)


Accepted = list[tuple[RunEventDocument, Run]]
Row = dict[str, object]  # a row to insert: column attname -> value
StoredRows = QuerySet[ProgressSample] | QuerySet[HostSample] | QuerySet[ServerSample]
# The sample event's keys (agents.contract.reports.events.SampleData) -> the row they are stored as.
SAMPLE_KINDS: tuple[tuple[str, type[HostSample] | type[ServerSample], Row], ...] = (
    ("host", HostSample, {"role": HostSample.Role.SERVER}),
    ("server", ServerSample, {}),
    ("client_host", HostSample, {"role": HostSample.Role.CLIENT}),
)


def is_live_event(document: object) -> bool:
    """Whether a decoded stream entry is a progress or sample event (`record_live_events`)."""
    return isinstance(document, dict) and document.get("type") in LIVE_EVENT_TYPES


def is_heartbeat(document: object) -> bool:
    """Whether a decoded stream entry is a heartbeat (`record_heartbeats`)."""
    return isinstance(document, dict) and document.get("type") == "heartbeat"


def record_heartbeats(documents: list[object]) -> list[str | None]:
    """Store a batch of heartbeats as `agent_record_event` does each (the host is seen now,
    running what the agent last said) in three queries; for each, why it is refused or
    None. Raises InvalidEvent for a document that is no event."""
    events = [cast(AgentEvent, validate_event(document)) for document in documents]
    names = sorted({event["agent"] or "" for event in events})
    found = Host.objects.select_for_update(no_key=True).filter(name__in=names).order_by("pk")
    hosts = {h.name: h for h in found.only("name", "secret", "enrollment", "current_run")}
    refusals = [heartbeat_refusal(event, hosts.get(event["agent"] or "")) for event in events]
    accepted = [e for e, refusal in zip(events, refusals, strict=True) if refusal is None]
    said = [
        (hosts[event["agent"] or ""], _as_pk(event["data"].get("running"))) for event in accepted
    ]
    known = set(
        Run.objects.filter(pk__in=[pk for _host, pk in said if pk]).values_list("pk", flat=True)
    )
    running = {host.pk: (host, pk if pk in known else None) for host, pk in said}
    Host.objects.filter(pk__in=list(running)).update(last_seen=timezone.now())
    for host, run_pk in running.values():
        if host.current_run_id != run_pk:  # a job started or ended: rare
            Host.objects.filter(pk=host.pk).update(current_run_id=run_pk)
    spaces = {}
    for event in accepted:  # each agent's latest of the batch (it reports once a minute)
        if space := cast(HeartbeatData, event["data"]).get("space"):
            spaces[hosts[event["agent"] or ""].pk] = space
    for host_pk, space in spaces.items():
        host_record_space(host_pk, space)
    last = {event["agent"]: event for event in accepted}  # each agent's last heartbeat
    for name, event in last.items():
        said_at = parse_event_time(event.get("ts"))
        data = cast(HeartbeatData, event["data"])
        reconcile_after_commit(agent_report(hosts[name or ""].pk, data, said_at))
    return refusals


def _as_pk(value: object) -> int | None:
    try:
        return int(str(value or ""))
    except ValueError:
        return None


def _run_pk(event: RunEventDocument) -> int | None:
    return _as_pk(event.get("run_id"))


def _locked_runs(events: list[RunEventDocument]) -> dict[int, Run]:
    """The events' runs with their hosts, locked (in id order) until the caller commits."""
    pks = sorted({pk for event in events if (pk := _run_pk(event)) is not None})
    found = (
        Run.objects.select_for_update(of=("self",), no_key=True)
        .select_related("host")
        .only("status", "token", "host", "host__name", "host__secret", "host__enrollment")
        .filter(pk__in=pks)
    )
    return {run.pk: run for run in found.order_by("pk")}


def record_live_events(documents: list[object]) -> list[str | None]:
    """Store a batch of progress and sample events; for each, why it is refused (for the
    dead-letter stream) or None. Raises InvalidEvent for a document that is no event."""
    events = [cast(RunEventDocument, validate_event(document)) for document in documents]
    runs = _locked_runs(events)
    refusals = [run_event_refusal(event, runs.get(_run_pk(event) or 0)) for event in events]
    running: Accepted = []
    for event, refusal in zip(events, refusals, strict=True):
        if refusal is not None:
            continue
        run = runs[_run_pk(event) or 0]
        if run.status == Run.Status.RUNNING:
            running.append((event, run))
        else:
            run_record_event(event)
    _store_running(running)
    return refusals


def _store_running(accepted: Accepted) -> None:
    fresh = _new_events(_right_token(accepted))
    if not fresh:
        return
    insert_rows(RunEvent, [event_values(run.pk, event) for event, run in fresh])
    _store_samples(fresh)
    runs = {run.pk for _event, run in fresh}
    Run.objects.filter(pk__in=runs).update(last_event_at=timezone.now())


def _right_token(accepted: Accepted) -> Accepted:
    kept = []
    for event, run in accepted:
        if event.get("token") == run.token:
            kept.append((event, run))
        else:
            logger.warning("run %s: event %s with a wrong token dropped", run.pk, event["seq"])
    return kept


def _new_events(accepted: Accepted) -> Accepted:
    """The events not stored yet (and each once, should the batch hold one twice)."""
    if not accepted:
        return []
    stored = set(
        RunEvent.objects.filter(
            run_id__in={run.pk for _event, run in accepted},
            seq__in={event["seq"] for event, _run in accepted},
        ).values_list("run_id", "seq")
    )
    fresh = []
    for event, run in accepted:
        key = (run.pk, event["seq"])
        if key in stored:
            logger.info("run %s: event %s already stored", run.pk, event["seq"])
            continue
        stored.add(key)
        fresh.append((event, run))
    return fresh


def _store_samples(fresh: Accepted) -> None:
    """One sample row per (run, point, t) not stored yet, for each kind of sample."""
    progress: list[Row] = []
    samples: dict[str, list[Row]] = {key: [] for key, _model, _fixed in SAMPLE_KINDS}
    for event, run in fresh:
        if event["type"] == "progress":
            line = event["data"]
            progress.append(progress_values(run.pk, int(line.get("point") or 0), line))
            continue
        data = cast(SampleData, event["data"])
        point = int(data.get("point") or 0)
        for key, _model, fixed in SAMPLE_KINDS:
            if isinstance(sample := data.get(key), dict):
                samples[key].append(
                    {
                        "run_id": run.pk,
                        **fixed,
                        "point": point,
                        "t": sample.get("t"),
                        "data": sample,
                    }
                )
    insert_rows(ProgressSample, _not_stored(ProgressSample.objects.all(), progress))
    for key, model, fixed in SAMPLE_KINDS:
        insert_rows(model, _not_stored(model.objects.filter(**fixed), samples[key]))


def insert_rows(model: type[Model], rows: list[Row]) -> None:
    """Insert rows of `model` (column attname -> value, the same columns in each): with
    COPY on PostgreSQL (several times faster than an INSERT of rows built in Python),
    with bulk_create elsewhere."""
    if not rows:
        return
    if connection.vendor != "postgresql":
        model._default_manager.bulk_create([model(**row) for row in rows])
        return
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    fields = [by_attname[attname] for attname in rows[0]]
    columns = ", ".join(connection.ops.quote_name(f.column or f.name) for f in fields)
    table = connection.ops.quote_name(model._meta.db_table)
    json_columns = [isinstance(f, JSONField) for f in fields]
    with (
        connection.cursor() as cursor,
        cursor.cursor.copy(f"COPY {table} ({columns}) FROM STDIN") as copy,
    ):
        for row in rows:
            values = row.values()
            copy.write_row(
                [
                    Jsonb(v) if is_json and v is not None else v
                    for v, is_json in zip(values, json_columns, strict=True)
                ]
            )


def _not_stored(stored_rows: StoredRows, candidates: list[Row]) -> list[Row]:
    """The rows whose (run, point, t) is neither among `stored_rows` nor earlier in
    `candidates`."""
    if not candidates:
        return []
    stored: set[tuple[object, object, object]] = set(
        stored_rows.filter(
            run_id__in={row["run_id"] for row in candidates},
            point__in={row["point"] for row in candidates},
            t__in={row["t"] for row in candidates if row["t"] is not None},
        ).values_list("run_id", "point", "t")
    )
    new = []
    for row in candidates:
        key = (row["run_id"], row["point"], row["t"])
        if key not in stored:
            stored.add(key)
            new.append(row)
    return new
