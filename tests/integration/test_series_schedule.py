"""Regression mode for real: the beat scheduler fires a series' schedule, the control
worker starts a linked occurrence, the agent measures it, and detection runs after it;
an alert's confirming A/B measured by the real control worker and agent."""

import pytest
from django_celery_beat.models import PeriodicTask

from benchlab.celery import app
from runs.agentlink.transport import CONTROL_QUEUE
from runs.models import Alert, ChangePoint, HostCanary, Occurrence, Run, Series
from runs.services.history.alerts import CONFIRM_TASK
from runs.services.history.series import series_fire, series_save
from tests.integration.beat import tick_when_due
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    PgBuildFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration


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


def test_an_alert_is_measured_again_before_it_is_delivered(lab):
    """Two real occurrences, a change point planted between them: the control worker
    measures the two again in rounds on their host (a confirming A/B) and concludes the
    alert; only a confirmed one reaches the webhook (an A/A here: slower only by chance)."""
    host = lab.wait_registered()
    owner = UserFactory()
    template = ExperimentFactory(
        name="nightly ab", hosts=[host], builds=[PgBuildFactory()],
        config_profiles=[ConfigProfileFactory(settings={})],
        workloads=[WorkloadFactory(scale=1)], clients=[1], duration_s=1, repeats=1,
        max_rounds=3, created_by=owner,
    )  # fmt: skip
    series = series_save(
        Series(name="nightly ab", template=template, schedule="0 3 * * *", created_by=owner)
    )
    before, after = series_fire(series), series_fire(series)
    for occurrence in (before, after):
        run = wait_for(
            lambda o=occurrence: o.experiment.runs.filter(status__in=Run.FINAL_STATES).first(),
            120, f"the run of {occurrence}", lab.logs,
        )  # fmt: skip
        assert run.status == Run.Status.SUCCEEDED, run.error_message
        assert HostCanary.objects.filter(run=run).exists()
    change = ChangePoint.objects.create(
        series=series, metric="tps", key="cell 0, 1 clients", before_occurrence=before,
        after_occurrence=after, before=1000.0, after=900.0, change_percent=-10.0,
        low_percent=-12.0, high_percent=-8.0, p_value=1e-6,
    )  # fmt: skip
    alert = Alert.objects.create(
        series=series, occurrence=after, change_point=change, metric="tps",
        key=change.key, before=1000.0, after=900.0, change_percent=-10.0,
    )  # fmt: skip

    app.send_task(CONFIRM_TASK, args=[alert.pk], queue=CONTROL_QUEUE)
    concluded = wait_for(
        lambda: Alert.objects.exclude(state=Alert.State.NEW).filter(pk=alert.pk).first(),
        300, "the confirming A/B's conclusion", lab.logs,
    )  # fmt: skip

    ab = concluded.confirmation_experiment
    assert ab.adaptive and ab.execution == "rounds"
    runs = list(ab.runs.order_by("round", "cell"))
    assert {run.host_id for run in runs} == {host.pk}
    assert {run.cell for run in runs} == {0, 1}
    assert len({run.round for run in runs}) >= 3
    assert concluded.state in (Alert.State.CONFIRMED, Alert.State.NOT_CONFIRMED)
    assert concluded.confirmation.startswith(
        "confirmed: slower by " if concluded.state == Alert.State.CONFIRMED else "not confirmed: "
    ), concluded.confirmation
    assert concluded.delivery == ""  # no webhook nor mail set: nothing delivered either way
