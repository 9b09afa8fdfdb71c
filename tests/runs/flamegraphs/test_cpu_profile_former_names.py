"""The CPU profile's former names still answer: the experiment API's `profile` (deprecated in
the schema), the runs API's and the pages' former paths; and migration 0037 renames the
stored rows, spec keys and event types, and back."""

import pytest
from django.test import Client
from django.urls import reverse

from runs.models import CpuProfile, Experiment, RunEvent
from tests.runs.factories import RunFactory
from tests.runs.migrations.migrating import migrate

BEFORE = [("runs", "0036_host_canary")]
AFTER = [("runs", "0037_cpu_profile")]


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("sent", "stored"),
    [({"profile": True}, True), ({"profile": False, "cpu_profile": True}, True)],
)
def test_the_experiment_api_takes_and_answers_the_former_switch_name(
    api_client, experiment_payload, sent: dict, stored: bool
):
    created = api_client.post("/api/experiments/", experiment_payload(**sent), format="json")

    assert created.status_code == 201, created.json()
    assert created.json()["cpu_profile"] is stored and created.json()["profile"] is stored
    assert Experiment.objects.get().cpu_profile is stored


@pytest.mark.django_db
def test_the_schema_marks_the_former_switch_name_deprecated(api_client):
    schema = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    properties = schema.json()["components"]["schemas"]["Experiment"]["properties"]
    assert properties["profile"]["deprecated"] is True
    assert "deprecated" not in properties["cpu_profile"]


@pytest.mark.django_db
def test_a_runs_cpu_profiles_answer_at_their_former_paths_too(api_client, user):
    run = RunFactory()
    CpuProfile.objects.create(run=run, index=0, clients=2, folded="main;exec 3\n")
    client = Client()
    client.force_login(user)

    current = api_client.get(f"/api/runs/{run.pk}/cpu-profiles/").json()
    assert api_client.get(f"/api/runs/{run.pk}/profiles/").json() == current
    assert [row["folded"] for row in current] == ["main;exec 3\n"]
    folded = reverse("run-cpu-profile-folded", args=[run.pk, 0])
    assert folded == f"/runs/{run.pk}/cpu-profiles/0.folded"
    assert client.get(f"/runs/{run.pk}/profiles/0.folded").content == b"main;exec 3\n"


def test_migration_0037_renames_rows_spec_keys_and_event_types_and_back(at_latest):
    run = RunFactory(spec={"sweep": {"clients": [1], "profile": True}})
    other = RunFactory(spec={"sweep": {"clients": [1]}})
    old = migrate(BEFORE)
    old.get_model("runs", "Profile").objects.create(run_id=run.pk, index=0, folded="main 1\n")
    old_event = old.get_model("runs", "RunEvent")
    old_event.objects.create(run_id=run.pk, seq=1, type="profile", payload={"index": 0})
    old_event.objects.create(run_id=run.pk, seq=2, type="point", payload={})

    migrate(AFTER)

    run.refresh_from_db()
    other.refresh_from_db()
    assert run.spec == {"sweep": {"clients": [1], "cpu_profile": True}}
    assert other.spec == {"sweep": {"clients": [1]}}
    assert [row.folded for row in run.cpu_profiles.all()] == ["main 1\n"]
    events = RunEvent.objects.filter(run=run).order_by("seq")
    assert list(events.values_list("type", flat=True)) == ["cpu_profile", "point"]

    back = migrate(BEFORE)

    spec = back.get_model("runs", "Run").objects.get(pk=run.pk).spec
    assert spec == {"sweep": {"clients": [1], "profile": True}}
    assert back.get_model("runs", "Profile").objects.filter(run_id=run.pk).count() == 1
    types = back.get_model("runs", "RunEvent").objects.order_by("seq").values_list("type")
    assert [row[0] for row in types] == ["profile", "point"]
