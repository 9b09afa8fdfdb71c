"""Trying a patch through the API (runs/tries.py): the battery's experiments, base and
patched builds from one git source, and the patch refused before anything is queued."""

import pytest

from runs.models import Experiment, PgBuild, Run
from runs.presets.battery import BATTERY, BATTERY_VERSION, battery_clients
from runs.tries import MAX_PATCH_BYTES
from tests.runs.factories import HostFactory

pytestmark = pytest.mark.django_db

PATCH = """\
--- a/src/backend/executor/execScan.c
+++ b/src/backend/executor/execScan.c
@@ -1,1 +1,2 @@
 /* execScan.c */
+/* a comment */
"""


@pytest.fixture
def host():
    return HostFactory(facts={"cpu": {"threads": 8}})


def body(host, **changes) -> dict:
    asked = {
        "host": host.name, "repository": "/srv/git/postgres.git", "base": "master",
        "version": "18", "patch": PATCH, "patch_name": "comment.patch", "duration_s": 2,
        "workloads": 2,
    }  # fmt: skip
    return {**asked, **changes}


def test_a_try_starts_one_experiment_per_battery_workload(api_client, lab_redis, host):
    answer = api_client.post("/api/tries/", body(host), format="json")
    assert answer.status_code == 201, answer.json()
    found = answer.json()
    assert found["battery"]["version"] == BATTERY_VERSION
    assert found["battery"]["clients"] == [1, 4, 8] == battery_clients(8)
    assert found["battery"]["workloads"] == [w["name"] for w in BATTERY[:2]], "what runs"
    experiments = [Experiment.objects.get(pk=e["id"]) for e in found["experiments"]]
    assert [e.workloads.get().name for e in experiments] == [w["name"] for w in BATTERY[:2]]
    for experiment in experiments:
        base, patched = experiment.builds.order_by("pk")
        assert base.definition["patches"] == []
        assert patched.definition["patches"] == [
            {"name": "comment.patch", "diff": PATCH, "strip": 1}
        ]
        assert base.definition["source"] == patched.definition["source"]
        assert (experiment.adaptive, experiment.cpu_profile, experiment.clients) == (
            True, True, [1, 4, 8]
        )  # fmt: skip
        assert experiment.runs.filter(status=Run.Status.QUEUED).count() == 2 * 3
        # One answer (the exit code) from two experiments: they share the 5 %.
        experiment.refresh_from_db()
        assert experiment.adaptive_state["shared_by"] == 2
        assert experiment.adaptive_state["looks"] == [3, 6, 10]
    assert PgBuild.objects.count() == 2


def test_a_head_ref_is_built_instead_of_a_patch(api_client, lab_redis, host):
    given = body(host, head="my-branch", workloads=1)
    del given["patch"]
    answer = api_client.post("/api/tries/", given, format="json")
    assert answer.status_code == 201, answer.json()
    refs = sorted(b.definition["source"]["ref"] for b in PgBuild.objects.all())
    assert refs == ["master", "my-branch"]


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        (
            {"patch": "--- a/../../etc/passwd\n+++ b/../../etc/passwd\n@@ -1 +1 @@\n-a\n+b\n"},
            "patch",
        ),
        ({"patch": "not a diff"}, "patch"),
        ({"patch": "x" * (MAX_PATCH_BYTES + 1)}, "patch"),
        ({"head": "other"}, "patch"),
        ({"base": "--upload-pack=evil"}, "source.ref"),
    ],
)
def test_a_bad_try_is_a_400_naming_the_field_and_queues_nothing(api_client, host, changes, field):
    answer = api_client.post("/api/tries/", body(host, **changes), format="json")
    assert answer.status_code == 400
    assert field in str(answer.json())
    assert not Experiment.objects.exists() and not PgBuild.objects.exists()
