"""Events from the stream, handed to their handler; an agent's own events handled here.

`record_event` validates any event and hands a run's event to
runs.services.jobs.events. An agent's registration creates or refreshes its Host
(facts, storage, installs, catalogues); a heartbeat marks it seen.
"""

import logging
from typing import cast

from django.utils import timezone

from agents.contract.reports.events import (
    AgentEvent,
    RegistrationData,
    is_agent_event,
    validate_event,
)
from agents.contract.reports.events import RunEvent as RunEventDocument
from runs.models import Host, Run, StorageTarget
from runs.services.catalogues import catalogue_keep
from runs.services.hosts.instances import host_note_instance
from runs.services.hosts.reconcile import agent_report, reconcile_after_commit
from runs.services.hosts.space import host_record_space, registered_space
from runs.services.jobs.events import parse_event_time, run_record_event

logger = logging.getLogger(__name__)


def record_event(document: object) -> bool:
    """Validate an event from the stream (raises InvalidEvent) and hand it to its handler."""
    event = validate_event(document)
    if is_agent_event(event):
        return agent_record_event(cast(AgentEvent, event))
    return run_record_event(cast(RunEventDocument, event))


def agent_record_event(event: AgentEvent) -> bool:
    """Registration creates or refreshes the Host, its storage and catalogues; a
    heartbeat marks it seen (server time: agents' clocks may drift)."""
    host, _created = Host.objects.get_or_create(name=event["agent"])
    host_note_instance(host, event["data"].get("instance"))
    if event["type"] == "agent_register":
        _register(host, event["data"])
    else:
        host.current_run = _known_run(event["data"].get("running"))
    host.last_seen = timezone.now()
    host.save()
    if event["type"] == "heartbeat":
        host_record_space(host.pk, event["data"].get("space"))
        said_at = parse_event_time(event.get("ts"))
        reconcile_after_commit(agent_report(host.pk, event["data"], said_at))
    return True


def _known_run(run_id: str | None) -> Run | None:
    try:
        return Run.objects.filter(pk=int(run_id or "")).first()
    except ValueError:
        return None


def _register(host: Host, data: RegistrationData) -> None:
    host.facts = data.get("facts") or {}
    host.storage_space = registered_space(host.facts)
    host.installs = data.get("installs") or []
    host.capabilities = {}
    if "allows" in data:
        host.capabilities["allows"] = data["allows"]
    if "isolation" in data:
        host.capabilities["isolation"] = data["isolation"]
    host.registered_at = timezone.now()
    storage = data.get("storage") or {}
    host.storage_targets.exclude(name__in=list(storage)).delete()
    for name, info in storage.items():
        StorageTarget.objects.update_or_create(
            host=host,
            name=name,
            defaults={
                "path": info.get("path") or "",
                "device": info.get("device") or "",
                "filesystem": info.get("filesystem") or "",
                "facts": info,
            },
        )
    for version, catalogue in (data.get("catalogues") or {}).items():
        catalogue_keep(version, catalogue, host.name)
    logger.info("agent %s registered with storage %s", host.name, ", ".join(storage) or "none")
