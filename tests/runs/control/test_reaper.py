"""The control worker's reaper and the threads the control worker starts."""

import threading
from datetime import timedelta
from typing import cast

import pytest
import redis
from django.conf import settings
from django.utils import timezone
from pytest_django.fixtures import Settings

from runs.control import worker
from runs.control.reaper import Reaper
from runs.models import Run
from tests.runs.factories import RunFactory
from tests.waiting import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def silent_run() -> Run:
    """A running run whose agent sent nothing for longer than the grace period."""
    long_ago = timezone.now() - timedelta(seconds=settings.AGENT_LOST_GRACE_S + 60)
    return cast(Run, RunFactory(status=Run.Status.RUNNING, host__last_seen=long_ago))


def status_of(run: Run) -> str:
    return Run.objects.values_list("status", flat=True).get(pk=run.pk)


def test_the_reaper_fails_the_run_of_a_silent_agent_and_stops_when_told(
    lab_redis: redis.Redis, events_stream: str
) -> None:
    # A stream of its own: the reaper judges nothing while events wait in its stream, and
    # the default one is shared with whatever else uses this Redis database.
    silent = silent_run()
    stop = threading.Event()
    loop = threading.Thread(target=Reaper(interval_s=0.1).run_forever, args=(stop,))
    loop.start()
    try:
        wait_for(lambda: status_of(silent) == Run.Status.FAILED, what="the silent run to fail")
    finally:
        stop.set()
        loop.join(timeout=10)

    assert not loop.is_alive()
    silent.refresh_from_db()
    assert silent.error_code == "agent_lost"


def test_the_control_worker_runs_the_consumer_and_the_reaper_until_it_stops(
    lab_redis: redis.Redis, events_stream: str, settings: Settings
) -> None:
    settings.BENCHLAB_INGEST_IN_WORKER = True
    settings.REAPER_INTERVAL_S = 0.1
    silent = silent_run()

    worker.start()
    threads = [t for t in threading.enumerate() if t.name.startswith("benchlab-")]
    try:
        wait_for(lambda: status_of(silent) == Run.Status.FAILED, what="the reaper's first pass")
    finally:
        worker.stop()

    assert sorted(t.name for t in threads) == ["benchlab-consumer", "benchlab-reaper"]
    assert not any(t.is_alive() for t in threads)
