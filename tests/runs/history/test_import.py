"""Importing raw pgbench outputs: real captured outputs of several versions become runs."""

import re

import pytest
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from runs.models import Comparison, Provenance, Result, Run
from runs.services.history.import_description import parse_description
from runs.services.history.import_reading import UploadedOutput, parse_points
from runs.services.history.imports import ImportDetails, pgbench_import
from tests.agents.pgbench.captures import FIXTURES

VERSIONS = ["pg13", "pg14", "pg16", "pg18"]


def captured(version: str, scenario: str = "run_plain_T2_P1_r") -> bytes:
    """What a terminal shows: pgbench's stdout and stderr of one real run."""
    base = FIXTURES / version / scenario
    stderr = base.with_suffix(".stderr")
    return base.with_suffix(".stdout").read_bytes() + (
        stderr.read_bytes() if stderr.exists() else b""
    )


def stated(text: str, pattern: str) -> float:
    """A number as the file states it, read independently of the lab's parser."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, pattern
    return float(match.group(1))


@pytest.mark.django_db
def test_real_outputs_of_four_versions_import_with_the_numbers_the_files_state(user):
    files = {
        v: captured(v, "run_default_c4j2_T4_P1_r" if v == "pg13" else "run_plain_T2_P1_r")
        for v in VERSIONS
    }
    uploads = [UploadedOutput(f"{v}.txt", content) for v, content in files.items()]

    outcome = pgbench_import(user, uploads, ImportDetails(notes="from the 2023 write-up"))

    assert outcome.errors == []
    assert len(outcome.runs) == len(VERSIONS)
    for version, run in zip(VERSIONS, outcome.runs, strict=True):
        text = files[version].decode()
        point = Result.objects.get(run=run)
        assert point.tps == stated(text, r"^tps = ([\d.]+) \((?:without|excluding)")
        assert point.latency_avg_ms == stated(text, r"^latency average = ([\d.]+) ms")
        assert point.clients == stated(text, r"^number of clients: (\d+)")
        assert point.transactions == stated(
            text, r"^number of transactions actually processed: (\d+)"
        )
        assert run.status == Run.Status.SUCCEEDED
        # pgbench prints its version from 14 on; a 13 output says nothing of it.
        assert run.build.version.startswith(version[2:] if version != "pg13" else "unknown")
        provenance = Provenance.objects.get(run=run)
        assert provenance.file_name == f"{version}.txt"
        assert provenance.imported_by == user
        assert provenance.notes == "from the 2023 write-up"
        assert provenance.file_said["runs_in_file"] == 1


PG13_STATEMENTS = {
    "show": " server_version \n----------------\n 13.16\n(1 row)\n\n",
    "psql": "$ psql --version\npsql (PostgreSQL) 13.16\n",
    "line": "server_version: 13.16\n",
    "select": (
        "                               version\n"
        "---------------------------------------------------------------------\n"
        " PostgreSQL 13.16 on x86_64-pc-linux-gnu, compiled by gcc 12.2.0, 64-bit\n"
        "(1 row)\n\n"
    ),
}


@pytest.mark.django_db
def test_a_13_output_imports_with_the_version_its_file_states(user):
    summary = captured("pg13", "run_default_c4j2_T4_P1_r").decode()
    uploads = [
        UploadedOutput(f"{name}.txt", (stated + summary).encode())
        for name, stated in PG13_STATEMENTS.items()
    ]

    outcome = pgbench_import(user, uploads, ImportDetails())

    assert outcome.errors == []
    assert [run.build.version for run in outcome.runs] == ["13.16"] * len(PG13_STATEMENTS)


@pytest.mark.django_db
def test_a_13_output_stating_no_version_takes_the_one_given_with_the_batch(user):
    summary = captured("pg13", "run_default_c4j2_T4_P1_r")

    silent = pgbench_import(user, [UploadedOutput("a.txt", summary)], ImportDetails())
    given = pgbench_import(
        user, [UploadedOutput("b.txt", summary)], ImportDetails(pg_version="13.16")
    )

    assert silent.runs[0].build.version == "unknown"
    assert given.runs[0].build.version == "13.16"


@pytest.mark.django_db
def test_a_bad_file_is_reported_by_name_and_line_and_the_rest_of_the_batch_imports(user):
    good = captured("pg16")
    broken = good.replace(b"latency average = ", b"latency average = fast", 1)
    lines = broken.decode().split("\n")
    line_no = next(i for i, line in enumerate(lines, 1) if line.startswith("latency average"))
    uploads = [
        UploadedOutput("first.log", good),
        UploadedOutput("broken.log", broken),
        UploadedOutput("last.log", captured("pg18")),
    ]

    outcome = pgbench_import(user, uploads, ImportDetails())

    assert [run.provenance.file_name for run in outcome.runs] == ["first.log", "last.log"]
    assert len(outcome.errors) == 1
    assert outcome.errors[0].startswith(f"broken.log: line {line_no}: ")
    assert "latency average = fast" in outcome.errors[0]


def test_a_sweep_written_to_one_log_becomes_one_point_per_pgbench_run():
    runs = [captured("pg17", name) for name in ("run_plain_T2_P1_r", "run_t200", "run_connect_C")]

    points = parse_points(UploadedOutput("sweep.log", b"".join(runs)))

    assert [p["tps"] for p in points] == [
        stated(run.decode(), r"^tps = ([\d.]+) \((?:without|including reconnection)")
        for run in runs
    ]
    assert [p["clients"] for p in points] == [
        stated(run.decode(), r"^number of clients: (\d+)") for run in runs
    ]


@pytest.mark.django_db
def test_the_import_page_takes_several_files_and_lists_the_refused_one(client, user):
    client.force_login(user)
    files = [
        ("a.log", captured("pg15")),
        ("notes.txt", b"this is not pgbench output\n"),
    ]
    response = client.post(
        reverse("import"),
        {
            "outputs": [SimpleUploadedFile(name, content) for name, content in files],
            "host_name": "old-laptop",
            "pg_version": "15.3",
        },
        follow=True,
    )

    assert response.status_code == 200
    page = response.content.decode()
    assert "Imported 1 of 2 files" in page
    assert "Not imported: notes.txt: lines 1-2: " in page
    run = Run.objects.get(provenance__file_name="a.log")
    assert run.host.name == "imported: old-laptop"
    assert run.build.version == "15.3"
    run_page = client.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert run.provenance.sha256 in run_page
    assert "imported by" in run_page
    assert "reproduce.sh" not in run_page


def test_the_api_imports_a_batch_and_names_the_refused_file(api_client):
    files = [
        {"name": "pg18.txt", "content": captured("pg18").decode()},
        {"name": "empty.txt", "content": "\n"},
    ]

    response = api_client.post("/api/imports/", {"files": files}, format="json")

    assert response.status_code == 201, response.content
    body = response.json()
    assert len(body["runs"]) == 1
    assert body["refused"] == [body["refused"][0]]
    assert body["refused"][0].startswith("empty.txt: lines 1-2: ")
    run = api_client.get(f"/api/runs/{body['runs'][0]}/").json()
    assert run["status"] == "succeeded"


def test_the_api_answers_400_naming_every_file_when_none_imports(api_client):
    files = [{"name": "a.txt", "content": "hello\n"}, {"name": "b.txt", "content": "x\n"}]

    response = api_client.post("/api/imports/", {"files": files}, format="json")

    assert response.status_code == 400
    fields = response.json()["error"]["fields"]
    assert [message.split(":")[0] for message in fields["files"]] == ["a.txt", "b.txt"]


@pytest.mark.django_db
def test_an_imported_run_compares_with_a_measured_one_with_the_notes_of_both(client, user):
    from runs.models import Comparison
    from runs.services.history.series import note_add
    from tests.runs.pages.conftest import finished_run

    client.force_login(user)
    measured = finished_run([(2, 1, 1500.0, 1.2), (2, 2, 1510.0, 1.2)])
    imported = pgbench_import(
        user, [UploadedOutput("pg16.txt", captured("pg16"))], ImportDetails()
    ).runs[0]
    note_add(user, "the 2023 laptop", run=imported)
    note_add(user, "kernel 6.8", host_id=measured.host_id)
    comparison = Comparison.objects.create(name="then and now", baseline=measured)
    comparison.runs.set([measured, imported])

    page = client.get(reverse("comparison-detail", args=[comparison.pk]))
    exported = client.get(reverse("comparison-export", args=[comparison.pk, "json"]))

    assert page.status_code == 200
    text = page.content.decode()
    assert "the 2023 laptop" in text and "kernel 6.8" in text
    assert exported.status_code == 200
    tps = stated(captured("pg16").decode(), r"^tps = ([\d.]+) \(without")
    assert str(tps) in exported.content.decode()


@pytest.mark.django_db
def test_skipped_and_late_transactions_are_kept_and_shown_as_pgbench_counted_them(client, user):
    text = captured("pg16", "log_skipped_R20000_L1_t300").decode()
    upload = UploadedOutput("rate-limited.txt", text.encode())

    outcome = pgbench_import(user, [upload], ImportDetails())

    point = Result.objects.get(run=outcome.runs[0])
    assert point.skipped == stated(text, r"^number of transactions skipped: (\d+)")
    assert point.late == stated(text, r"^number of transactions above the [\d.]+ ms .*: (\d+)/")
    assert point.latency_limit_ms == stated(text, r"above the ([\d.]+) ms latency limit")
    assert point.schedule_lag_avg_ms == stated(text, r"^rate limit schedule lag: avg ([\d.]+)")
    client.force_login(user)
    page = client.get(reverse("run-detail", args=[outcome.runs[0].pk])).content.decode()
    assert "skipped or late transactions" in page
    # pgbench's own shares: 295 of 600 scheduled (49.167 %), 77 of 305 that ran (25.246 %).
    assert "295 skipped (49.2 % of those scheduled)" in page
    assert "77 of 305 over the 1 ms latency limit (25.2 %)" in page


@pytest.mark.django_db
def test_preset_2_comes_back_as_its_3_x_3_table_from_nine_9_2_outputs_described_by_name(
    client, user
):
    devices, methods = ("sas", "ssd", "ram"), ("fsync", "fdatasync", "open_sync")
    originals = sorted((FIXTURES / "pg92").glob("*.log"))
    names = [f"{device}-{method}.log" for device in devices for method in methods]
    describe = "\n".join(
        [f"{device}-*: storage={device.upper()}" for device in devices]
        + [f"*-{method}.log: wal_sync_method={method}" for method in methods]
    )
    client.force_login(user)
    response = client.post(
        reverse("import"),
        {
            "outputs": [
                SimpleUploadedFile(name, path.read_bytes())
                for name, path in zip(names, originals, strict=True)
            ],
            "describe": describe,
        },
        follow=True,
    )
    assert "Imported 9 of 9 files" in response.content.decode()

    runs = list(Run.objects.filter(provenance__isnull=False).order_by("pk"))
    assert [(run.storage_data, run.config_profile.settings) for run in runs] == [
        (device.upper(), {"wal_sync_method": method}) for device in devices for method in methods
    ]
    comparison = Comparison.objects.create(name="preset 2", baseline=runs[0])
    comparison.runs.set(runs)
    page = client.get(reverse("comparison-detail", args=[comparison.pk])).content.decode()
    table = re.search(r'<table class="pivot-table" id="pivot-tps".*?</table>', page, re.S)[0]
    header = re.findall(r'<th class="num">([^<]*)</th>', table)
    assert header == list(methods), "a column per wal_sync_method"
    rows = re.findall(r'<tr><th scope="row">([^<]*)</th>(.*?)</tr>', table, re.S)
    assert [label.split(" · ")[0] for label, _cells in rows] == [d.upper() for d in devices]
    for (_label, cells), device in zip(rows, devices, strict=True):
        shown = re.findall(r"<strong>([\d,.]+)</strong>", cells)
        expected = [
            Result.objects.get(run__provenance__file_name=f"{device}-{method}.log").tps
            for method in methods
        ]
        assert shown == [f"{tps:,.1f}" for tps in expected]
    # Nothing states checkpoint_timeout for these files: no warning assumes its default.
    assert "window shorter than checkpoint_timeout" not in page


def test_a_description_line_that_cannot_be_read_is_refused_before_anything_imports(
    api_client,
):
    files = [{"name": "pg18.txt", "content": captured("pg18").decode()}]
    response = api_client.post(
        "/api/imports/", {"files": files, "describe": "*: storage"}, format="json"
    )
    assert response.status_code == 400
    assert "`storage` needs a value" in response.json()["error"]["fields"]["describe"][0]
    assert not Run.objects.exists()


@pytest.mark.django_db
def test_long_stated_settings_that_differ_only_past_the_name_length_get_their_own_profiles(user):
    long_value = "x" * 120
    describe = "\n".join(
        f"{name}: search_path={long_value}, work_mem={mem}"
        for name, mem in (("a.txt", "1MB"), ("b.txt", "2MB"))
    )
    uploads = [UploadedOutput(name, captured("pg16")) for name in ("a.txt", "b.txt")]
    outcome = pgbench_import(user, uploads, ImportDetails(description=parse_description(describe)))
    first, second = (run.config_profile for run in outcome.runs)
    assert first.pk != second.pk
    assert (first.settings["work_mem"], second.settings["work_mem"]) == ("1MB", "2MB")
