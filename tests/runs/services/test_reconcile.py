"""What an agent's heartbeat says it runs against what the lab holds as running."""

from datetime import timedelta

import pytest
from django.utils import timezone

from agents.contract.wire import settled_key
from runs import services
from runs.models import Run
from runs.services.hosts.reconcile import run_job_id
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def running_run_with_a_point() -> Run:
    run = RunFactory(status=Run.Status.RUNNING)
    run.spec = {**run.spec, "job_id": f"{run.pk}:abc"}
    run.save(update_fields=["spec"])
    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))
    return run


def heartbeat(run: Run, data: dict, seconds_after_last_event: float) -> dict:
    beat = events.agent_event(run.host.name, 10, "heartbeat", data)
    last = run.events.order_by("-ts").first().ts
    beat["ts"] = (last + timedelta(seconds=seconds_after_last_event)).isoformat()
    return beat


def record(beat: dict, capture) -> None:
    with capture(execute=True):
        services.agent_record_event(beat)


def test_a_heartbeat_running_nothing_settles_the_running_run_with_its_points(
    django_capture_on_commit_callbacks,
):
    run = running_run_with_a_point()

    record(
        heartbeat(run, {"running": None, "job": None, "finished": []}, 1),
        django_capture_on_commit_callbacks,
    )

    run.refresh_from_db()
    assert (run.status, run.error_code) == (Run.Status.FAILED, "agent_restarted")
    assert run.results.count() == 1


def test_a_heartbeat_sent_before_the_runs_last_event_speaks_not_for_it(
    django_capture_on_commit_callbacks,
):
    run = running_run_with_a_point()

    record(
        heartbeat(run, {"running": None, "job": None, "finished": []}, -1),
        django_capture_on_commit_callbacks,
    )

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_a_run_the_agent_runs_or_finished_unconfirmed_stays_running(
    django_capture_on_commit_callbacks,
):
    run = running_run_with_a_point()
    job = run_job_id(run)

    for data in (
        {"running": run.run_id, "job": job, "finished": []},
        # The second side of a duet: the agent runs another job and this one at once.
        {"running": "other", "job": "other-job", "duet_job": job, "finished": []},
        {"running": None, "job": None, "finished": [job]},
        {"running": None},  # an agent without a ledger: nothing is compared
    ):
        record(heartbeat(run, data, 1), django_capture_on_commit_callbacks)

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING


def test_a_late_result_keeps_its_points_and_the_final_status(
    lab_redis, django_capture_on_commit_callbacks
):
    run = running_run_with_a_point()
    with django_capture_on_commit_callbacks(execute=True):
        services.run_cancel(run, "alice")
    result = {
        "status": "cancelled",
        "error": {"code": "cancelled", "category": "cancelled", "field": None, "message": "x"},
        "points": [events.point(0), events.point(1, clients=2)],
        "finished_at": timezone.now().isoformat(),
        "server_log_tail": "LOG: shutting down",
    }

    with django_capture_on_commit_callbacks(execute=True):
        services.run_record_event(events.run_event(run, 2, "result", result))

    run.refresh_from_db()
    assert (run.status, run.error_message) == (Run.Status.CANCELLED, "cancelled by alice")
    assert run.results.count() == 2
    assert run.server_log_tail == "LOG: shutting down"
    assert lab_redis.delete(settled_key(run_job_id(run))) == 1, "the agent's ledger is told"
