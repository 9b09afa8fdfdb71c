"""One beat scheduler, for real: the control worker with `--beat` (as scripts/lab starts
it) killed with SIGKILL and started again fires a series' schedule once per interval,
and a second beat refuses to start. A real agent measures the occurrences meanwhile:
each ends once, and the host's queue moves after (tests/integration/faults.py)."""

import contextlib
import itertools
import signal
import sys
import time
from datetime import timedelta

import psutil
import pytest
from django.utils import timezone
from django_celery_beat.models import IntervalSchedule, PeriodicTask

from runs import services
from runs.models import Host, Occurrence, Run, Series
from runs.services.errors import Conflict
from runs.services.history.series import series_save
from tests.integration.conftest import Lab
from tests.integration.faults import (
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    next_run_succeeds,
    recovered,
)
from tests.integration.test_redis_loss import web_tier_on  # noqa: F401 - a fixture
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    PgBuildFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

INTERVAL_S = 3
LOCK_TTL_S = 6
WINDOW_S = 15


def series_every_few_seconds(host: Host) -> Series:
    """A series on `host` whose schedule fires every INTERVAL_S (cron's minute is too slow
    to count)."""
    template = ExperimentFactory(
        name="often",
        hosts=[host],
        builds=[PgBuildFactory()],
        config_profiles=[ConfigProfileFactory(settings={})],
        workloads=[WorkloadFactory(scale=1)],
        clients=[1],
        duration_s=1,
    )
    series = series_save(Series(name="often", template=template, schedule="* * * * *"))
    every = IntervalSchedule.objects.create(every=INTERVAL_S, period=IntervalSchedule.SECONDS)
    PeriodicTask.objects.filter(pk=series.periodic_task_id).update(crontab=None, interval=every)
    return series


def start_control_with_beat(lab: Lab) -> None:
    lab.control = lab._spawn(
        "control",
        [sys.executable, "-m", "celery", "-A", "benchlab", "worker", "-Q", "control",
         "--concurrency", "1", "--pool", "solo", "-n", f"control-{lab.name}@%h",
         "--without-gossip", "--without-mingle", "--loglevel", "info", "--beat"],
    )  # fmt: skip


def beats_started(lab: Lab) -> int:
    return (lab.log_dir / "control.log").read_text(errors="replace").count("beat: holding")


def series_runs(series: Series) -> list[Run]:
    made = Occurrence.objects.filter(series=series).values("experiment")
    return list(Run.objects.filter(experiment__in=made).order_by("pk"))


def stop_and_drain(lab: Lab, series: Series, within_s: float) -> list[Run]:
    """Stop the schedule, cancel what it queued, and wait for the run in flight to end."""
    task = PeriodicTask.objects.get(pk=series.periodic_task_id)
    task.enabled = False
    task.save()  # a save, not an update: beat notices the change

    operator = UserFactory(is_staff=True)

    def drained() -> list[Run] | None:
        runs = series_runs(series)
        for run in runs:
            if run.status == Run.Status.QUEUED:
                with contextlib.suppress(Conflict):  # it ended meanwhile
                    services.run_cancel(run, operator)
        return runs if all(run.status in Run.FINAL_STATES for run in runs) else None

    return wait_for(drained, within_s, "the series' runs to end", lab.logs, interval=1)


def test_after_kill_9_of_the_control_worker_its_schedule_fires_once_per_interval(
    transactional_db,
    tmp_path,
    own_redis,
    web_tier_on,  # noqa: F811 - a fixture: the test's cancels and jobs go to own_redis
    api,
):
    lab = Lab(tmp_path, own_redis.url)
    lab.env["BENCHLAB_BEAT_LOCK_TTL_S"] = str(LOCK_TTL_S)
    try:
        series = series_every_few_seconds(lab.approve())
        start_control_with_beat(lab)
        lab.start_agent()
        wait_for(lambda: series.occurrences.count() >= 2, 60, "the schedule to fire", lab.logs)

        second = lab._spawn(
            "second-beat", [sys.executable, "-m", "celery", "-A", "benchlab", "beat", "-l", "info"]
        )
        assert second.wait(timeout=LOCK_TTL_S + 60) != 0
        assert "beat: refusing to start" in (tmp_path / "second-beat.log").read_text()

        worker = psutil.Process(lab.control.pid)
        beat_child = worker.children()
        assert len(beat_child) == 1, beat_child
        lab.wait_run(series_runs(series)[0].pk, lambda r: r.progress.exists(), "to measure")
        lab.control.send_signal(signal.SIGKILL)  # as the operator did: the worker only
        lab.control.wait(timeout=10)
        killed = time.monotonic()
        _gone, alive = psutil.wait_procs(beat_child, timeout=15)
        assert not alive, "the beat child outlived its worker"

        start_control_with_beat(lab)
        wait_for(lambda: beats_started(lab) == 2, LOCK_TTL_S + 60, "the new beat", lab.logs)
        recovered("control worker kill -9: the new beat holds the lock", killed)
        start = timezone.now()
        time.sleep(WINDOW_S)
        fired = list(
            Occurrence.objects.filter(
                series=series, fired_at__gte=start, fired_at__lt=start + timedelta(seconds=WINDOW_S)
            )
            .order_by("fired_at")
            .values_list("fired_at", flat=True)
        )
        stopped = time.monotonic()
        runs = stop_and_drain(lab, series, within_s=90)
        recovered("control worker kill -9: the schedule's runs final", stopped)
        for run in runs:
            assert run.status in (Run.Status.SUCCEEDED, Run.Status.CANCELLED), run.error_message
            assert_stored_once(run)
        assert any(run.status == Run.Status.SUCCEEDED for run in runs)
        assert_measured_once(lab, runs)
        assert_no_orphans(lab)
        next_run_succeeds(api, lab)
    finally:
        lab.close()
    expected = WINDOW_S // INTERVAL_S
    assert expected - 2 <= len(fired) <= expected + 1, fired
    gaps = [(later - earlier).total_seconds() for earlier, later in itertools.pairwise(fired)]
    assert min(gaps) >= INTERVAL_S / 2, gaps
