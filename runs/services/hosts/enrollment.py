"""Agent enrollment: which agents the lab trusts (docs/decisions.md).

`event_refusal` is the event consumer's first step: it says why an event from
the stream must not be stored (the consumer then keeps it in the dead-letter
stream with that reason) or returns None. An event is stored only when its
host is approved and the event is signed with that host's secret. The one
write an unapproved agent causes is its pending host: a new agent's first
registration creates it with the secret the registration carries, and later
registrations signed with that secret refresh what it reported. A
registration under an existing host's name with another identity changes
nothing, unless the host was revoked: then it becomes pending again with the
new identity (a new machine or a lost identity file), for an administrator to
approve after comparing the fingerprint.

`host_approve` and `host_revoke` are the administrator's side; `host_enroll`
approves an agent whose secret the lab's operator hands over directly (the
lab's own local agent).
"""

import logging
from typing import cast

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.contract.errors import CANCELLED
from agents.contract.reports.events import AgentEvent, Event, is_agent_event, validate_event
from agents.contract.signing import fingerprint, is_secret, verify
from runs.agentlink import transport
from runs.models import Host, Run
from runs.services.errors import Conflict
from runs.services.hosts.events import agent_record_event
from runs.services.runs import run_finish

logger = logging.getLogger(__name__)

Enrollment = Host.Enrollment


def event_refusal(document: object) -> str | None:
    """Why the event must not be stored, or None when it comes from an approved,
    authenticated agent. Raises InvalidEvent for a document that is no event."""
    event = validate_event(document)
    if is_agent_event(event):
        return _agent_event_refusal(cast(AgentEvent, event))
    return _run_event_refusal(event)


def _run_event_refusal(event: Event) -> str | None:
    run_id = event["run_id"]
    pk = _as_int(run_id)
    run = None if pk is None else Run.objects.filter(pk=pk).select_related("host").first()
    return run_event_refusal(event, run)


def run_event_refusal(event: Event, run: Run | None) -> str | None:
    """Why a validated run event must not be stored, given its run (with its host) as
    loaded, or None when its run's approved agent signed it."""
    if run is None:
        return f"no run {event['run_id']}: the event cannot be authenticated"
    host = run.host
    if event["agent"] != host.name:
        return f"run {run.pk} runs on host {host.name}, not on agent {event['agent']!r}"
    return _host_refusal(host) or _signature_refusal(event, host)


def _agent_event_refusal(event: AgentEvent) -> str | None:
    name = event["agent"] or ""
    host = Host.objects.select_for_update(no_key=True).filter(name=name).first()
    if event["type"] == "agent_register":
        return _registration_refusal(event, name, host)
    return heartbeat_refusal(event, host)


def heartbeat_refusal(event: AgentEvent, host: Host | None) -> str | None:
    """Why a validated heartbeat must not be stored, given its agent's host (None when
    none has its name), or None when that approved agent signed it."""
    if host is None:
        return f"agent {event['agent']!r} is not enrolled: it has not registered yet"
    return _signature_refusal(event, host) or _host_refusal(host)


def _registration_refusal(event: AgentEvent, name: str, host: Host | None) -> str | None:
    if host is not None and verify("event", event, host.secret):
        if host.enrollment == Enrollment.PENDING:
            host.pending_registration = _reported(event)
            host.save(update_fields=["pending_registration"])
        return _host_refusal(host)
    if host is not None and host.secret and host.enrollment != Enrollment.REVOKED:
        offered = event["data"].get("secret")
        return (
            f"registration for host {name!r} with another identity (fingerprint "
            f"{_fingerprint_of(offered)}); the host keeps its own ({host.fingerprint})"
        )
    # A new name, or a revoked host coming back with a new identity (a new
    # machine, a lost identity file): pending, for an administrator to approve.
    return _enrollment_refusal(event, name, host)


def _enrollment_refusal(event: AgentEvent, name: str, host: Host | None) -> str:
    offered = event["data"].get("secret")
    if not isinstance(offered, str) or not is_secret(offered):
        return (
            f"agent {name!r} is not enrolled and sent no secret to enroll with (enrolled "
            f"with another lab before? delete identity/{name}.confirmed in its state "
            "directory and restart it)"
        )
    if not verify("event", event, offered):
        return f"agent {name!r}: the registration is not signed with the secret it carries"
    host = host or Host(name=name)
    host.secret = offered
    host.enrollment = Enrollment.PENDING
    host.pending_registration = _reported(event)
    host.registered_at = timezone.now()
    host.save()
    logger.warning("agent %s asks to be enrolled, fingerprint %s", name, host.fingerprint)
    return _pending_reason(host)


def _reported(event: AgentEvent) -> dict[str, object]:
    """What a registration reported, without the secret."""
    return {key: value for key, value in event["data"].items() if key != "secret"}


def _host_refusal(host: Host) -> str | None:
    if host.enrollment == Enrollment.APPROVED:
        return None
    if host.enrollment == Enrollment.REVOKED:
        return f"host {host.name!r} is revoked"
    return _pending_reason(host)


def _pending_reason(host: Host) -> str:
    return (
        f"host {host.name!r} is pending approval (fingerprint {host.fingerprint}); "
        "an administrator approves it on the hosts page"
    )


def _signature_refusal(event: Event, host: Host) -> str | None:
    if verify("event", event, host.secret):
        return None
    return f"bad signature: the event is not signed with the secret of host {host.name!r}"


def _fingerprint_of(secret: object) -> str:
    return fingerprint(secret) if isinstance(secret, str) and is_secret(secret) else "none"


def _as_int(value: object) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def host_approve(host: Host, user: User) -> Host:
    """pending or revoked -> approved; the registration it sent while pending is applied.

    Raises Conflict when the host has no secret yet (its agent never registered) or an
    import made it.
    """
    with transaction.atomic():
        host = Host.objects.select_for_update().get(pk=host.pk)
        if host.is_imported:
            raise Conflict(
                f"{host.name} holds runs imported from pgbench outputs: no agent runs there "
                "to approve"
            )
        if not is_secret(host.secret):
            raise Conflict(f"host {host.name} has sent no identity yet: start its agent first")
        _set_enrollment(host, Enrollment.APPROVED, user)
        if host.pending_registration:
            agent_record_event(_registration_event(host))
            Host.objects.filter(pk=host.pk).update(pending_registration={})
    logger.warning("host %s approved by %s (fingerprint %s)", host.name, user, host.fingerprint)
    host.refresh_from_db()
    return host


def _registration_event(host: Host) -> AgentEvent:
    return {
        "version": 1,
        "run_id": None,
        "token": None,
        "agent": host.name,
        "seq": 1,
        "ts": timezone.now().isoformat(),
        "type": "agent_register",
        "data": host.pending_registration,
    }


def host_revoke(host: Host, user: User) -> Host:
    """approved or pending -> revoked: its events are refused from now on and its
    queued runs are cancelled (a running one fails as agent_lost once the grace
    period passes without an accepted event)."""
    with transaction.atomic():
        host = Host.objects.select_for_update().get(pk=host.pk)
        _set_enrollment(host, Enrollment.REVOKED, user)
        for run in Run.objects.filter(host=host, status=Run.Status.QUEUED):
            _cancel_queued(run, f"host {host.name} was revoked by {user}")
    logger.warning("host %s revoked by %s", host.name, user)
    host.refresh_from_db()
    return host


def _cancel_queued(run: Run, message: str) -> None:
    error = {"code": "cancelled", "category": CANCELLED, "field": None, "message": message}
    if run_finish(run, Run.Status.CANCELLED, error, from_states=(Run.Status.QUEUED,)):
        run_id, token = run.run_id, run.token
        transport.send_after_commit(
            run.pk, "cancel flag", lambda: transport.request_cancel(run_id, token)
        )


def _set_enrollment(host: Host, enrollment: str, user: User | None) -> None:
    if host.enrollment == enrollment:
        raise Conflict(f"host {host.name} is already {enrollment}")
    host.enrollment = enrollment
    host.enrollment_changed_at = timezone.now()
    host.enrollment_changed_by = user
    host.save(update_fields=["enrollment", "enrollment_changed_at", "enrollment_changed_by"])


def host_enroll(name: str, secret: str) -> Host:
    """Approve the agent `name` with `secret`, handed over by the lab's operator.

    For an agent on the lab's own machine (scripts/lab), whose identity file
    the operator can read: no registration has to travel first. Replaces the
    secret of an existing host of that name.
    """
    if not is_secret(secret):
        raise ValueError("secret: expected the 64 hex digits of the agent's identity file")
    with transaction.atomic():
        host, _created = Host.objects.select_for_update().get_or_create(name=name)
        host.secret = secret
        host.enrollment = Enrollment.APPROVED
        host.enrollment_changed_at = timezone.now()
        host.enrollment_changed_by = None
        host.save()
    logger.warning("host %s enrolled by its operator (fingerprint %s)", name, host.fingerprint)
    return host
