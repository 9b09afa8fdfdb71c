"""Regression mode: series on a schedule, their history, change points and alerts.

A series' schedule is a django-celery-beat `PeriodicTask` (cron fields) that
calls `runs.tasks.series_fire` on the control queue; each firing copies the
series' template experiment into a new one, an `Occurrence`, and starts it.
When an occurrence's last run ends, `series_detect` (runs/services/history/alerts.py)
looks for change points in every metric at every client count and raises alerts.
"""

import json
import logging
import re
from dataclasses import dataclass
from datetime import datetime

from celery.schedules import crontab
from django.contrib.auth.models import User
from django.db import IntegrityError, transaction
from django.db.models import Q
from django_celery_beat.models import CrontabSchedule, PeriodicTask

from benchlab.celery import app
from runs.agentlink.transport import CONTROL_QUEUE
from runs.analysis.compare import metric_value
from runs.inference.stats import summarize
from runs.models import Alert, Experiment, Note, Occurrence, Result, Run, Series
from runs.services.experiments import M2M_FIELDS, experiment_start

logger = logging.getLogger(__name__)

FIRE_TASK = "runs.tasks.series_fire"
# The fire task's keyword argument naming the slot a scheduled fire is for (ISO time),
# set by the beat (runs.control.beat).
SLOT_ARGUMENT = "slot"
DETECT_TASK = "runs.tasks.series_detect"
SERIES_METRICS = ("tps", "latency_avg_ms", "p95")
CRON_NAMES = ("minute", "hour", "day_of_month", "month_of_year", "day_of_week")
# An occurrence copies every column of its series' template (the spec's sweep fields,
# runs/agentlink/row_fields.py, among them) but these: it is a new experiment with its own seed
# (and, adaptive, its own looks).
NOT_COPIED = ("id", "name", "created_by", "created_at", "seed", "adaptive_state")


def copied_fields() -> list[str]:
    """The Experiment columns an occurrence copies from the series' template."""
    return [f.name for f in Experiment._meta.concrete_fields if f.name not in NOT_COPIED]


def cron_fields(schedule: str) -> dict[str, str]:
    """The five cron fields of `schedule`; ValueError says what is wrong."""
    fields = schedule.split()
    if len(fields) != len(CRON_NAMES):
        raise ValueError(
            f"give 5 cron fields (minute hour day-of-month month day-of-week), "
            f"e.g. '0 3 * * *'; got {len(fields)}"
        )
    named = dict(zip(CRON_NAMES, fields, strict=True))
    crontab(**named)
    return named


def series_save(series: Series) -> Series:
    """Save the series and (re)write its beat schedule to match it."""
    with transaction.atomic():
        series.save()
        schedule, _ = CrontabSchedule.objects.get_or_create(
            **cron_fields(series.schedule), timezone="UTC"
        )
        task = series.periodic_task or PeriodicTask(name=f"benchlab series {series.pk}")
        task.crontab = schedule
        task.task = FIRE_TASK
        task.args = json.dumps([series.pk])
        task.queue = CONTROL_QUEUE
        task.enabled = series.enabled
        task.save()
        if series.periodic_task_id != task.pk:
            Series.objects.filter(pk=series.pk).update(periodic_task=task)
            series.periodic_task = task
    return series


def series_fire(series: Series) -> Occurrence:
    """Copy the template experiment into a new occurrence of the series and start it (by
    hand: no slot, so never refused as a second fire)."""
    return _occurrence_start(_occurrence_create(series, None))


class SlotFired(Exception):
    """An occurrence of the series holds the slot already."""


def series_fire_slot(series: Series, slot: datetime) -> Occurrence | None:
    """The scheduled fire of `slot`: a new occurrence, started; None when the slot has fired
    before (a second beat, or a beat started again after a crash): logged, nothing done.

    The slot is recorded with the occurrence, under the unique constraint, in the
    transaction that creates it and before anything starts.
    """
    try:
        occurrence = _occurrence_create(series, slot)
    except SlotFired:
        logger.warning("series %s: slot %s fired already; this fire is ignored", series.pk, slot)
        return None
    return _occurrence_start(occurrence)


def _occurrence_create(series: Series, slot: datetime | None) -> Occurrence:
    """The series' next occurrence, a copy of its template not started yet. Raises
    SlotFired when an occurrence holds `slot`. Fires of one series are serialised on its
    row; the unique constraint decides between fires that raced past it."""
    template = series.template
    try:
        with transaction.atomic():
            Series.objects.select_for_update().filter(pk=series.pk).first()
            if slot is not None and series.occurrences.filter(slot=slot).exists():
                raise SlotFired()
            number = series.occurrences.count() + 1
            values = {name: getattr(template, name) for name in copied_fields()}
            experiment = Experiment.objects.create(
                name=f"{series.name} #{number}", created_by=series.created_by, **values
            )
            for name in M2M_FIELDS:
                getattr(experiment, name).set(getattr(template, name).all())
            return Occurrence.objects.create(series=series, experiment=experiment, slot=slot)
    except IntegrityError as error:
        if slot is not None and series.occurrences.filter(slot=slot).exists():
            raise SlotFired() from error
        raise


def _occurrence_start(occurrence: Occurrence) -> Occurrence:
    series, experiment = occurrence.series, occurrence.experiment
    experiment_start(experiment, series.created_by)
    logger.info(
        "series %s fired%s: %s, experiment %s",
        series.pk,
        f" slot {occurrence.slot.isoformat()}" if occurrence.slot else " by hand",
        experiment.name,
        experiment.pk,
    )
    return occurrence


LINE_KEY = re.compile(r"cell (\d+), (\d+) clients")


def line_key(cell: int, clients: int) -> str:
    """The name of a line of the series' charts."""
    return f"cell {cell}, {clients} clients"


def line_cell(key: str) -> tuple[int, int]:
    """(cell, clients) of a line's name."""
    found = LINE_KEY.fullmatch(key)
    if found is None:
        raise ValueError(f"{key!r} does not name a line (cell N, C clients)")
    return int(found[1]), int(found[2])


@dataclass(frozen=True)
class HistoryPoint:
    """One occurrence's value of a metric on one line of the chart, with its 95 % CI."""

    occurrence: Occurrence
    mean: float
    low: float | None
    high: float | None


def series_history(series: Series, metric: str) -> dict[str, list[HistoryPoint]]:
    """Line key (`cell N, C clients`) -> the finished occurrences' points, oldest first."""
    lines: dict[str, list[HistoryPoint]] = {}
    for occurrence in series.occurrences.select_related("experiment").order_by("fired_at"):
        values: dict[str, list[float]] = {}
        for result in _succeeded_results(occurrence.experiment):
            value = metric_value(result, metric)
            if value is not None:
                key = line_key(result.run.cell, result.clients)
                values.setdefault(key, []).append(value)
        for key, measured in sorted(values.items()):
            summary = summarize(measured)
            if summary is not None:
                point = HistoryPoint(occurrence, summary.mean, summary.ci_low, summary.ci_high)
                lines.setdefault(key, []).append(point)
    return lines


def _succeeded_results(experiment: Experiment) -> list[Result]:
    return list(
        Result.objects.filter(run__experiment=experiment, run__status=Run.Status.SUCCEEDED)
        .select_related("run")
        .order_by("run__cell", "clients", "repeat")
    )


def note_add(
    user: User,
    text: str,
    run: Run | None = None,
    host_id: int | None = None,
    alert: Alert | None = None,
) -> Note:
    """A dated note on a run, a host or an alert."""
    return Note.objects.create(run=run, host_id=host_id, alert=alert, text=text, created_by=user)


def notes_for_runs(runs: list[Run]) -> list[Note]:
    """The notes on these runs and on their hosts, oldest first."""
    host_ids = {run.host_id for run in runs}
    return list(
        Note.objects.filter(Q(run__in=runs) | Q(host_id__in=host_ids))
        .select_related("run", "host")
        .order_by("created_at")
    )


def occurrence_run_finished(run: Run) -> None:
    """After an occurrence's last run ends, send change detection for its series (on commit)."""
    occurrence = Occurrence.objects.filter(experiment_id=run.experiment_id).first()
    if occurrence is None:
        return
    if run.experiment.runs.exclude(status__in=Run.FINAL_STATES).exists():
        return
    series_id = occurrence.series_id
    transaction.on_commit(lambda: app.send_task(DETECT_TASK, args=[series_id], queue=CONTROL_QUEUE))
