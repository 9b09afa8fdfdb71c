"""Review and the start refuse an experiment its hosts cannot run (source builds, patches, a
client host no agent runs on), naming the field and the `BENCHLAB_AGENT_*` variable or the
agent's option that enables it; hosts an import made are never offered, counted or approved."""

import pytest
from django.test import Client
from django.urls import reverse

from agents.config import AgentConfig
from agents.worker.celery_worker import host_allows
from runs import presets, services
from runs.models import Host
from runs.services.history.import_reading import UploadedOutput
from runs.services.history.imports import ImportDetails, pgbench_import
from tests.runs.factories import ExperimentFactory, HostFactory, PgBuildFactory, UserFactory
from tests.runs.history.test_import import captured

pytestmark = pytest.mark.django_db

SOURCE = "https://ftp.postgresql.org/pub/source/"
LOCATION = SOURCE + "v17.2/postgresql-17.2.tar.bz2"
CGROUPS = {"cgroups": "v2", "problem": None}


def patched_build(patches: bool = True):
    definition = {
        "source": {"kind": "url", "location": LOCATION, "sha256": "0" * 64},
        "configure_flags": [],
        "patches": [{"name": "fix.patch", "diff": "--- a/x\n+++ b/x\n", "strip": 1}]
        if patches
        else [],
        "cflags": None,
    }
    return PgBuildFactory(source="build", version="17", definition=definition)


def host_with(isolation: dict = CGROUPS, **config: object) -> Host:
    """A host whose agent registered this local config (as `agent_register` reports it)."""
    allows = host_allows(AgentConfig(**config))  # type: ignore[arg-type]
    return HostFactory(capabilities={"allows": allows, "isolation": isolation})


def test_registration_keeps_what_the_agent_s_config_allows_and_its_isolation():
    host = HostFactory(name="reg-host")
    allows = host_allows(AgentConfig(allow_source_builds=True, build_sources=[SOURCE]))
    data = {"facts": {}, "installs": [], "storage": {}, "catalogues": {}}
    services.agent_record_event(
        {
            "version": 1, "run_id": None, "token": None, "agent": host.name, "seq": 1,
            "ts": "2026-11-28T12:00:00+00:00", "type": "agent_register",
            "data": {**data, "allows": allows, "isolation": CGROUPS},
        }
    )  # fmt: skip

    host.refresh_from_db()
    assert host.capabilities == {"allows": allows, "isolation": CGROUPS}
    assert allows["build_sources"] == [SOURCE] and not allows["allow_user_patches"]


def review_page(user, experiment) -> str:
    signed_in = Client()
    signed_in.force_login(user)
    return signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()


def test_review_refuses_a_source_build_on_a_host_that_builds_nothing_naming_the_variable(user):
    experiment = ExperimentFactory(hosts=[host_with()], builds=[patched_build()], created_by=user)

    page = review_page(user, experiment)

    assert "Not ready to start" in page and "Ready to start</h2>" not in page.replace("Not ", "")
    assert "BENCHLAB_AGENT_BUILD_SOURCES" in page and "--build-source" in page
    assert 'data-field="builds"' in page
    assert ">Start</button>" not in page


def test_the_api_refuses_patches_on_a_host_that_does_not_apply_them(api_client, user):
    host = host_with(allow_source_builds=True, build_sources=[SOURCE])
    experiment = ExperimentFactory(hosts=[host], builds=[patched_build()], created_by=user)

    answer = api_client.post(f"/api/experiments/{experiment.pk}/start/")

    assert answer.status_code == 400, answer.json()
    error = answer.json()["error"]
    assert "builds" in error["fields"]
    assert "BENCHLAB_AGENT_ALLOW_PATCHES=1" in str(error)
    assert "--allow-user-patches" in str(error)
    assert not experiment.runs.exists()


def test_a_host_without_cgroups_refuses_patches_whatever_its_config_allows(api_client, user):
    no_cgroups = {"cgroups": None, "problem": "no writable cgroup hierarchy"}
    host = host_with(
        no_cgroups, allow_source_builds=True, build_sources=[SOURCE], allow_user_patches=True
    )
    experiment = ExperimentFactory(hosts=[host], builds=[patched_build()], created_by=user)

    answer = api_client.post(f"/api/experiments/{experiment.pk}/start/")

    assert answer.status_code == 400
    assert "no writable cgroup hierarchy" in str(answer.json())


def test_a_host_that_allows_the_build_and_its_patches_reads_ready_to_start(user):
    host = host_with(allow_source_builds=True, build_sources=[SOURCE], allow_user_patches=True)
    experiment = ExperimentFactory(hosts=[host], builds=[patched_build()], created_by=user)

    page = review_page(user, experiment)

    assert "<h2>Ready to start</h2>" in page and "Not ready" not in page
    assert ">Start</button>" in page


def test_a_client_host_no_agent_ever_ran_on_is_refused_naming_client_host(api_client, user):
    missing = HostFactory(name="client-z", last_seen=None)
    experiment = ExperimentFactory(client_host=missing, created_by=user)

    answer = api_client.post(f"/api/experiments/{experiment.pk}/start/")
    page = review_page(user, experiment)

    assert answer.status_code == 400
    assert "client_host" in answer.json()["error"]["fields"]
    assert "python -m agents worker --name client-z" in page
    assert 'data-field="client_host"' in page


def imported_host() -> Host:
    summary = captured("pg16")
    user = UserFactory()
    pgbench_import(user, [UploadedOutput("a.txt", summary)], ImportDetails(host_name="old-box"))
    return Host.objects.get(name="imported: old-box")


def test_an_imported_host_is_marked_and_has_no_approve_button():
    host = imported_host()
    staff = Client()
    staff.force_login(UserFactory(is_staff=True, is_superuser=True))

    page = staff.get(reverse("host-list")).content.decode()

    assert host.is_imported
    assert "data-imported" in page
    assert reverse("host-approve", args=[host.pk]) not in page
    approve = staff.post(reverse("host-approve", args=[host.pk]))
    host.refresh_from_db()
    assert host.enrollment != Host.Enrollment.APPROVED, approve


def test_an_imported_host_is_not_counted_by_presets_nor_offered_by_the_schedule_form(user):
    host = imported_host()
    Host.objects.filter(pk=host.pk).update(enrollment=Host.Enrollment.APPROVED)
    agent = HostFactory(name="only-agent")
    presets.load_presets()
    signed_in = Client()
    signed_in.force_login(user)

    for preset in presets.PRESETS:
        assert presets.form_initial(preset)["hosts"] == [agent.pk], preset.key
    page = signed_in.get(reverse("schedule")).content.decode()

    assert 'data-host="only-agent"' in page
    assert "imported: old-box" not in page
