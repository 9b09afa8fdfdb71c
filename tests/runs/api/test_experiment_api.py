"""Scheduling through the API: one service with the form, the order and seed in the answers."""

from collections.abc import Callable

import pytest

from runs import services
from runs.agentlink.execution import execution_plan
from runs.models import Experiment
from tests.runs.factories import ConfigProfileFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def payload(experiment_payload) -> Callable[..., dict]:
    """Two cells (two config profiles) repeated three times."""

    def build(**overrides) -> dict:
        profiles = [ConfigProfileFactory().pk, ConfigProfileFactory().pk]
        return experiment_payload(name="rounds", config_profiles=profiles, repeats=3, **overrides)

    return build


def test_create_with_start_queues_the_rounds_in_the_order_of_the_recorded_seed(
    api_client, lab_redis, monkeypatch, payload
):
    checked = []
    check = services.experiments.check_job_spec
    monkeypatch.setattr(
        services.experiments, "check_job_spec", lambda spec: checked.append(1) or check(spec)
    )

    created = api_client.post("/api/experiments/", payload(start=True, seed=31), format="json")

    assert created.status_code == 201, created.json()
    body = created.json()
    assert (body["execution"], body["seed"], body["status"]) == ("rounds", 31, "queued")
    assert "start" not in body
    assert len(checked) == 2
    runs = api_client.get(f"/api/experiments/{body['id']}/runs/").json()["results"]
    assert [(run["position"], run["cell"], run["round"]) for run in runs] == [
        (slot.position, slot.cell, slot.round) for slot in execution_plan(2, 3, "rounds", 31)
    ]


def test_create_without_start_is_a_draft_with_a_drawn_seed_and_an_estimate(api_client, payload):
    created = api_client.post("/api/experiments/", payload(execution="blocks"), format="json")

    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["status"] == "draft"
    assert Experiment.objects.get().seed == body["seed"]
    estimate = api_client.get(f"/api/experiments/{body['id']}/estimate/").json()
    assert (estimate["execution"], estimate["runs"], estimate["points"]) == ("blocks", 2, 12)
    assert estimate["setup_seconds"] < estimate["estimated_seconds"]


def test_starting_a_started_experiment_answers_409(api_client, lab_redis, payload):
    experiment_id = api_client.post("/api/experiments/", payload(start=True), format="json").json()[
        "id"
    ]

    again = api_client.post(f"/api/experiments/{experiment_id}/start/")

    assert again.status_code == 409
    assert "already started" in again.json()["error"]["message"]


@pytest.mark.parametrize(
    ("field", "value"), [("execution", "shuffled"), ("seed", -3), ("order", "sideways")]
)
def test_bad_execution_fields_answer_400_naming_the_field(api_client, field, value, payload):
    response = api_client.post("/api/experiments/", payload(**{field: value}), format="json")

    assert response.status_code == 400
    assert field in response.json()["error"]["fields"]
    assert not Experiment.objects.exists()
