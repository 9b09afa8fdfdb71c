"""The web tier while Redis does not answer: a start and a cancel are committed and
answered; a job not sent is left to the reaper (runs_recover_lost_jobs)."""

import logging
from collections.abc import Iterator

import pytest

from benchlab.celery import app
from runs.models import Run
from tests.agents.worker.conftest import free_port
from tests.integration.test_redis_loss import use_broker


@pytest.fixture
def redis_down(settings) -> Iterator[None]:
    """The lab's Redis and broker on a port nothing listens on."""
    broker = app.conf.broker_url
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/0"
    use_broker(settings.REDIS_URL)
    yield
    use_broker(broker)


def test_start_and_cancel_while_redis_is_down_answer_and_leave_the_job_to_the_reaper(
    api_client, experiment_payload, redis_down, django_capture_on_commit_callbacks, caplog
):
    payload = {**experiment_payload(), "start": True}
    with caplog.at_level(logging.WARNING), django_capture_on_commit_callbacks(execute=True):
        created = api_client.post("/api/experiments/", payload, format="json")

    assert created.status_code == 201, created.content
    run = Run.objects.get(experiment_id=created.json()["id"])
    assert (run.status, run.dispatches) == (Run.Status.QUEUED, 1)
    assert f"run {run.pk}: job not sent, Redis did not answer" in caplog.text

    with django_capture_on_commit_callbacks(execute=True):
        cancelled = api_client.post(f"/api/runs/{run.pk}/cancel/")

    assert cancelled.status_code == 200, cancelled.content
    assert Run.objects.get(pk=run.pk).status == Run.Status.CANCELLED
    assert f"run {run.pk}: cancel flag not sent" in caplog.text
