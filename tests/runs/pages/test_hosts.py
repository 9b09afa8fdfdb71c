"""The hosts page: an administrator approves a pending agent, and revokes it later."""

import pytest
from django.test import Client

from agents.contract.signing import fingerprint, new_secret
from runs.models import Host, Run
from tests.runs.factories import HostFactory, RunFactory, UserFactory

pytestmark = pytest.mark.django_db

REPORTED = {
    "facts": {"cpu": {"model": "Test CPU 9000", "count": 8}},
    "installs": [{"version": "16.15", "bindir": "/usr/lib/postgresql/16/bin"}],
    "storage": {"nvme": {"path": "/mnt/nvme", "device": "nvme0n1", "filesystem": "ext4"}},
    "catalogues": {},
}


@pytest.fixture
def admin_client() -> Client:
    client = Client()
    client.force_login(UserFactory(username="admin", is_staff=True))
    return client


@pytest.fixture
def pending_host() -> Host:
    return HostFactory(
        enrollment=Host.Enrollment.PENDING,
        secret=new_secret(),
        last_seen=None,
        facts={},
        pending_registration=REPORTED,
    )


def test_a_pending_agent_shows_its_fingerprint_and_what_it_reported(admin_client, pending_host):
    page = admin_client.get("/hosts/").content.decode()

    assert "pending approval" in page
    assert fingerprint(pending_host.secret) in page
    assert "Test CPU 9000" in page and "nvme" in page
    assert pending_host.secret not in page
    assert f"/hosts/{pending_host.pk}/approve" in page


def test_an_administrator_approves_a_pending_agent_then_revokes_it(admin_client, pending_host):
    approved = admin_client.post(f"/hosts/{pending_host.pk}/approve", follow=True)

    host = Host.objects.get(pk=pending_host.pk)
    assert approved.status_code == 200
    assert f"Host {host.name} approved." in approved.content.decode()
    assert host.enrollment == Host.Enrollment.APPROVED
    assert host.enrollment_changed_by.username == "admin"
    assert list(host.storage_targets.values_list("name", "path")) == [("nvme", "/mnt/nvme")]
    assert host.facts["cpu"]["model"] == "Test CPU 9000"
    assert host.pending_registration == {}
    assert f"/hosts/{host.pk}/revoke" in approved.content.decode()

    queued = RunFactory(host=host)
    revoked = admin_client.post(f"/hosts/{host.pk}/revoke", follow=True)

    host.refresh_from_db()
    queued.refresh_from_db()
    assert f"Host {host.name} revoked." in revoked.content.decode()
    assert host.enrollment == Host.Enrollment.REVOKED
    assert (queued.status, queued.error_code) == (Run.Status.CANCELLED, "cancelled")
    assert f"host {host.name} was revoked" in queued.error_message


def test_a_signed_in_user_who_is_not_an_administrator_cannot_approve(pending_host):
    client = Client()
    client.force_login(UserFactory(is_staff=False))

    page = client.get("/hosts/").content.decode()
    response = client.post(f"/hosts/{pending_host.pk}/approve")

    assert f"/hosts/{pending_host.pk}/approve" not in page
    assert response.status_code == 403
    assert Host.objects.get(pk=pending_host.pk).enrollment == Host.Enrollment.PENDING


def test_a_host_whose_agent_never_sent_an_identity_cannot_be_approved(admin_client):
    host = HostFactory(enrollment=Host.Enrollment.PENDING, secret="")

    response = admin_client.post(f"/hosts/{host.pk}/approve", follow=True)

    assert "has sent no identity yet: start its agent first" in response.content.decode()
    assert Host.objects.get(pk=host.pk).enrollment == Host.Enrollment.PENDING


def test_the_schedule_form_offers_approved_hosts_only(admin_client, pending_host):
    approved = HostFactory()

    page = admin_client.get("/experiments/new").content.decode()

    assert f'data-host="{approved.name}"' in page
    assert f'data-host="{pending_host.name}"' not in page
