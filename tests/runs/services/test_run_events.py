"""Recording agent events: idempotency, tokens, state changes, registration."""

import pytest
from django.db import transaction

from runs import services
from runs.models import Host, PgCatalogue, Result, Run, RunEvent
from tests.runs import events
from tests.runs.factories import ExperimentFactory, RunFactory

pytestmark = pytest.mark.django_db


def test_the_same_event_twice_is_stored_once():
    run = RunFactory()
    progress = events.run_event(run, 3, "progress", {"point": 0, "t": 1.0, "tps": 10.0})

    assert services.run_record_event(progress) is True
    assert services.run_record_event(progress) is False

    assert RunEvent.objects.filter(run=run).count() == 1
    assert run.progress.count() == 1


def test_an_event_with_the_wrong_token_is_dropped():
    run = RunFactory()

    stored = services.run_record_event(
        events.run_event(run, 1, "status", {"state": "initdb"}, token="forged")
    )

    assert stored is False
    assert not RunEvent.objects.exists()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_an_event_of_an_unknown_run_is_dropped():
    run = RunFactory()
    event = events.run_event(run, 1, "status", {"state": "initdb"})
    event["run_id"] = "999999"

    assert services.run_record_event(event) is False


def test_first_status_event_starts_the_run_and_shows_the_step():
    run = RunFactory()

    services.run_record_event(
        events.run_event(run, 1, "status", {"state": "initdb", "message": "creating cluster"})
    )

    run.refresh_from_db()
    assert run.status == Run.Status.RUNNING
    assert run.started_at is not None
    assert run.step == "initdb: creating cluster"


def test_result_finishes_the_run_with_every_point_and_its_snapshots():
    run = RunFactory(status=Run.Status.RUNNING)
    document = events.result(run, points=[events.point(0, 1), events.point(1, 2, tps=900.0)])

    services.run_record_event(events.run_event(run, 9, "result", document))

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert run.finished_at is not None
    assert run.install["version"] == "16.15"
    assert run.effective_settings == [{"name": "shared_buffers", "setting": "16384"}]
    assert run.steps[0]["argv"] == ["initdb"]
    assert run.storage_facts["data"]["device"] == "sda"
    assert [(r.index, r.clients, r.tps) for r in run.results.all()] == [
        (0, 1, 500.0),
        (1, 2, 900.0),
    ]
    assert run.progress.count() == 4
    assert run.host_samples.count() == 2
    assert run.server_samples.count() == 2


def test_failed_result_keeps_its_error_and_finished_points():
    run = RunFactory(status=Run.Status.RUNNING)
    error = {
        "code": "server_died",
        "category": "application",
        "field": None,
        "message": "postgres exited during point 1",
    }

    services.run_record_event(
        events.run_event(run, 5, "result", events.result(run, "failed", [events.point(0)], error))
    )

    run.refresh_from_db()
    assert (run.status, run.error_code, run.error_category) == (
        "failed",
        "server_died",
        "application",
    )
    assert run.error_message == "postgres exited during point 1"
    assert run.results.count() == 1


def test_a_point_event_adds_only_the_samples_its_live_events_did_not_bring():
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(
        events.run_event(run, 1, "sample", {"point": 0, "host": {"t": 1.0, "cpu_user": 40.1}})
    )
    first_row = run.host_samples.get()

    services.run_record_event(events.run_event(run, 2, "point", events.point(0)))

    assert run.host_samples.get().pk == first_row.pk
    assert Result.objects.get(run=run, index=0).tps == 500.0


def test_a_points_timeline_replaces_the_seconds_sent_live():
    """A second read live from a sampled log may lack lines a thread had not written yet
    (agents/pgbench/log_tail.py): the point's own timeline is the one kept."""
    run = RunFactory(status=Run.Status.RUNNING)
    live = {"point": 0, "t": 1.0, "tps": 400.0, "sampled": 2, "sampling_rate": 0.005}
    services.run_record_event(events.run_event(run, 1, "progress", live))
    live_row = run.progress.get()
    point = events.point(0)
    point["progress"][0] |= {"sampled": 3, "sampling_rate": 0.005, "tps": 600.0}

    services.run_record_event(events.run_event(run, 2, "point", point))

    assert list(run.progress.values_list("t", "tps", "sampled", "sampling_rate")) == [
        (1.0, 600.0, 3, 0.005),
        (2.0, 500.0, None, None),
    ]
    assert run.progress.get(t=1.0).pk == live_row.pk, "updated in place: the stream sends it once"
    services.run_record_event(events.run_event(run, 3, "progress", live))
    assert run.progress.get(t=1.0).tps == 600.0, "a replayed live second changes nothing"


def test_the_result_event_rewrites_no_stored_point_or_sample():
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))
    before = {
        "results": list(run.results.values_list("pk", "tps")),
        "progress": list(run.progress.values_list("pk", "t")),
        "host": list(run.host_samples.values_list("pk", "t")),
        "server": list(run.server_samples.values_list("pk", "t")),
    }
    changed = events.point(0, tps=123.0)

    services.run_record_event(
        events.run_event(run, 2, "result", events.result(run, points=[changed, events.point(1)]))
    )

    assert list(run.results.values_list("pk", "tps"))[:1] == before["results"]
    assert list(run.progress.filter(point=0).values_list("pk", "t")) == before["progress"]
    assert list(run.host_samples.filter(point=0).values_list("pk", "t")) == before["host"]
    assert list(run.server_samples.filter(point=0).values_list("pk", "t")) == before["server"]
    assert run.results.get(index=1).tps == 500.0
    assert run.progress.filter(point=1).count() == 2


def test_final_states_never_change():
    run = RunFactory(status=Run.Status.CANCELLED)

    services.run_record_event(events.run_event(run, 1, "status", {"state": "running"}))
    services.run_record_event(events.run_event(run, 2, "result", events.result(run)))

    run.refresh_from_db()
    assert run.status == Run.Status.CANCELLED
    assert run.results.count() == 1


def test_compare_and_set_refuses_a_transition_from_the_wrong_state():
    run = RunFactory(status=Run.Status.SUCCEEDED)

    assert services.run_mark_running(run) is False
    assert services.run_finish(run, Run.Status.FAILED) is False
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED


def test_registration_records_the_host_its_storage_and_catalogues():
    register = events.agent_event(
        "bench1",
        1,
        "agent_register",
        {
            "facts": {"cpu": {"model": "Xeon", "count": 8}},
            "installs": [{"version": "16.15", "source": "prebuilt"}],
            "storage": {"nvme": {"path": "/mnt/nvme", "device": "nvme0n1", "filesystem": "xfs"}},
            "catalogues": {"16.15": {"format": 1, "version": "16.15", "settings": []}},
        },
    )

    services.agent_record_event(register)

    host = Host.objects.get(name="bench1")
    assert host.facts["cpu"]["count"] == 8
    assert host.is_online
    target = host.storage_targets.get()
    assert (target.name, target.device, target.filesystem) == ("nvme", "nvme0n1", "xfs")
    assert PgCatalogue.objects.get(version="16.15").reported_by == "bench1"


def test_heartbeat_marks_the_host_seen_with_its_current_run():
    run = RunFactory(status=Run.Status.RUNNING)
    Host.objects.filter(pk=run.host.pk).update(last_seen=None)

    services.agent_record_event(
        events.agent_event(run.host.name, 7, "heartbeat", {"running": str(run.pk)})
    )

    run.host.refresh_from_db()
    assert run.host.is_online
    assert run.host.current_run == run


def test_cancel_of_a_queued_run_is_immediate_and_flags_the_agent(
    lab_redis, django_capture_on_commit_callbacks
):
    run = RunFactory()

    with django_capture_on_commit_callbacks(execute=True):
        services.run_cancel(run, "alice")

    assert run.status == Run.Status.CANCELLED
    assert run.error_code == "cancelled"
    assert lab_redis.exists(f"benchlab:cancel:{run.pk}:{run.token}")


def test_cancel_of_a_running_run_ends_it_at_once_and_flags_the_agent(
    lab_redis, django_capture_on_commit_callbacks
):
    run = RunFactory(status=Run.Status.RUNNING)

    with django_capture_on_commit_callbacks(execute=True):
        services.run_cancel(run, "alice")

    assert (run.status, run.error_message) == (Run.Status.CANCELLED, "cancelled by alice")
    assert lab_redis.ttl(f"benchlab:cancel:{run.pk}:{run.token}") > 0


def test_cancel_of_a_finished_run_is_a_conflict(lab_redis):
    run = RunFactory(status=Run.Status.SUCCEEDED)

    with pytest.raises(services.errors.Conflict):
        services.run_cancel(run, "alice")


def test_rerun_queues_the_same_definition_with_a_new_token(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment_run = services.experiment_start(ExperimentFactory())[0]

    with django_capture_on_commit_callbacks(execute=True):
        rerun = services.run_rerun(experiment_run, None)

    assert rerun.rerun_of == experiment_run
    assert rerun.token != experiment_run.token
    strip = ("run_id", "token", "job_id")
    assert {k: v for k, v in rerun.spec.items() if k not in strip} == {
        k: v for k, v in experiment_run.spec.items() if k not in strip
    }
    assert rerun.spec["run_id"] == str(rerun.pk)


def test_events_of_one_run_apply_inside_the_callers_transaction():
    run = RunFactory()

    with pytest.raises(RuntimeError), transaction.atomic():
        services.run_record_event(events.run_event(run, 1, "status", {"state": "initdb"}))
        raise RuntimeError("the commit did not happen")

    assert not RunEvent.objects.exists()
