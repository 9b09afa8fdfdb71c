"""Regression mode for real: the beat scheduler fires a series' schedule, the control
worker starts a linked occurrence, the agent measures it, and detection runs after it."""

from datetime import timedelta

import pytest
from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from benchlab.celery import app
from runs.models import Occurrence, Run, Series
from runs.services.history.series import series_save
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    PgBuildFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


def tick_when_due(series: Series) -> None:
    """Make the schedule due (its last run two minutes back) and let beat's scheduler tick."""
    PeriodicTask.objects.filter(pk=series.periodic_task_id).update(
        last_run_at=timezone.now() - timedelta(minutes=2)
    )
    scheduler = DatabaseScheduler(app=app, lazy=False)
    try:
        scheduler.tick()
    finally:
        scheduler.close()


def test_a_series_schedule_fires_and_creates_linked_occurrences(lab):
    host = lab.wait_registered()
    template = ExperimentFactory(
        name="nightly",
        hosts=[host],
        builds=[PgBuildFactory()],
        config_profiles=[ConfigProfileFactory(settings={})],
        workloads=[WorkloadFactory(scale=1)],
        clients=[1],
        duration_s=1,
        repeats=1,
    )
    series = series_save(Series(name="nightly", template=template, schedule="* * * * *"))
    task = PeriodicTask.objects.get(pk=series.periodic_task_id)
    assert (task.task, task.queue, task.crontab.minute) == (
        "runs.tasks.series_fire",
        "control",
        "*",
    )

    for count in (1, 2):
        tick_when_due(series)
        wait_for(
            lambda c=count: series.occurrences.count() == c, 60, f"occurrence {count}", lab.logs
        )

    occurrences = list(series.occurrences.select_related("experiment"))
    assert [o.experiment.name for o in occurrences] == ["nightly #1", "nightly #2"]
    for occurrence in occurrences:
        run = wait_for(
            lambda o=occurrence: o.experiment.runs.filter(status__in=Run.FINAL_STATES).first(),
            120,
            f"the run of {occurrence}",
            lab.logs,
        )
        assert run.status == Run.Status.SUCCEEDED, run.error_message
        assert run.results.get().tps > 0
    assert Occurrence.objects.filter(series=series).count() == 2
    detected = f"series {series.pk}: 0 new alerts"
    wait_for(lambda: detected in lab.logs(), 30, "change detection after the occurrence", lab.logs)
