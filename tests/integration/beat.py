"""Firing a series as beat would, from a test: its schedule made due, then one tick."""

from datetime import timedelta

from django.utils import timezone
from django_celery_beat.models import PeriodicTask
from django_celery_beat.schedulers import DatabaseScheduler

from benchlab.celery import app
from runs.models import Series


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
