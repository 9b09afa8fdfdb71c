"""The live run page of a run with a client host streams the client host's samples too."""

import pytest
from django.test import AsyncClient
from django.urls import reverse

from runs.models import HostSample
from runs.sse import format_cursor, parse_cursor
from tests.runs.factories import HostFactory, RunFactory
from tests.runs.pages.test_live_stream import read

pytestmark = pytest.mark.django_db(transaction=True)
CLIENT = HostSample.Role.CLIENT


@pytest.fixture
def client(user):
    client = AsyncClient()
    client.force_login(user)
    return client


def test_client_host_samples_stream_after_the_cursor_the_page_was_built_with(client, signed_in):
    run = RunFactory(client_host=HostFactory(), status="succeeded")
    HostSample.objects.create(run=run, point=0, t=1.0, data={"t": 1.0, "cpu_user": 10.0})
    first = HostSample.objects.create(run=run, role=CLIENT, point=0, t=1.0, data={"cpu_user": 90.0})
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "client host CPU user %" in page, "the chart has the traces the stream extends"
    cursor = parse_cursor(f"p0.h0.r0.c{first.pk}")
    HostSample.objects.create(run=run, role=CLIENT, point=0, t=2.0, data={"cpu_user": 95.0})

    url = f"{reverse('run-events', args=[run.pk])}?after={format_cursor(cursor)}"
    events = [e for e in read(client, url) if e["event"] == "client_host"]

    assert len(events) == 1 and '"cpu_user":95.0' in events[0]["data"]
    assert parse_cursor(events[0]["id"])["c"] > first.pk


def test_a_run_without_a_client_host_keeps_its_three_part_cursor(client):
    run = RunFactory(status="succeeded")
    assert format_cursor(parse_cursor("p1.h2.r3")) == "p1.h2.r3"
    events = read(client, reverse("run-events", args=[run.pk]))
    assert all(e["event"] != "client_host" for e in events)
