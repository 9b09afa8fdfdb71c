"""Enrollment end to end: real control worker and agent processes over real Redis.

An agent nobody approved changes nothing: its registration and heartbeats are
kept only in the dead-letter stream, with the reason, until an administrator
approves it. Events not signed with the secret of the run's host are refused.
"""

import json
from collections.abc import Iterator

import pytest

from agents.contract.signing import fingerprint, new_secret, sign
from agents.contract.wire import dead_letter_stream
from runs import services
from runs.models import Host, PgCatalogue, Run, RunEvent
from tests.integration.conftest import Lab
from tests.runs import events
from tests.runs.factories import HostFactory, RunFactory, UserFactory
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def unapproved_lab(transactional_db, tmp_path) -> Iterator[Lab]:
    """A control worker and an agent nobody has approved yet."""
    lab = Lab(tmp_path)
    lab.start_control()
    lab.start_agent()
    try:
        yield lab
    finally:
        lab.close()


def dead_letters(lab: Lab) -> list[tuple[dict, str]]:
    """The dead-letter stream's events with their reasons."""
    entries = lab.redis.xrange(dead_letter_stream(lab.stream))
    return [(json.loads(fields[b"event"]), fields[b"error"].decode()) for _, fields in entries]


def refused(lab: Lab, event_type: str, reason: str) -> list[dict]:
    return [
        event
        for event, why in dead_letters(lab)
        if event["type"] == event_type and reason in why and event["agent"] == lab.name
    ]


def pending_host(lab: Lab) -> Host:
    return wait_for(
        Host.objects.filter(name=lab.name, enrollment=Host.Enrollment.PENDING).first,
        60,
        f"agent {lab.name} to ask for enrollment",
        lab.logs,
    )


def test_an_unapproved_agent_changes_nothing_and_its_events_are_dead_lettered_with_the_reason(
    unapproved_lab,
):
    lab = unapproved_lab
    host = pending_host(lab)
    wait_for(
        lambda: refused(lab, "heartbeat", "pending approval"), 30, "a refused heartbeat", lab.logs
    )

    host.refresh_from_db()
    (registration,) = refused(lab, "agent_register", "pending approval")
    assert host.fingerprint == lab.identity.fingerprint
    assert lab.identity.fingerprint in (lab.log_dir / "agent.log").read_text()
    assert host.secret == lab.identity.secret
    assert (host.facts, host.installs, host.last_seen) == ({}, [], None)
    assert not host.storage_targets.exists()
    assert not PgCatalogue.objects.exists()
    assert "default" in host.pending_registration["storage"]
    assert "secret" not in host.pending_registration
    assert "secret" not in registration["data"] and "sig" not in registration


def test_once_approved_the_agent_registration_is_applied_and_its_heartbeats_count(
    unapproved_lab,
):
    lab = unapproved_lab
    host = pending_host(lab)

    services.host_approve(host, UserFactory(is_staff=True))
    wait_for(lambda: Host.objects.get(pk=host.pk).is_online, 30, "an accepted heartbeat", lab.logs)

    host.refresh_from_db()
    assert host.enrollment == Host.Enrollment.APPROVED
    assert list(host.storage_targets.values_list("name", "path")) == [("default", str(lab.storage))]


def every_stream(lab: Lab) -> str:
    """What anyone who can read Redis reads in its streams (every key of type stream)."""
    texts = []
    for key in lab.redis.scan_iter(_type="stream", count=1000):
        texts += [repr(fields) for _id, fields in lab.redis.xrange(key)]
    return "\n".join(texts)


def test_no_stream_or_log_holds_the_secret_of_an_agent_approved_after_waiting(unapproved_lab):
    lab = unapproved_lab
    host = pending_host(lab)
    wait_for(
        lambda: refused(lab, "heartbeat", "pending approval"), 30, "a refused heartbeat", lab.logs
    )

    services.host_approve(host, UserFactory(is_staff=True))
    wait_for(lambda: Host.objects.get(pk=host.pk).is_online, 30, "an accepted heartbeat", lab.logs)

    assert dead_letters(lab), "the registration and heartbeats were dead-lettered"
    assert lab.identity.secret not in every_stream(lab)
    for log in lab.log_dir.glob("*.log"):
        assert lab.identity.secret not in log.read_text(errors="replace"), log.name


def test_a_registration_under_an_enrolled_name_with_another_identity_changes_nothing(lab):
    victim = HostFactory(name=f"victim-{lab.name}")
    victim.storage_targets.create(name="nvme", path="/mnt/nvme")
    impostor_secret = new_secret()
    registration = events.agent_event(
        victim.name,
        10**13,
        "agent_register",
        {
            "facts": {"cpu": {"model": "impostor"}},
            "installs": [],
            "storage": {"evil": {"path": "/tmp/evil", "device": "", "filesystem": ""}},
            "catalogues": {},
            "secret": impostor_secret,
        },
        secret=impostor_secret,
    )

    lab.redis.xadd(lab.stream, {"event": json.dumps(registration)})
    wait_for(lambda: lab.stream_backlog() == 0, 30, "the registration to be consumed", lab.logs)

    victim.refresh_from_db()
    ((_event, reason),) = [item for item in dead_letters(lab) if item[0]["agent"] == victim.name]
    assert f"registration for host '{victim.name}' with another identity" in reason
    assert fingerprint(impostor_secret) in reason
    assert list(victim.storage_targets.values_list("name", flat=True)) == ["nvme"]
    assert victim.facts == {"cpu": {"count": 2}}
    assert victim.enrollment == Host.Enrollment.APPROVED


def test_a_forged_event_for_a_real_run_is_refused_and_a_signed_one_stored(lab):
    run = RunFactory(host=lab.wait_registered())
    forged = events.run_event(run, 1, "log", {"level": "info", "message": "forged"})
    forged = sign("event", forged, new_secret())
    genuine = events.run_event(run, 2, "log", {"level": "info", "message": "genuine"})

    for event in (forged, genuine):
        lab.redis.xadd(lab.stream, {"event": json.dumps(event)})
    wait_for(lambda: lab.stream_backlog() == 0, 30, "both events to be consumed", lab.logs)

    assert list(RunEvent.objects.filter(run=run).values_list("seq", flat=True)) == [2]
    ((_event, reason),) = [item for item in dead_letters(lab) if item[0]["run_id"] == run.run_id]
    assert reason == (
        f"refused: bad signature: the event is not signed with the secret of host '{lab.name}'"
    )
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED
