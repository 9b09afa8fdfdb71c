"""The queue of a host: its run in progress and its waiting runs in order, with estimated starts."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs.estimates import RUN_OVERHEAD_S
from runs.models import Run
from runs.queues import estimated_seconds, host_queues
from tests.runs.factories import HostFactory, RunFactory

pytestmark = pytest.mark.django_db

HOUR_SPEC = {
    "sweep": {"clients": [1, 4], "repeats": 1, "duration_s": 1800},
    "dataset": {"scale": 2},
}


def test_waiting_runs_start_one_after_another_after_the_running_one(signed_in):
    host, other = HostFactory(), HostFactory()
    started = timezone.now() - timedelta(minutes=10)
    running = RunFactory(host=host, status=Run.Status.RUNNING, spec=HOUR_SPEC, started_at=started)
    first, second = (RunFactory(host=host, spec=HOUR_SPEC, position=n) for n in (1, 2))
    by_transactions = RunFactory(host=host, position=3, spec={"sweep": {"transactions": 10}})
    last = RunFactory(host=host, spec=HOUR_SPEC, position=4)
    RunFactory(host=other, spec=HOUR_SPEC)
    RunFactory(host=host, status=Run.Status.SUCCEEDED, spec=HOUR_SPEC)

    queue = host_queues([host])[host.pk]

    hour = estimated_seconds(running)
    assert hour == RUN_OVERHEAD_S + 2 * 0.5 + 2 * 1800
    assert queue.current == running
    assert [w.run for w in queue.waiting] == [first, second, by_transactions, last]
    assert queue.waiting[0].starts_at == started + timedelta(seconds=hour)
    assert queue.waiting[1].starts_at == started + timedelta(seconds=2 * hour)
    assert queue.waiting[2].starts_at == started + timedelta(seconds=3 * hour)
    assert queue.waiting[3].starts_at is None  # after a run of unknown length

    page = signed_in.get(f"/hosts/{host.pk}/queue/").content.decode()
    rows = [f'data-run="{w.run.pk}"' for w in queue.waiting]
    assert all(row in page for row in rows)
    assert [page.index(row) for row in rows] == sorted(page.index(row) for row in rows)
    hosts = signed_in.get("/hosts/").content.decode()
    assert f"run #{running.pk}" in hosts and 'data-queue="4"' in hosts and 'data-queue="1"' in hosts


def test_a_run_with_a_client_host_occupies_both_hosts_and_waits_for_both(signed_in):
    server, client = HostFactory(), HostFactory()
    started = timezone.now() - timedelta(minutes=10)
    on_client = RunFactory(
        host=client, status=Run.Status.RUNNING, spec=HOUR_SPEC, started_at=started
    )
    paired = RunFactory(host=server, client_host=client, spec=HOUR_SPEC, position=1)
    after = RunFactory(host=server, spec=HOUR_SPEC, position=2)

    queues = host_queues([server, client])

    hour = estimated_seconds(on_client)
    assert queues[server.pk].current is None
    assert [w.run for w in queues[server.pk].waiting] == [paired, after]
    assert [w.run for w in queues[client.pk].waiting] == [paired]
    assert queues[server.pk].waiting[0].starts_at == started + timedelta(seconds=hour)
    assert queues[server.pk].waiting[1].starts_at == started + timedelta(seconds=2 * hour)
    hosts = signed_in.get("/hosts/").content.decode()
    assert f"run #{on_client.pk}" in hosts
