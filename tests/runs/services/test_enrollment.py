"""Which events the lab stores: only an approved host's, signed with its secret."""

import pytest
from rest_framework.test import APIClient

from agents.contract.signing import fingerprint, new_secret, sign
from runs import services
from runs.models import Host, Run
from runs.services.errors import Conflict
from tests.runs import events
from tests.runs.factories import HostFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

REPORTED = {"facts": {}, "installs": [], "storage": {"default": {"path": "/x"}}, "catalogues": {}}


def registration(name: str, secret: str, offered: str | None = None) -> dict:
    """An agent_register event carrying `offered` (default: the signing secret)."""
    data = {**REPORTED, "secret": offered or secret}
    return events.agent_event(name, 1, "agent_register", data, secret=secret)


def test_a_new_agent_becomes_a_pending_host_holding_its_secret_and_is_refused():
    secret = new_secret()

    refusal = services.event_refusal(registration("newcomer", secret))

    host = Host.objects.get(name="newcomer")
    assert refusal == (
        f"host 'newcomer' is pending approval (fingerprint {fingerprint(secret)}); "
        "an administrator approves it on the hosts page"
    )
    assert (host.enrollment, host.secret) == (Host.Enrollment.PENDING, secret)
    assert host.pending_registration == REPORTED
    assert not host.storage_targets.exists()


def test_an_unknown_agent_without_a_secret_creates_nothing():
    event = events.agent_event("stranger", 1, "agent_register", REPORTED)

    refusal = services.event_refusal(event)

    assert refusal.startswith("agent 'stranger' is not enrolled and sent no secret to enroll with")
    assert "delete identity/stranger.confirmed" in refusal
    assert not Host.objects.filter(name="stranger").exists()


def test_a_registration_not_signed_with_the_secret_it_carries_creates_nothing():
    event = registration("liar", new_secret(), offered=new_secret())

    assert "not signed with the secret it carries" in services.event_refusal(event)
    assert not Host.objects.filter(name="liar").exists()


def test_a_pending_host_heartbeat_is_refused_and_changes_nothing():
    secret = new_secret()
    host = HostFactory(enrollment=Host.Enrollment.PENDING, secret=secret, last_seen=None)
    beat = events.agent_event(host.name, 2, "heartbeat", {"running": None}, secret=secret)

    assert "pending approval" in services.event_refusal(beat)
    host.refresh_from_db()
    assert host.last_seen is None


def test_another_identity_cannot_register_under_an_enrolled_name():
    host = HostFactory()
    impostor = new_secret()

    refusal = services.event_refusal(registration(host.name, impostor))

    host.refresh_from_db()
    assert f"registration for host '{host.name}' with another identity" in refusal
    assert fingerprint(impostor) in refusal
    assert host.secret != impostor and host.enrollment == Host.Enrollment.APPROVED


def test_a_revoked_host_comes_back_pending_with_a_new_identity():
    host = HostFactory(enrollment=Host.Enrollment.REVOKED)
    new_identity = new_secret()

    refusal = services.event_refusal(registration(host.name, new_identity))

    host.refresh_from_db()
    assert "pending approval" in refusal
    assert (host.enrollment, host.secret) == (Host.Enrollment.PENDING, new_identity)


def test_a_run_event_is_stored_only_when_signed_by_the_run_host():
    run = RunFactory()
    genuine = events.run_event(run, 1, "log", {"level": "info", "message": "hi"})
    forged = sign("event", genuine, new_secret())
    other_host = {**genuine, "agent": "someone-else"}

    assert services.event_refusal(genuine) is None
    assert services.event_refusal(forged) == (
        f"bad signature: the event is not signed with the secret of host '{run.host.name}'"
    )
    assert "not on agent 'someone-else'" in services.event_refusal(other_host)


def test_events_of_a_revoked_host_are_refused():
    run = RunFactory(host=HostFactory(enrollment=Host.Enrollment.REVOKED))
    event = events.run_event(run, 1, "log", {"level": "info", "message": "hi"})

    assert services.event_refusal(event) == f"host '{run.host.name}' is revoked"


def test_a_run_of_a_revoked_host_is_not_run_again():
    run = RunFactory(host=HostFactory(enrollment=Host.Enrollment.REVOKED), status=Run.Status.FAILED)

    with pytest.raises(Conflict, match="is revoked; approve it to run again"):
        services.run_rerun(run, None)
    assert Run.objects.count() == 1


def test_staff_approve_and_revoke_through_the_api_and_nobody_else_may():
    host = HostFactory(enrollment=Host.Enrollment.PENDING, pending_registration=REPORTED)
    staff, member = APIClient(), APIClient()
    staff.force_authenticate(UserFactory(is_staff=True))
    member.force_authenticate(UserFactory(is_staff=False))

    refused = member.post(f"/api/hosts/{host.pk}/approve/")
    approved = staff.post(f"/api/hosts/{host.pk}/approve/")
    again = staff.post(f"/api/hosts/{host.pk}/approve/")
    revoked = staff.post(f"/api/hosts/{host.pk}/revoke/")

    assert refused.status_code == 403
    assert approved.status_code == 200, approved.content
    assert approved.json()["enrollment"] == "approved"
    assert approved.json()["fingerprint"] == fingerprint(host.secret)
    assert host.secret not in approved.content.decode()
    assert again.status_code == 409
    assert revoked.json()["enrollment"] == "revoked"
