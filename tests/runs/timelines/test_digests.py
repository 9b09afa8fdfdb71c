"""Timeline digests are the control worker's: built when a run ends and again after a late
event (runs.tasks.digest_build), read by the pages (tests/runs/pages/test_timelines.py)."""

from datetime import timedelta
from functools import partial

import pytest
from django.utils import timezone

from runs import services, tasks
from runs.agentlink.transport import send_or_log
from runs.models import ProgressSample, Run, RunTimeline
from runs.services.history.import_reading import UploadedOutput
from runs.services.history.imports import ImportDetails, pgbench_import
from runs.services.runs import digest_build_send
from runs.timelines import store
from tests.runs import events
from tests.runs.factories import RunFactory
from tests.runs.history.test_import import captured
from tests.runs.pages.test_timelines import long_run

pytestmark = pytest.mark.django_db


def digest_builds_sent(callbacks: list) -> list[tuple]:
    """The runs the committed transaction has the control worker build digests for."""
    sends = [c.args[2] for c in callbacks if isinstance(c, partial) and c.func is send_or_log]
    return [s.args for s in sends if isinstance(s, partial) and s.func is digest_build_send]


def test_a_run_that_ends_has_its_digest_built_once_its_result_commits(
    django_capture_on_commit_callbacks,
):
    run = RunFactory(status=Run.Status.RUNNING)
    with django_capture_on_commit_callbacks() as callbacks:
        services.run_record_event(events.run_event(run, 1, "point", events.point(0)))
    assert digest_builds_sent(callbacks) == []
    with django_capture_on_commit_callbacks() as callbacks:
        services.run_record_event(events.run_event(run, 2, "result", events.result(run)))
    assert digest_builds_sent(callbacks) == [(run.pk,)]


def test_a_cancelled_run_has_its_digest_built_too(django_capture_on_commit_callbacks, user):
    run = RunFactory(status=Run.Status.RUNNING)
    with django_capture_on_commit_callbacks() as callbacks:
        services.run_cancel(run, user)
    assert digest_builds_sent(callbacks) == [(run.pk,)]


def test_a_late_event_for_a_final_run_has_its_digest_built_again(
    django_capture_on_commit_callbacks,
):
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(events.run_event(run, 1, "result", events.result(run)))
    with django_capture_on_commit_callbacks() as callbacks:
        late = {"point": 1, "t": 1.0, "tps": 7777.0, "latency_ms": 1.0}
        services.run_record_event(events.run_event(run, 2, "progress", late))
    assert digest_builds_sent(callbacks) == [(run.pk,)]


def test_the_task_builds_a_final_runs_digest_once_and_again_after_a_late_event():
    run = long_run((600,))
    tasks.digest_build(run.pk)
    built = RunTimeline.objects.get(run=run)
    assert built.key == store.digest_key(run)
    assert store.digest_refresh(run.pk) is False, "current: not built again"

    late = {"point": 1, "t": 1.0, "tps": 7777.0, "latency_ms": 1.0}
    services.run_record_event(events.run_event(run, 1, "progress", late))
    tasks.digest_build(run.pk)

    rebuilt = RunTimeline.objects.get(run=run)
    run.refresh_from_db()
    assert rebuilt.key == store.digest_key(run) != built.key
    assert store.digests([run], names=["tps"])[run.pk].traces["tps"].y[-1] == 7777.0


def test_the_task_builds_nothing_for_a_queued_run_or_one_gone():
    run = RunFactory(status=Run.Status.QUEUED)
    assert store.digest_refresh(run.pk) is False
    assert store.digest_refresh(run.pk + 1000) is False
    assert not RunTimeline.objects.exists()


def running(durations: tuple[int, ...]) -> Run:
    run = long_run(durations)
    Run.objects.filter(pk=run.pk).update(
        status=Run.Status.RUNNING, finished_at=None, last_event_at=timezone.now()
    )
    run.refresh_from_db()
    return run


def test_the_reaper_pass_rebuilds_a_running_runs_digest_at_most_once_a_minute_while_events_arrive():
    run, quiet = running((120,)), running((60,))
    assert store.digests_refresh_running() == 2
    first = RunTimeline.objects.get(run=run)
    assert first.facts["cursor"]["p"] == ProgressSample.objects.filter(run=run).latest("pk").pk

    newer = {"point": 0, "t": 121.0, "tps": 5.0, "latency_ms": 1.0}
    services.run_record_event(events.run_event(run, 1, "progress", newer))
    assert store.digests_refresh_running() == 0, "stored less than a minute ago"

    a_minute_ago = timezone.now() - store.RUNNING_REBUILD - timedelta(seconds=1)
    RunTimeline.objects.update(built_at=a_minute_ago)
    Run.objects.filter(pk=quiet.pk).update(last_event_at=a_minute_ago - timedelta(seconds=1))
    assert store.digests_refresh_running() == 1, "only the run with a newer event"
    rebuilt = RunTimeline.objects.get(run=run)
    assert rebuilt.facts["cursor"]["p"] > first.facts["cursor"]["p"]
    assert RunTimeline.objects.get(run=quiet).built_at == a_minute_ago


def test_an_imported_run_has_its_digest_built_once_imported(
    django_capture_on_commit_callbacks, user
):
    upload = UploadedOutput("pg16.txt", captured("pg16"))
    with django_capture_on_commit_callbacks() as callbacks:
        (run,) = pgbench_import(user, [upload], ImportDetails()).runs
    assert digest_builds_sent(callbacks) == [(run.pk,)]
