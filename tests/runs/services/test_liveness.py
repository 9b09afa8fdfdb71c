"""Silent agents: their running runs fail as agent_lost and keep their points.
Lost jobs: a queued run whose job Redis no longer holds is sent again, then failed."""

import base64
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from agents.contract.signing import verify
from agents.contract.wire import agent_queue, cancel_key, claim_key, dispatch_key
from runs import services
from runs.agentlink import transport
from runs.models import Host, Run
from runs.services.jobs.dispatch import run_dispatch
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_runs_of_a_silent_host_fail_as_agent_lost_keep_their_points_and_are_flagged_cancelled(
    settings, lab_redis, events_stream, django_capture_on_commit_callbacks
):
    # A stream of its own (events_stream): nothing is judged while events wait in it.
    settings.AGENT_LOST_GRACE_S = 90
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))
    long_ago = timezone.now() - timedelta(seconds=120)
    Host.objects.filter(pk=run.host.pk).update(last_seen=long_ago)
    Run.objects.filter(pk=run.pk).update(last_event_at=long_ago)

    with django_capture_on_commit_callbacks(execute=True):
        failed = services.runs_fail_agent_lost()

    run.refresh_from_db()
    # A client host's half of the run stops on the flag; the silent agent drops the job.
    flag = cancel_key(dispatch_key(run.run_id, run.token))
    assert lab_redis.get(flag) == "1"
    lab_redis.delete(flag)
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

    assert services.runs_fail_agent_lost() == []
    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_queued_runs_of_a_silent_host_stay_queued(settings):
    run = RunFactory()
    Host.objects.filter(pk=run.host.pk).update(last_seen=None)

    assert services.runs_fail_agent_lost() == []
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_a_host_is_offline_after_thirty_silent_seconds():
    host = RunFactory().host
    host.last_seen = timezone.now() - timedelta(seconds=31)

    assert not host.is_online


def queued_long_ago(
    django_capture_on_commit_callbacks, seconds: int = 600, host: Host | None = None
) -> Run:
    """A run (on `host`, or a new one) whose job was sent to its agent's queue `seconds` ago."""
    run = RunFactory(host=host) if host else RunFactory()
    with django_capture_on_commit_callbacks(execute=True):
        run_dispatch(run, {"version": 1, "storage": {"data": "default", "wal": None}})
    sent = timezone.now() - timedelta(seconds=seconds)
    Run.objects.filter(pk=run.pk).update(queued_at=sent, dispatched_at=sent)
    run.refresh_from_db()
    return run


def queued_messages(lab_redis, run: Run) -> list[dict]:
    return [json.loads(message) for message in lab_redis.lrange(agent_queue(run.host.name), 0, -1)]


def test_a_queued_run_whose_job_waits_in_its_queue_stays_queued(
    lab_redis, django_capture_on_commit_callbacks
):
    run = queued_long_ago(django_capture_on_commit_callbacks)

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    assert (recovery.redispatched, recovery.failed) == ([], [])
    assert Run.objects.get(pk=run.pk).token == run.token


def test_a_pass_reads_a_host_queue_once_however_many_of_its_runs_wait(
    lab_redis, django_capture_on_commit_callbacks, monkeypatch
):
    first = queued_long_ago(django_capture_on_commit_callbacks)
    for _ in range(2):
        queued_long_ago(django_capture_on_commit_callbacks, host=first.host)
    reads: list[str] = []
    read = transport.waiting_task_ids
    monkeypatch.setattr(
        transport, "waiting_task_ids", lambda name: reads.append(name) or read(name)
    )

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    assert (recovery.redispatched, recovery.failed) == ([], [])
    assert reads == [first.host.name]


def test_a_job_redis_lost_is_sent_again_with_a_new_token_and_the_old_one_cancelled(
    lab_redis, django_capture_on_commit_callbacks
):
    run = queued_long_ago(django_capture_on_commit_callbacks)
    lab_redis.delete(agent_queue(run.host.name))

    with django_capture_on_commit_callbacks(execute=True):
        recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    again = Run.objects.get(pk=run.pk)
    (message,) = queued_messages(lab_redis, run)
    (spec,) = json.loads(base64.b64decode(message["body"]))[0]
    assert recovery.redispatched == [run.pk]
    assert (again.status, again.dispatches) == (Run.Status.QUEUED, 2)
    assert again.queued_at == run.queued_at, "queued when it was first queued"
    assert again.dispatched_at > run.dispatched_at, "the reaper's clock starts again"
    assert again.token != run.token and spec["token"] == again.token
    assert message["headers"]["id"] == again.celery_task_id
    assert verify("job", spec, run.host.secret)
    old_dispatch = cancel_key(dispatch_key(run.run_id, run.token))
    assert lab_redis.exists(old_dispatch), "a copy of the old job turning up later is dropped"
    lab_redis.delete(old_dispatch)


def test_a_job_lost_again_fails_the_run_naming_the_cause(
    lab_redis, django_capture_on_commit_callbacks
):
    run = queued_long_ago(django_capture_on_commit_callbacks)
    Run.objects.filter(pk=run.pk).update(dispatches=2)
    lab_redis.delete(agent_queue(run.host.name))

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    run.refresh_from_db()
    assert recovery.failed == [run.pk]
    assert (run.status, run.error_code, run.error_category) == ("failed", "job_lost", "application")
    assert f"queue agent.{run.host.name}" in run.error_message
    assert "Redis lost its data" in run.error_message


def test_a_claimed_job_of_a_silent_agent_fails_as_agent_lost(
    lab_redis, django_capture_on_commit_callbacks, settings
):
    settings.AGENT_LOST_GRACE_S = 90
    run = queued_long_ago(django_capture_on_commit_callbacks)
    lab_redis.delete(agent_queue(run.host.name))
    claim = claim_key(dispatch_key(run.run_id, run.token))
    lab_redis.set(claim, run.host.name)
    Host.objects.filter(pk=run.host.pk).update(last_seen=timezone.now() - timedelta(seconds=120))

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    run.refresh_from_db()
    lab_redis.delete(claim)
    assert recovery.failed == [run.pk]
    assert (run.status, run.error_code) == ("failed", "agent_lost")
    assert "claimed the job" in run.error_message


def test_a_claimed_job_of_a_live_agent_stays_queued(lab_redis, django_capture_on_commit_callbacks):
    run = queued_long_ago(django_capture_on_commit_callbacks)
    lab_redis.delete(agent_queue(run.host.name))
    claim = claim_key(dispatch_key(run.run_id, run.token))
    lab_redis.set(claim, run.host.name)

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    lab_redis.delete(claim)
    assert (recovery.redispatched, recovery.failed) == ([], [])
    assert Run.objects.get(pk=run.pk).status == Run.Status.QUEUED


def test_a_run_queued_moments_ago_is_not_checked_yet(
    lab_redis, django_capture_on_commit_callbacks, settings
):
    settings.JOB_LOST_AFTER_S = 60
    run = queued_long_ago(django_capture_on_commit_callbacks, seconds=5)
    lab_redis.delete(agent_queue(run.host.name))

    recovery = services.runs_recover_lost_jobs(recheck_after_s=0)

    assert (recovery.redispatched, recovery.failed) == ([], [])
    assert Run.objects.get(pk=run.pk).token == run.token


def test_silence_is_not_judged_while_events_wait_for_the_consumer(
    events_stream, lab_redis, settings
):
    settings.AGENT_LOST_GRACE_S = 90
    run = RunFactory(status=Run.Status.RUNNING)
    long_ago = timezone.now() - timedelta(seconds=120)
    Host.objects.filter(pk=run.host.pk).update(last_seen=long_ago)
    seconds, _micro = lab_redis.time()
    waiting = lab_redis.xadd(events_stream, {"event": "{}"}, id=f"{(seconds - 60) * 1000}-0")

    assert services.runs_fail_agent_lost() == [], "its heartbeats may be among the waiting events"
    lab_redis.xdel(events_stream, waiting)
    assert services.runs_fail_agent_lost() == [run.pk]
