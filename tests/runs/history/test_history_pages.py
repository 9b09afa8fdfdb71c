"""The history pages signed in: a run's notes, manifest and reproduce script, series and alerts."""

import json

import pytest
from django.urls import reverse

from agents.contract.spec.manifest import MANIFEST_KIND
from runs.models import Host, Note, Run, Series
from runs.services.history.series import series_save
from tests.runs.factories import ExperimentFactory, HostFactory, ResultFactory, RunFactory

pytestmark = pytest.mark.django_db

STEPS = [
    {"name": "initdb", "argv": ["/pg/bin/initdb", "-D", "/d", "-U", "postgres"], "seconds": 1.0,
     "exit_code": 0},
    {"name": "pgbench", "argv": ["/pg/bin/pgbench", "-c", "4", "-T", "10", "-h", "/s", "-p", "5"],
     "seconds": 10.0, "exit_code": 0},
]  # fmt: skip


@pytest.fixture
def finished_run() -> Run:
    run = RunFactory(
        status=Run.Status.SUCCEEDED,
        spec={"version": 1, "token": "secret-token", "postgres": {"version": "16"}},
        install={"version": "16.15", "bindir": "/pg/bin", "source": "prebuilt"},
        steps=STEPS,
        agent_version="0.1.0",
    )
    ResultFactory(run=run, clients=4, tps=1234.5)
    return run


def test_a_run_offers_its_manifest_without_its_token(client, user, finished_run):
    client.force_login(user)

    manifest = json.loads(client.get(reverse("run-manifest", args=[finished_run.pk])).content)

    assert manifest["kind"] == MANIFEST_KIND
    assert "token" not in manifest["spec"]
    assert manifest["commands"] == STEPS
    assert manifest["points"][0]["tps"] == 1234.5
    assert len(manifest["build"]["digest"]) == 64


def test_a_run_offers_a_reproduce_script_that_replays_its_pgbench(client, user, finished_run):
    client.force_login(user)

    script = client.get(reverse("run-reproduce", args=[finished_run.pk])).content.decode()

    assert script.startswith("#!/usr/bin/env bash")
    assert '"$bindir/pgbench" -c 4 -T 10 -h "$sock" -p "$port"' in script
    assert "1234.50" in script


def test_a_command_that_did_not_run_for_the_run_says_where_its_output_came_from(
    client, user, finished_run
):
    copied = "not run for this job: its data directory is a copy of what this initdb made"
    finished_run.steps = [{**STEPS[0], "note": copied}, STEPS[1]]
    finished_run.save(update_fields=["steps"])
    client.force_login(user)

    page = client.get(reverse("run-detail", args=[finished_run.pk])).content.decode()
    manifest = json.loads(client.get(reverse("run-manifest", args=[finished_run.pk])).content)

    assert copied in page
    assert manifest["commands"][0]["note"] == copied


def test_notes_on_a_run_and_its_host_show_on_the_run_page_and_in_comparisons(
    client, user, finished_run
):
    client.force_login(user)
    user.is_staff = True
    user.save()

    client.post(reverse("run-note-add", args=[finished_run.pk]), {"text": "firmware updated"})
    client.post(reverse("host-note-add", args=[finished_run.host_id]), {"text": "kernel 6.8"})
    page = client.get(reverse("run-detail", args=[finished_run.pk])).content.decode()

    assert Note.objects.count() == 2
    assert "firmware updated" in page and "kernel 6.8" in page


def test_only_staff_add_notes_to_hosts(client, user, finished_run):
    client.force_login(user)

    response = client.post(reverse("host-note-add", args=[finished_run.host_id]), {"text": "x"})

    assert response.status_code == 403
    assert not Note.objects.exists()


def test_a_series_is_created_with_its_schedule_and_its_page_charts_it(client, user):
    client.force_login(user)
    template = ExperimentFactory()

    response = client.post(
        reverse("series-list"),
        {"name": "nightly", "template": template.pk, "schedule": "0 3 * * *", "enabled": "on"},
    )

    series = Series.objects.get()
    assert response.url == reverse("series-detail", args=[series.pk])
    assert series.periodic_task.crontab.hour == "3"
    page = client.get(response.url).content.decode()
    assert "No finished occurrence yet." in page


def test_a_bad_schedule_is_refused_naming_the_fix(client, user):
    client.force_login(user)

    response = client.post(
        reverse("series-list"),
        {"name": "nightly", "template": ExperimentFactory().pk, "schedule": "every night"},
    )

    assert response.status_code == 200
    assert "give 5 cron fields" in response.content.decode()
    assert not Series.objects.exists()


def test_the_api_creates_a_series_and_refuses_a_bad_schedule_naming_the_field(api_client):
    template = ExperimentFactory()
    body = {"name": "nightly", "template": template.pk, "schedule": "30 2 * * 1-5"}

    created = api_client.post("/api/series/", body, format="json")
    refused = api_client.post("/api/series/", {**body, "schedule": "61 * * * *"}, format="json")

    assert created.status_code == 201, created.content
    assert Series.objects.get().periodic_task.crontab.day_of_week == "1-5"
    assert refused.status_code == 400
    assert "schedule" in refused.json()["error"]["fields"]


def test_the_api_adds_a_note_to_a_run_and_serves_its_manifest(api_client, finished_run):
    noted = api_client.post(
        "/api/notes/", {"run": finished_run.pk, "text": "BIOS 1.2"}, format="json"
    )
    manifest = api_client.get(f"/api/runs/{finished_run.pk}/manifest/")

    assert noted.status_code == 201, noted.content
    assert finished_run.run_notes.get().text == "BIOS 1.2"
    assert manifest.json()["commands"] == STEPS


@pytest.mark.parametrize("page", ["36893488147419103231", "9" * 5000])
def test_a_page_past_the_end_is_404_however_long_its_number(api_client, page):
    response = api_client.get("/api/notes/", {"page": page})

    assert response.status_code == 404


def test_pausing_a_series_disables_its_beat_schedule(client, user):
    client.force_login(user)
    series = series_save(
        Series(name="s", template=ExperimentFactory(), schedule="0 3 * * *", created_by=user)
    )

    client.post(reverse("series-toggle", args=[series.pk]))

    series.refresh_from_db()
    assert not series.enabled
    assert not series.periodic_task.enabled


def test_an_occurrence_that_cannot_start_is_reported_on_the_series_page(client, user):
    client.force_login(user)
    pending = HostFactory(enrollment=Host.Enrollment.PENDING)
    template = ExperimentFactory(hosts=[pending])
    series = series_save(Series(name="s", template=template, schedule="0 3 * * *", created_by=user))

    response = client.post(reverse("series-fire", args=[series.pk]), follow=True)

    assert response.status_code == 200
    assert "could not start" in response.content.decode()
    assert f"host {pending.name} is not approved" in response.content.decode()
    assert series.occurrences.get().experiment.status == "draft"


def test_an_experiment_a_series_repeats_is_not_deleted(api_client, user):
    template = ExperimentFactory(created_by=user)
    series = series_save(Series(name="s", template=template, schedule="0 3 * * *"))

    response = api_client.delete(f"/api/experiments/{template.pk}/")

    assert response.status_code == 409
    assert response.json()["error"]["used_by"] == {"series": [series.pk]}
