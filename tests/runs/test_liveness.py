"""Silent agents: their running runs fail as agent_lost and keep their points."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.models import Host, Run
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_runs_of_a_silent_host_fail_as_agent_lost_and_keep_their_points(settings):
    settings.AGENT_LOST_GRACE_S = 90
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))
    long_ago = timezone.now() - timedelta(seconds=120)
    Host.objects.filter(pk=run.host.pk).update(last_seen=long_ago)
    Run.objects.filter(pk=run.pk).update(last_event_at=long_ago)

    failed = services.hosts_mark_offline_and_fail_runs()

    run.refresh_from_db()
    assert failed == [run.pk]
    assert (run.status, run.error_code, run.error_category) == (
        "failed",
        "agent_lost",
        "application",
    )
    assert run.results.count() == 1
    assert run.progress.count() == 2


def test_a_host_within_the_grace_period_keeps_its_runs(settings):
    settings.AGENT_LOST_GRACE_S = 90
    run = RunFactory(status=Run.Status.RUNNING)
    Host.objects.filter(pk=run.host.pk).update(last_seen=timezone.now() - timedelta(seconds=60))

    assert services.hosts_mark_offline_and_fail_runs() == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_queued_runs_of_a_silent_host_stay_queued(settings):
    run = RunFactory()
    Host.objects.filter(pk=run.host.pk).update(last_seen=None)

    assert services.hosts_mark_offline_and_fail_runs() == []
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_host_is_offline_after_thirty_silent_seconds():
    host = RunFactory().host
    host.last_seen = timezone.now() - timedelta(seconds=31)

    assert not host.is_online
