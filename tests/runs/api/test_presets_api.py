"""Presets through the API: listed by key, and an experiment made from one with the
request's fields over the preset's (`benchlab run --preset KEY`)."""

import pytest

from runs.models import Experiment
from tests.runs.factories import HostFactory

pytestmark = pytest.mark.django_db


def test_presets_are_listed_by_key(api_client):
    found = {preset["key"]: preset for preset in api_client.get("/api/presets/").json()}
    assert found["smoke"]["sweep"] == {"clients": [1, 2], "duration_s": 3}
    assert api_client.get("/api/presets/smoke/").json()["title"] == found["smoke"]["title"]


def test_an_experiment_from_a_preset_takes_the_given_fields_over_the_presets(api_client):
    host = HostFactory()
    made = api_client.post(
        "/api/presets/smoke/experiment/", {"hosts": [host.pk], "duration_s": 2}, format="json"
    )
    assert made.status_code == 201, made.json()
    body = made.json()
    assert (body["clients"], body["duration_s"], body["status"]) == ([1, 2], 2, "draft")
    experiment = Experiment.objects.get(pk=body["id"])
    assert [h.pk for h in experiment.hosts.all()] == [host.pk]
    assert experiment.builds.exists() and experiment.workloads.exists()


def test_an_unknown_preset_is_a_404_naming_the_presets(api_client):
    answer = api_client.post("/api/presets/nope/experiment/", {}, format="json")
    assert answer.status_code == 404 and "smoke" in answer.json()["error"]["message"]


def test_a_preset_experiment_without_hosts_is_a_400_naming_hosts(api_client):
    HostFactory(), HostFactory()
    answer = api_client.post("/api/presets/smoke/experiment/", {}, format="json")
    assert answer.status_code == 400 and "hosts" in str(answer.json())


def test_an_experiments_answer_posted_back_makes_the_same_experiment(
    api_client, experiment_payload
):
    """`benchlab run --experiment ID` runs a started experiment again this way."""
    made = api_client.post("/api/experiments/", experiment_payload(), format="json").json()
    read_only = ("id", "status", "created_by", "created_at", "adaptive_state", "profile")
    body = {k: v for k, v in made.items() if k not in read_only}
    again = api_client.post("/api/experiments/", body, format="json")
    assert again.status_code == 201, again.json()
    assert {k: v for k, v in again.json().items() if k not in read_only} == body
