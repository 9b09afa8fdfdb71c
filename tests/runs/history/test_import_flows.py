"""Imports through the form and the API: nine 9.2 outputs with derived latency and labels
of their own, duplicates flagged, no re-run of an import, and imported objects kept out
of scheduling."""

import re

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runs.forms.experiments import ScheduleForm
from runs.forms.history import SeriesForm
from runs.models import Experiment, Result, Run
from runs.views.content.context import run_label
from tests.agents.pgbench.captures import FIXTURES
from tests.runs.factories import ConfigProfileFactory, ExperimentFactory, PgBuildFactory

PG92 = sorted((FIXTURES / "pg92").glob("*.log"))


def as_api_files(paths: list) -> list[dict[str, str]]:
    return [{"name": path.name, "content": path.read_text()} for path in paths]


def stated(text: str, pattern: str) -> float:
    match = re.search(pattern, text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


def test_nine_92_outputs_import_with_derived_latency_and_labels_naming_their_files(api_client):
    response = api_client.post("/api/imports/", {"files": as_api_files(PG92)}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert body["refused"] == [] and body["duplicates"] == []
    runs = Run.objects.filter(pk__in=body["runs"]).select_related("provenance")
    assert len({run_label(run) for run in runs}) == 9
    for run in runs:
        assert run.provenance.file_name in run_label(run)
        text = next(p for p in PG92 if p.name == run.provenance.file_name).read_text()
        clients = stated(text, r"^number of clients: (\d+)$")
        tps = stated(text, r"^tps = ([\d.]+) \(excluding")
        (point,) = api_client.get(f"/api/runs/{run.pk}/results/").json()["results"]
        assert point["tps"] == tps
        assert point["latency_avg_ms"] == 1000 * clients / tps
        assert point["latency_derived"] is True
        assert run.build.version == "unknown"  # 9.2 prints no version
        assert run.workload.scripts == [{"builtin": "tpcb-like", "weight": 1}]


def test_the_run_page_marks_a_derived_latency_and_not_a_printed_one(client, user):
    client.force_login(user)
    printed = (FIXTURES / "pg16" / "run_t200.stdout").read_bytes()
    client.post(
        reverse("import"),
        {"outputs": [SimpleUploadedFile("old.log", PG92[0].read_bytes())]},
    )
    client.post(reverse("import"), {"outputs": [SimpleUploadedFile("new.log", printed)]})

    old = Run.objects.get(provenance__file_name="old.log")
    new = Run.objects.get(provenance__file_name="new.log")
    old_page = client.get(reverse("run-detail", args=[old.pk])).content.decode()
    new_page = client.get(reverse("run-detail", args=[new.pk])).content.decode()

    latency = re.search(r'<td class="num" data-col="latency"[^>]*>(.*?)</td>', old_page, re.S)
    assert "derived" in latency.group(0)
    assert "derived" not in re.search(r'data-col="latency"[^>]*>(.*?)</td>', new_page).group(1)
    assert new.build.version == "16.15"  # read from "pgbench (16.15)"


def test_a_second_import_of_the_same_output_is_flagged_with_the_first_run(api_client, client, user):
    files = as_api_files(PG92[:1])
    first = api_client.post("/api/imports/", {"files": files}, format="json").json()
    again = api_client.post(
        "/api/imports/", {"files": [{**files[0], "name": "copy.log"}]}, format="json"
    ).json()

    (first_run,), (second_run,) = first["runs"], again["runs"]
    assert first["duplicates"] == []
    (duplicate,) = again["duplicates"]
    assert duplicate.startswith(f"copy.log: same output as run {first_run} ({PG92[0].name}, ")
    detail = api_client.get(f"/api/runs/{second_run}/").json()
    assert detail["provenance"]["same_output_as"] == [first_run]
    assert detail["provenance"]["file_name"] == "copy.log"
    client.force_login(user)
    page = client.get(reverse("run-detail", args=[second_run])).content.decode()
    notice = page.split('id="same-output"')[1].split("</p>")[0]
    assert f"run #{first_run}</a> ({PG92[0].name})" in notice


def test_the_import_page_warns_of_an_output_imported_before(client, user):
    client.force_login(user)
    upload = {"outputs": [SimpleUploadedFile("a.log", PG92[0].read_bytes())]}
    client.post(reverse("import"), upload)
    again = {"outputs": [SimpleUploadedFile("b.log", PG92[0].read_bytes())]}

    page = client.post(reverse("import"), again, follow=True).content.decode()

    first = Run.objects.get(provenance__file_name="a.log")
    assert f"Imported again: b.log: same output as run {first.pk} (a.log, " in page


def test_rerun_of_an_import_is_a_409_in_the_api_and_a_message_on_the_page(api_client, client, user):
    (run_id,) = api_client.post(
        "/api/imports/", {"files": as_api_files(PG92[:1])}, format="json"
    ).json()["runs"]

    answer = api_client.post(f"/api/runs/{run_id}/rerun/")
    client.force_login(user)
    page = client.post(reverse("run-rerun", args=[run_id]), follow=True)

    assert answer.status_code == 409, answer.content
    expected = f"run {run_id} was imported from {PG92[0].name}: there is no job to run again"
    assert answer.json()["error"]["message"].startswith(expected)
    assert page.status_code == 200
    assert expected in page.content.decode()
    assert Run.objects.count() == 1
    assert reverse("run-rerun", args=[run_id]) not in page.content.decode()  # no button


def test_a_16_output_with_a_summary_and_no_tps_is_refused_for_what_it_holds(api_client):
    base = FIXTURES / "pg16" / "run_err_div0"
    content = base.with_suffix(".stdout").read_text() + base.with_suffix(".stderr").read_text()

    response = api_client.post(
        "/api/imports/", {"files": [{"name": "div0.log", "content": content}]}, format="json"
    )

    assert response.status_code == 400
    (message,) = response.json()["error"]["fields"]["files"]
    assert "summary shows 0 of 20 transactions processed and no 'tps =' line" in message


def test_imported_objects_are_not_offered_to_schedule_and_refused_by_the_api(
    api_client, experiment_payload
):
    measured_build, measured_config = PgBuildFactory(), ConfigProfileFactory()
    (run_id,) = api_client.post(
        "/api/imports/", {"files": as_api_files(PG92[:1])}, format="json"
    ).json()["runs"]
    imported = Run.objects.get(pk=run_id)

    form = ScheduleForm()
    assert measured_build in form.fields["builds"].queryset
    assert measured_config in form.fields["config_profiles"].queryset
    assert imported.build not in form.fields["builds"].queryset
    assert imported.config_profile not in form.fields["config_profiles"].queryset
    assert imported.workload not in form.fields["workloads"].queryset
    refused = api_client.post(
        "/api/experiments/",
        experiment_payload(workloads=[imported.workload_id]),
        format="json",
    )
    assert refused.status_code == 400, refused.content
    (message,) = refused.json()["error"]["fields"]["workloads"]
    assert "came from an import of pgbench outputs" in message


def test_a_series_cannot_template_an_experiment_of_imports(api_client):
    measured = ExperimentFactory()
    api_client.post("/api/imports/", {"files": as_api_files(PG92[:1])}, format="json")
    imports = Experiment.objects.get(runs__provenance__isnull=False)

    choices = SeriesForm().fields["template"].queryset
    refused = api_client.post(
        "/api/series/",
        {"name": "nightly", "template": imports.pk, "schedule": "30 2 * * *"},
        format="json",
    )

    assert measured in choices and imports not in choices
    assert refused.status_code == 400
    assert "holds imported runs" in str(refused.json()["error"]["fields"]["template"])
    assert Result.objects.filter(run__experiment=imports).count() == 1
