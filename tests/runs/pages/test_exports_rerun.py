"""Every export and page of a run answers while a re-run of its round is queued, running,
cancelled or failed, whether read signed in or through a share link."""

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import Run
from tests.runs.factories import ExperimentFactory, RunFactory
from tests.runs.pages.conftest import add_point, finished_run

pytestmark = pytest.mark.django_db

EXPORTS = [("json", ""), ("csv", ""), ("csv", "?rows=stats"), ("csv", "?rows=seconds")]


@pytest.fixture
def round_with_rerun(lab_redis, user):
    """A one-round run in rounds, measured, and a re-run of it (queued, no points yet)."""
    experiment = ExperimentFactory(execution="rounds", repeats=1, created_by=user)
    (run,) = services.experiment_start(experiment, user)
    add_point(run, 0, 4, 1, 1000.0, 1.0)
    Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED)
    return run, services.run_rerun(run, user)


@pytest.mark.parametrize("rerun_status", ["queued", "running", "cancelled", "failed"])
def test_every_export_of_a_run_answers_whatever_its_rerun_is(
    round_with_rerun, signed_in, rerun_status
):
    run, rerun = round_with_rerun
    Run.objects.filter(pk=rerun.pk).update(status=rerun_status)
    for fmt, query in EXPORTS:
        response = signed_in.get(reverse("run-export", args=[run.pk, fmt]) + query)
        assert response.status_code == 200, (fmt, query)
    body = signed_in.get(reverse("run-export", args=[run.pk, "json"])).json()
    assert [p["tps"] for p in body["runs"][0]["points"]] == [1000.0]
    assert signed_in.get(reverse("run-detail", args=[run.pk])).status_code == 200


def test_shared_and_experiment_exports_answer_while_a_rerun_is_queued(round_with_rerun, user):
    run, _rerun = round_with_rerun
    visitor = Client()
    for target in (run, run.experiment):
        _link, token = services.share_link_create(user, target)
        for fmt, query in EXPORTS:
            response = visitor.get(reverse("shared-export", args=[token, fmt]) + query)
            assert response.status_code == 200, (target, fmt, query)
        assert visitor.get(reverse("shared", args=[token])).status_code == 200


def test_exports_of_failed_runs_answer_with_or_without_points(signed_in):
    with_points = finished_run([(1, 1, 500.0, 1.0)])
    without = RunFactory()
    Run.objects.filter(pk__in=[with_points.pk, without.pk]).update(status=Run.Status.FAILED)
    for run in (with_points, without):
        for fmt, query in EXPORTS:
            response = signed_in.get(reverse("run-export", args=[run.pk, fmt]) + query)
            assert response.status_code == 200, (run, fmt, query)
