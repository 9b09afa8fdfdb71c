"""Ownership: everyone signed in reads; only the owner or staff change, delete, start or revoke.

Through the API and through the pages."""

import pytest
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from runs import services
from runs.models import ConfigProfile, Experiment, PgBuild, Run, Workload
from runs.services.access.tokens import api_token_create
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    PgBuildFactory,
    RunFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


def client_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_create(user)[1]}")
    return client


@pytest.fixture
def owner(db):
    return UserFactory(username="owner")


@pytest.fixture
def other(db):
    return UserFactory(username="other")


def owned_objects(owner) -> dict[str, object]:
    """One object of each owned kind, by its API collection."""
    experiment = ExperimentFactory(created_by=owner)
    comparison = services.comparison_create(owner, "cmp", [RunFactory(experiment=experiment)])
    return {
        "builds": PgBuildFactory(created_by=owner),
        "config-profiles": ConfigProfileFactory(created_by=owner),
        "workloads": WorkloadFactory(created_by=owner),
        "experiments": ExperimentFactory(created_by=owner),
        "comparisons": comparison,
    }


@pytest.mark.parametrize(
    "collection", ["builds", "config-profiles", "workloads", "experiments", "comparisons"]
)
def test_a_non_owner_may_read_but_not_delete(owner, other, collection):
    obj = owned_objects(owner)[collection]
    api = client_for(other)

    read = api.get(f"/api/{collection}/{obj.pk}/")
    deleted = api.delete(f"/api/{collection}/{obj.pk}/")

    assert read.status_code == 200
    assert read.json()["created_by"] == "owner"
    assert deleted.status_code == 403
    assert deleted.json()["error"]["code"] == "permission_denied"
    assert "Only its owner or staff may delete" in deleted.json()["error"]["message"]
    assert type(obj).objects.filter(pk=obj.pk).exists()


@pytest.mark.parametrize(
    ("collection", "text_field"),
    [("builds", "notes"), ("config-profiles", "description"), ("workloads", "description")],
)
def test_a_non_owner_cannot_change_a_definition_but_the_owner_can(
    owner, other, collection, text_field
):
    obj = owned_objects(owner)[collection]

    refused = client_for(other).patch(
        f"/api/{collection}/{obj.pk}/", {text_field: "x"}, format="json"
    )
    allowed = client_for(owner).patch(
        f"/api/{collection}/{obj.pk}/", {text_field: "x"}, format="json"
    )

    assert refused.status_code == 403
    assert allowed.status_code == 200


@pytest.mark.parametrize(
    "collection", ["builds", "config-profiles", "workloads", "experiments", "comparisons"]
)
def test_the_owner_and_staff_may_delete(owner, collection):
    objects = owned_objects(owner)
    staff = UserFactory(username="admin", is_staff=True)
    obj = objects[collection]
    second = owned_objects(owner)[collection]

    assert client_for(owner).delete(f"/api/{collection}/{obj.pk}/").status_code == 204
    assert client_for(staff).delete(f"/api/{collection}/{second.pk}/").status_code == 204
    assert not type(obj).objects.filter(pk__in=[obj.pk, second.pk]).exists()


def test_created_objects_are_owned_by_their_creator(owner):
    api = client_for(owner)

    build = api.post("/api/builds/", {"name": "pg17", "version": "17"}, format="json")
    profile = api.post("/api/config-profiles/", {"name": "p", "settings": {}}, format="json")

    assert build.json()["created_by"] == "owner"
    assert PgBuild.objects.get(name="pg17").created_by == owner
    assert ConfigProfile.objects.get(pk=profile.json()["id"]).created_by == owner


def test_an_ownerless_definition_is_changed_by_staff_only(other):
    workload = WorkloadFactory(created_by=None)
    staff = UserFactory(username="admin", is_staff=True)

    refused = client_for(other).patch(
        f"/api/workloads/{workload.pk}/", {"description": "x"}, format="json"
    )
    allowed = client_for(staff).patch(
        f"/api/workloads/{workload.pk}/", {"description": "x"}, format="json"
    )

    assert refused.status_code == 403
    assert "Only staff (it has no owner)" in refused.json()["error"]["message"]
    assert allowed.status_code == 200


def test_a_non_owner_cannot_start_an_experiment_or_cancel_its_runs(owner, other, lab_redis):
    experiment = ExperimentFactory(created_by=owner)
    run = RunFactory(experiment=experiment, created_by=owner)
    api = client_for(other)

    started = api.post(f"/api/experiments/{experiment.pk}/start/")
    cancelled = api.post(f"/api/runs/{run.pk}/cancel/")

    assert (started.status_code, cancelled.status_code) == (403, 403)
    assert not Run.objects.filter(experiment=experiment).exclude(pk=run.pk).exists()
    run.refresh_from_db()
    assert run.status == Run.Status.QUEUED


def test_the_experiment_owner_may_cancel_a_run_someone_else_started(owner, other, lab_redis):
    run = RunFactory(experiment=ExperimentFactory(created_by=owner), created_by=other)

    response = client_for(owner).post(f"/api/runs/{run.pk}/cancel/")

    assert response.json()["status"] == "cancelled"


def test_anyone_signed_in_may_rerun_and_owns_the_new_run(owner, other, lab_redis):
    run = RunFactory(
        experiment=ExperimentFactory(created_by=owner),
        status=Run.Status.SUCCEEDED,
        spec={
            "version": 1,
            "postgres": {"version": "16", "source": "auto"},
            "sweep": {"clients": [1], "duration_s": 2},
        },
    )

    response = client_for(other).post(f"/api/runs/{run.pk}/rerun/")

    assert response.status_code == 201
    assert Run.objects.get(pk=response.json()["id"]).created_by == other


def test_a_rerun_by_another_user_goes_into_a_new_experiment_of_theirs(owner, other, lab_redis):
    original = services.experiment_start(
        ExperimentFactory(created_by=owner, execution="rounds", repeats=2), owner
    )
    second_round = next(run for run in original if run.round == 2)
    Run.objects.filter(pk=second_round.pk).update(status=Run.Status.SUCCEEDED)

    response = client_for(other).post(f"/api/runs/{second_round.pk}/rerun/")
    by_owner = services.run_rerun(second_round, owner)

    rerun = Run.objects.get(pk=response.json()["id"])
    assert rerun.experiment != second_round.experiment
    assert rerun.experiment.created_by == other
    assert list(rerun.experiment.runs.all()) == [rerun]
    assert (rerun.cell, rerun.round, rerun.rerun_of) == (0, 1, second_round)
    assert list(rerun.experiment.hosts.all()) == [second_round.host]
    assert rerun.experiment.execution == "rounds" and rerun.experiment.repeats == 1
    assert by_owner.experiment == second_round.experiment, "the owner's stays in place"
    assert second_round.experiment.runs.count() == 3


def test_a_non_owner_cannot_revoke_a_share_link(owner, other):
    link, _token = services.share_link_create(owner, ExperimentFactory(created_by=owner))

    response = client_for(other).post(f"/api/share-links/{link.pk}/revoke/")

    assert response.status_code == 404, "another user's link is not even listed to them"
    link.refresh_from_db()
    assert link.is_active


def test_the_shared_objects_owner_may_revoke_a_link_someone_else_made(owner, other):
    link, _token = services.share_link_create(other, ExperimentFactory(created_by=owner))

    response = client_for(owner).post(f"/api/share-links/{link.pk}/revoke/")

    assert response.json()["is_active"] is False


def test_deleting_a_workload_or_build_that_runs_use_answers_409_naming_them(owner):
    run = RunFactory(
        workload=WorkloadFactory(created_by=owner), build=PgBuildFactory(created_by=owner)
    )
    api = client_for(owner)

    for collection, obj in (("workloads", run.workload), ("builds", run.build)):
        response = api.delete(f"/api/{collection}/{obj.pk}/")
        error = response.json()["error"]
        assert response.status_code == 409
        assert error["code"] == "in_use"
        assert error["used_by"]["runs"] == [run.pk]
        assert f"runs {run.pk}" in error["message"]
    assert Workload.objects.filter(pk=run.workload.pk).exists()


def test_deleting_a_profile_another_builds_on_answers_409(owner):
    parent = ConfigProfileFactory(created_by=owner)
    child = ConfigProfileFactory(parent=parent)

    response = client_for(owner).delete(f"/api/config-profiles/{parent.pk}/")

    assert response.status_code == 409
    assert response.json()["error"]["used_by"] == {"config_profiles": [child.pk]}


def test_deleting_an_experiment_with_active_runs_answers_409(owner):
    experiment = ExperimentFactory(created_by=owner)
    run = RunFactory(experiment=experiment, status=Run.Status.RUNNING)

    response = client_for(owner).delete(f"/api/experiments/{experiment.pk}/")

    assert response.status_code == 409
    assert response.json()["error"]["used_by"] == {"active_runs": [run.pk]}
    assert Experiment.objects.filter(pk=experiment.pk).exists()


@pytest.mark.parametrize("settings", [["shared_buffers", "1GB"], "shared_buffers=1GB", 3])
def test_config_profile_settings_of_the_wrong_json_type_answer_400_naming_the_field(
    owner, settings
):
    response = client_for(owner).post(
        "/api/config-profiles/", {"name": "wrong", "settings": settings}, format="json"
    )

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["settings"]


def test_a_nul_character_in_a_json_field_answers_400(owner):
    response = client_for(owner).post(
        "/api/workloads/",
        {"name": "w", "scripts": [{"builtin": "tpcb-like"}], "defines": {"a": "x\x00"}},
        format="json",
    )

    assert response.status_code == 400
    assert list(response.json()["error"]["fields"]) == ["defines.a"]


def test_a_taken_name_answers_409_naming_the_field(owner):
    PgBuildFactory(name="pg16")

    response = client_for(owner).post(
        "/api/builds/", {"name": "pg16", "version": "16"}, format="json"
    )

    assert response.status_code == 409
    assert response.json()["error"]["code"] == "already_exists"
    assert list(response.json()["error"]["fields"]) == ["name"]


def test_the_api_root_links_to_api_endpoints_only(owner):
    from runs.api.urls import router

    links = client_for(owner).get("/api/").json()

    assert len(links) == len(router.registry)
    assert all("/api/" in url for url in links.values())


def test_an_unknown_api_path_answers_a_json_404(owner):
    response = client_for(owner).delete("/api/runs/1.5/")

    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


@pytest.fixture
def other_signed_in(other) -> Client:
    client = Client()
    client.force_login(other)
    return client


def test_pages_hide_start_cancel_and_save_from_a_non_owner(owner, other_signed_in):
    experiment = ExperimentFactory(created_by=owner)
    run = RunFactory(experiment=experiment, status=Run.Status.RUNNING, created_by=owner)
    profile = ConfigProfileFactory(created_by=owner)

    experiment_page = other_signed_in.get(reverse("experiment-detail", args=[experiment.pk]))
    run_page = other_signed_in.get(reverse("run-detail", args=[run.pk]))
    profile_page = other_signed_in.get(reverse("config-detail", args=[profile.pk]))

    assert reverse("experiment-start", args=[experiment.pk]) not in experiment_page.content.decode()
    assert reverse("run-cancel", args=[run.pk]) not in run_page.content.decode()
    assert "Only its owner or staff may change this profile." in profile_page.content.decode()


def test_pages_refuse_a_non_owners_start_cancel_and_save_with_403(
    owner, other_signed_in, lab_redis
):
    experiment = ExperimentFactory(created_by=owner)
    run = RunFactory(experiment=experiment, created_by=owner)
    workload = WorkloadFactory(created_by=owner, description="kept")

    started = other_signed_in.post(reverse("experiment-start", args=[experiment.pk]))
    cancelled = other_signed_in.post(reverse("run-cancel", args=[run.pk]))
    saved = other_signed_in.post(
        reverse("workload-detail", args=[workload.pk]), {"name": "taken", "description": "x"}
    )

    assert (started.status_code, cancelled.status_code, saved.status_code) == (403, 403, 403)
    run.refresh_from_db()
    workload.refresh_from_db()
    assert (run.status, workload.description) == (Run.Status.QUEUED, "kept")
    assert experiment.runs.count() == 1
