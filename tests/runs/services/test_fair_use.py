"""Fair use: a user's runs not yet final, and one experiment's repeats, are limited; the API
answers 400 naming the limit, the count and the setting, the schedule form shows the same."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from runs.models import Experiment, Run
from tests.runs.factories import RunFactory, UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def small_limits(settings):
    settings.BENCHLAB_MAX_QUEUED_RUNS_PER_USER = 5
    settings.BENCHLAB_MAX_REPEATS = 4
    return settings


def limit_error(response) -> dict:
    assert response.status_code == 400, response.json()
    error = response.json()["error"]
    assert error["code"] == "limit_reached", error
    return error


@pytest.mark.parametrize("execution", ["rounds", "blocks"])
def test_repeats_over_the_limit_answer_400_naming_limit_count_and_setting(
    api_client, lab_redis, experiment_payload, execution
):
    payload = experiment_payload(repeats=100_000, execution=execution, start=True)

    error = limit_error(api_client.post("/api/experiments/", payload, format="json"))

    assert (error["limit"], error["current"], error["setting"]) == (
        50,
        100_000,
        "BENCHLAB_MAX_REPEATS",
    )
    assert "100000 repeats is over the limit of 50" in error["fields"]["repeats"][0]
    assert "BENCHLAB_MAX_REPEATS" in error["message"]
    assert not Experiment.objects.exists()
    assert not Run.objects.exists()


def test_a_draft_over_the_repeats_limit_is_refused_too(api_client, experiment_payload):
    payload = experiment_payload(repeats=51, execution="rounds")

    limit_error(api_client.post("/api/experiments/", payload, format="json"))


def test_queued_runs_over_the_limit_answer_400_and_queue_nothing(
    api_client, user, lab_redis, experiment_payload, small_limits
):
    first = experiment_payload(repeats=3, execution="rounds", start=True)
    assert api_client.post("/api/experiments/", first, format="json").status_code == 201

    second = experiment_payload(name="more", repeats=3, execution="rounds", start=True)
    error = limit_error(api_client.post("/api/experiments/", second, format="json"))

    assert (error["limit"], error["current"], error["setting"]) == (
        5,
        3,
        "BENCHLAB_MAX_QUEUED_RUNS_PER_USER",
    )
    assert "has 3 runs queued or running and this would queue 3 more" in error["message"]
    assert Run.objects.filter(created_by=user).count() == 3
    assert list(Experiment.objects.values_list("name", flat=True)) == ["tuning"]


def test_finished_and_cancelled_runs_free_their_places(
    api_client, user, lab_redis, experiment_payload, small_limits
):
    RunFactory.create_batch(4, created_by=user, status=Run.Status.SUCCEEDED)
    payload = experiment_payload(repeats=4, execution="rounds", start=True)
    experiment = api_client.post("/api/experiments/", payload, format="json").json()
    first, *others = Run.objects.filter(experiment_id=experiment["id"]).order_by("pk")
    api_client.post(f"/api/runs/{first.pk}/rerun/")
    assert limit_error(api_client.post(f"/api/runs/{first.pk}/rerun/"))["current"] == 5

    api_client.post(f"/api/runs/{others[0].pk}/cancel/")

    assert api_client.post(f"/api/runs/{first.pk}/rerun/").status_code == 201


def test_starting_a_draft_counts_the_runs_it_would_queue(
    api_client, user, lab_redis, experiment_payload, small_limits
):
    draft = experiment_payload(repeats=3, execution="rounds")
    experiment = api_client.post("/api/experiments/", draft, format="json").json()
    RunFactory.create_batch(3, created_by=user)

    error = limit_error(api_client.post(f"/api/experiments/{experiment['id']}/start/"))

    assert error["current"] == 3
    assert not Run.objects.filter(experiment_id=experiment["id"]).exists()


def test_staff_are_exempt_from_the_queued_runs_limit_not_from_the_repeats_limit(
    lab_redis, experiment_payload, small_limits
):
    staff = APIClient()
    staff.force_authenticate(UserFactory(is_staff=True))
    for name in ("one", "two"):
        payload = experiment_payload(name=name, repeats=4, execution="rounds", start=True)
        assert staff.post("/api/experiments/", payload, format="json").status_code == 201

    over = experiment_payload(name="three", repeats=5, execution="rounds", start=True)
    error = limit_error(staff.post("/api/experiments/", over, format="json"))

    assert error["setting"] == "BENCHLAB_MAX_REPEATS"
    assert Run.objects.count() == 8


def test_the_schedule_form_shows_the_same_errors(user, lab_redis, experiment_payload, small_limits):
    page = Client()
    page.force_login(user)
    data = experiment_payload()
    form = {
        "name": "sweep",
        **{name: data[name] for name in ("hosts", "builds", "config_profiles", "workloads")},
        "storage": "default",
        "clients": "1,2",
        "duration_s": "3",
        "repeats": "9",
        "warmup_s": "0",
        "order": "ascending",
        "between_points": "none",
        "execution": "rounds",
        "seed": "",
        "start": "1",
    }
    too_many_repeats = page.post(reverse("schedule"), form).content.decode()
    RunFactory.create_batch(4, created_by=user)
    too_many_runs = page.post(reverse("schedule"), {**form, "repeats": "2"}).content.decode()

    assert '<div class="field has-error" id="field-repeats">' in too_many_repeats
    assert "9 repeats is over the limit of 4 per experiment (BENCHLAB_MAX_REPEATS)" in (
        too_many_repeats
    )
    assert "has 4 runs queued or running and this would queue 2 more, over the limit of 5" in (
        too_many_runs
    )
    assert "BENCHLAB_MAX_QUEUED_RUNS_PER_USER" in too_many_runs
    assert not Experiment.objects.filter(name="sweep").exists()
