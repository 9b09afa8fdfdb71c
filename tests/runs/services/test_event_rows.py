"""Event rows keep only what no typed row holds, and those that only guard against a
second delivery go once their retention has passed."""

from datetime import timedelta

import pytest
from django.utils import timezone

from runs import services
from runs.models import Run, RunEvent
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def test_event_rows_do_not_copy_samples_points_or_the_results_snapshot():
    run = RunFactory()
    sample = {"point": 0, "host": {"t": 1.0, "cpu_user": 10.0}}
    result = {
        "status": "succeeded",
        "points": [events.point(0)],
        "facts": {"cpu": {"model": "x"}},
        "steps": [{"name": "initdb"}],
        "finished_at": timezone.now().isoformat(),
    }
    sent = [
        events.run_event(run, 1, "status", {"state": "initdb", "message": "creating"}),
        events.run_event(run, 2, "progress", {"point": 0, "t": 1.0, "tps": 10.0}),
        events.run_event(run, 3, "sample", sample),
        events.run_event(run, 4, "point", events.point(0)),
        events.run_event(run, 5, "log", {"level": "info", "message": "done"}),
        events.run_event(run, 6, "result", result),
    ]
    for event in sent:
        assert services.run_record_event(event)

    stored = dict(RunEvent.objects.filter(run=run).values_list("type", "payload"))
    assert stored["status"] == {"state": "initdb", "message": "creating"}
    assert stored["log"] == {"level": "info", "message": "done"}
    assert stored["progress"] == stored["sample"] == {}
    assert stored["point"]["tps"] == 500.0
    assert not {"progress", "host_samples", "server_samples", "stdout"} & set(stored["point"])
    assert set(stored["result"]) == {"status", "finished_at"}
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED and run.facts == {"cpu": {"model": "x"}}
    assert run.progress.count() == 2 and run.results.get().stdout == "tps = 500"


def test_key_only_event_rows_go_after_the_retention_and_the_runs_log_stays(settings):
    settings.BENCHLAB_EVENT_RETENTION_DAYS = 30
    old = RunFactory(status=Run.Status.SUCCEEDED, finished_at=timezone.now() - timedelta(days=31))
    recent = RunFactory(
        status=Run.Status.SUCCEEDED, finished_at=timezone.now() - timedelta(days=29)
    )
    for run in (old, recent):
        RunEvent.objects.bulk_create(
            RunEvent(run=run, seq=seq, type=kind)
            for seq, kind in enumerate(("status", "progress", "sample", "log", "point"), start=1)
        )

    assert services.events_purge() == 3

    assert set(old.events.values_list("type", flat=True)) == {"status", "log"}
    assert recent.events.count() == 5
    settings.BENCHLAB_EVENT_RETENTION_DAYS = 0
    RunEvent.objects.create(run=old, seq=9, type="progress")
    assert services.events_purge() == 0
