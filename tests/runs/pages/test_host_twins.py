"""Two agent workers answering to one name, as the lab sees them: their heartbeats carry
two instance tokens, and the hosts page and API say so."""

import pytest
from django.urls import reverse

from runs.models import Host
from runs.services.hosts.events import record_event
from tests.runs.events import agent_event
from tests.runs.factories import HostFactory

pytestmark = pytest.mark.django_db


def beat(host: Host, seq: int, instance: str) -> None:
    data = {"running": None, "finished": [], "instance": instance}
    record_event(agent_event(host.name, seq, "heartbeat", data, host.secret))


def test_a_restart_with_a_new_instance_is_no_conflict() -> None:
    host = HostFactory()

    beat(host, 1, "first")
    beat(host, 2, "first")
    beat(host, 3, "restarted")
    beat(host, 4, "restarted")

    host.refresh_from_db()
    assert (host.instance, host.previous_instance) == ("restarted", "first")
    assert not host.has_twin


def test_two_instances_beating_in_turn_are_a_conflict_on_the_page_and_the_api(signed_in) -> None:
    host = HostFactory(name="twinned")

    for seq, instance in enumerate(["first", "second", "first", "second"], start=1):
        beat(host, seq, instance)

    host.refresh_from_db()
    assert host.has_twin
    page = signed_in.get(reverse("host-list")).content.decode()
    assert 'data-conflict="twin"' in page and "Two agent workers answer to the name" in page
    detail = signed_in.get(reverse("host-detail", args=[host.pk])).content.decode()
    assert "two workers" in detail
    api = signed_in.get(f"/api/hosts/{host.pk}/").json()
    assert api["has_twin"] is True


def test_the_conflict_clears_once_one_worker_is_silent_past_the_offline_window(settings) -> None:
    host = HostFactory()
    for seq, instance in enumerate(["first", "second", "first"], start=1):
        beat(host, seq, instance)

    settings.HEARTBEAT_OFFLINE_AFTER_S = 0

    host.refresh_from_db()
    assert not host.has_twin
