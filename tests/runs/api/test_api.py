"""The DRF API: authentication, validation naming the field, actions, schema."""

import pytest
from django.contrib.auth.models import AnonymousUser
from django.core.management import call_command
from rest_framework.exceptions import NotAuthenticated
from rest_framework.request import Request
from rest_framework.test import APIRequestFactory

from runs import services
from runs.api.permissions import signed_in_user
from runs.models import Experiment, Host, Run, ShareLink
from tests.runs import events
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    RunFactory,
)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("method", "url"),
    [
        ("post", "/api/builds/"),
        ("post", "/api/experiments/"),
        ("get", "/api/runs/"),
        ("get", "/api/hosts/"),
        ("post", "/api/share-links/"),
    ],
)
def test_anonymous_requests_are_refused(anonymous_client, method, url):
    response = getattr(anonymous_client, method)(url, {}, format="json")

    assert response.status_code in (401, 403)
    assert response.json()["error"]["code"] == "not_authenticated"


def test_session_login_works_for_reads(client, user):
    client.force_login(user)

    assert client.get("/api/runs/").status_code == 200


def test_create_an_experiment_and_start_it(api_client, lab_redis, experiment_payload):
    created = api_client.post("/api/experiments/", experiment_payload(), format="json")
    assert created.status_code == 201, created.json()
    experiment_id = created.json()["id"]

    estimate = api_client.get(f"/api/experiments/{experiment_id}/estimate/")
    started = api_client.post(f"/api/experiments/{experiment_id}/start/")

    assert estimate.json()["runs"] == 1
    assert started.status_code == 201
    assert [run["status"] for run in started.json()] == ["queued"]
    assert api_client.get(f"/api/experiments/{experiment_id}/").json()["status"] == "queued"


def test_a_refused_setting_answers_400_naming_the_field(api_client, experiment_payload):
    profile = ConfigProfileFactory(settings={"shared_preload_libraries": "evil"})

    response = api_client.post(
        "/api/experiments/", experiment_payload(config_profiles=[profile.pk]), format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "refused_setting"
    assert list(error["fields"]) == ["settings.shared_preload_libraries"]


def test_a_host_awaiting_approval_answers_400_saying_who_approves_it(
    api_client, experiment_payload
):
    host = HostFactory(enrollment=Host.Enrollment.PENDING)

    response = api_client.post(
        "/api/experiments/", experiment_payload(hosts=[host.pk]), format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "host_not_approved"
    assert error["fields"]["hosts"] == [
        f"host {host.name} is not approved; an administrator approves a new agent on the hosts page"
    ]


@pytest.mark.parametrize(
    ("stop", "field", "message"),
    [
        ({"duration_s": None}, "sweep.duration_s", "give a duration in seconds or a "),
        ({"transactions": 100}, "sweep.transactions", "give a duration or a transaction count, "),
    ],
)
def test_a_sweep_needs_exactly_one_of_duration_and_transactions(
    api_client, experiment_payload, stop, field, message
):
    response = api_client.post("/api/experiments/", experiment_payload(**stop), format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert (error["code"], list(error["fields"])) == ("invalid_spec", [field])
    assert error["fields"][field][0].startswith(message)
    assert "(host" not in error["message"], "one answer for the experiment, not a cell's"


def test_a_misspelt_field_answers_400_listing_the_fields(api_client, experiment_payload):
    response = api_client.post("/api/experiments/", experiment_payload(repeat=5), format="json")

    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["repeat"]
    assert message.startswith("there is no field 'repeat'; the fields are: name, description")
    assert "repeats" in message and "created_by" not in message
    assert not Experiment.objects.exists()


def test_a_storage_target_the_host_lacks_answers_400_before_any_run_is_queued(
    api_client, experiment_payload
):
    host = HostFactory()
    host.storage_targets.create(name="nvme", path="/mnt/nvme")
    body = experiment_payload(
        hosts=[host.pk], storage_layouts=[{"data": "nvme", "wal": "sata"}], start=True
    )

    response = api_client.post("/api/experiments/", body, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "storage_unknown"
    assert error["fields"] == {
        "storage.wal": [f"host {host.name} has no storage target “sata” (it has: nvme)"]
    }
    assert not Experiment.objects.exists()


def test_starting_a_draft_left_without_workloads_answers_400_naming_the_workloads(
    api_client, experiment_payload
):
    created = api_client.post("/api/experiments/", experiment_payload(), format="json").json()
    Experiment.objects.get(pk=created["id"]).workloads.clear()

    response = api_client.post(f"/api/experiments/{created['id']}/start/")

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "empty_matrix"
    assert error["fields"] == {"workloads": ["choose at least one workload"]}


def test_a_config_profile_with_a_bad_value_is_refused_with_the_catalogue_message(
    api_client, pg_catalogue
):
    PgBuildFactory(version=pg_catalogue.version)

    response = api_client.post(
        "/api/config-profiles/",
        {"name": "bad", "settings": {"wal_sync_method": "sometimes"}},
        format="json",
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "invalid_setting_value"
    assert "fdatasync" in error["fields"]["settings.wal_sync_method"][0]


def test_config_profile_diff_shows_what_it_changes_in_its_parent(api_client):
    parent = ConfigProfileFactory(settings={"shared_buffers": "128MB", "fsync": "on"})
    child = ConfigProfileFactory(parent=parent, settings={"shared_buffers": "1GB", "jit": "off"})

    diff = api_client.get(f"/api/config-profiles/{child.pk}/diff/").json()

    assert diff == {
        "added": {"jit": "off"},
        "changed": {"shared_buffers": {"from": "128MB", "to": "1GB"}},
    }


def test_runs_filter_by_host_and_status(api_client):
    wanted = RunFactory(status=Run.Status.RUNNING)
    RunFactory(host=wanted.host)
    RunFactory(status=Run.Status.RUNNING)

    response = api_client.get("/api/runs/", {"host": wanted.host.name, "status": "running"}).json()

    assert response["count"] == 1
    assert response["results"][0]["id"] == wanted.pk


def test_cancel_a_queued_run_and_a_finished_one(api_client, user, lab_redis):
    queued = RunFactory(created_by=user)
    finished = RunFactory(status=Run.Status.SUCCEEDED, created_by=user)

    assert api_client.post(f"/api/runs/{queued.pk}/cancel/").json()["status"] == "cancelled"
    conflict = api_client.post(f"/api/runs/{finished.pk}/cancel/")
    assert conflict.status_code == 409
    assert conflict.json()["error"]["code"] == "conflict"


def test_run_results_list_points_with_their_timelines(api_client):
    run = RunFactory(status=Run.Status.RUNNING)
    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))

    body = api_client.get(f"/api/runs/{run.pk}/results/").json()

    assert [r["tps"] for r in body["results"]] == [500.0]
    assert [p["t"] for p in body["progress"]] == [1.0, 2.0]
    assert body["host_samples"][0]["data"]["cpu_user"] == 40.1


def test_run_detail_does_not_show_the_token(api_client):
    run = RunFactory(spec={"version": 1, "token": "secret"})

    body = api_client.get(f"/api/runs/{run.pk}/").json()

    assert "token" not in body["spec"]
    assert "token" not in body


def test_comparison_baseline_must_be_one_of_its_runs(api_client):
    runs = [RunFactory(), RunFactory()]

    refused = api_client.post(
        "/api/comparisons/",
        {"name": "c", "runs": [runs[0].pk], "baseline": runs[1].pk},
        format="json",
    )
    created = api_client.post(
        "/api/comparisons/", {"name": "c", "runs": [r.pk for r in runs]}, format="json"
    )

    assert refused.status_code == 400
    assert "baseline" in refused.json()["error"]["fields"]
    assert created.json()["baseline"] == runs[0].pk


def test_share_link_is_created_for_one_target_and_revoked(api_client):
    experiment = ExperimentFactory()

    created = api_client.post("/api/share-links/", {"experiment": experiment.pk}, format="json")
    link_id = created.json()["id"]
    revoked = api_client.post(f"/api/share-links/{link_id}/revoke/")

    assert created.status_code == 201
    assert len(created.json()["token"]) >= 43
    assert revoked.json()["is_active"] is False
    assert ShareLink.objects.get(pk=link_id).revoked_at is not None


def test_share_link_needs_exactly_one_target(api_client):
    run = RunFactory()

    response = api_client.post(
        "/api/share-links/", {"run": run.pk, "experiment": run.experiment.pk}, format="json"
    )

    assert response.status_code == 400


def test_host_notes_and_labels_are_editable_by_staff_but_facts_are_not(api_client, user):
    user.is_staff = True
    user.save()
    host = HostFactory(facts={"cpu": {"count": 2}})

    response = api_client.patch(
        f"/api/hosts/{host.pk}/",
        {"notes": "RAID1", "labels": ["write-through"], "facts": {}},
        format="json",
    )

    assert response.status_code == 200
    host.refresh_from_db()
    assert (host.notes, host.labels, host.facts) == (
        "RAID1",
        ["write-through"],
        {"cpu": {"count": 2}},
    )


def test_a_plain_user_may_read_a_host_but_not_change_its_notes_or_labels(api_client):
    host = HostFactory(notes="RAID1", labels=["write-through"])

    read = api_client.get(f"/api/hosts/{host.pk}/")
    response = api_client.patch(
        f"/api/hosts/{host.pk}/", {"notes": "", "labels": ["fast"]}, format="json"
    )

    assert read.status_code == 200
    assert response.status_code == 403
    assert "staff" in response.json()["error"]["message"]
    host.refresh_from_db()
    assert (host.notes, host.labels) == ("RAID1", ["write-through"])


def test_schema_endpoint_serves_a_valid_openapi_document(api_client, tmp_path):
    response = api_client.get("/api/schema/", HTTP_ACCEPT="application/vnd.oai.openapi+json")

    assert response.status_code == 200
    paths = response.json()["paths"]
    started = paths["/api/experiments/{id}/start/"]["post"]["responses"]["201"]
    assert started["content"]["application/json"]["schema"]["type"] == "array"
    assert set(paths["/api/workloads/{id}/"]["delete"]["responses"]) == {
        "204",
        "401",
        "403",
        "404",
        "409",
    }
    call_command("spectacular", "--validate", "--fail-on-warn", "--file", str(tmp_path / "s.yml"))


def test_an_anonymous_request_past_the_permissions_is_refused_not_recorded_as_owner():
    request = Request(APIRequestFactory().post("/api/builds/"))
    request.user = AnonymousUser()

    with pytest.raises(NotAuthenticated):
        signed_in_user(request)


@pytest.mark.parametrize(
    ("page", "status", "code"),
    [
        ("abc", 400, "invalid"),
        ("385623222932634542968668160", 404, "not_found"),
        ("2", 404, "not_found"),
    ],
)
def test_a_page_that_is_no_number_is_400_and_a_number_past_the_end_404(
    api_client, page, status, code
):
    response = api_client.get(f"/api/hosts/?page={page}")

    assert response.status_code == status
    assert response.json()["error"]["code"] == code


def test_the_answer_to_creating_an_experiment_holds_the_schedules_notes(
    api_client, experiment_payload
):
    capacity = {
        "execution": "rounds",
        "clients": [2],
        "duration_s": 5,
        "capacity": True,
        "capacity_percentile": 99.0,
        "capacity_limit_ms": 20.0,
        "capacity_low_tps": 100.0,
        "capacity_high_tps": 5000.0,
    }
    created = api_client.post("/api/experiments/", experiment_payload(**capacity), format="json")
    plain = api_client.post("/api/experiments/", experiment_payload(), format="json")

    assert created.status_code == 201, created.json()
    # Besides the notes of hosts that reported no free space (the factory's).
    [note] = [n for n in created.json()["schedule_notes"] if n.startswith("capacity")]
    assert note.startswith("capacity search: at p99 over 5 s probes, one stall of the host")
    assert not any(n.startswith("capacity") for n in plain.json()["schedule_notes"])
    # Advice at scheduling, not a property the experiment keeps.
    assert (
        api_client.get(f"/api/experiments/{created.json()['id']}/").json()["schedule_notes"] == []
    )
