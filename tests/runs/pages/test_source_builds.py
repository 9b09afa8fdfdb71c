"""Source builds in the lab: defined through the API and the builds page, carried whole in
each job spec, their build record and compile-time settings kept and compared."""

import hashlib
import io
import os
import subprocess
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from agents.contract.builds.definition import check_build_definition
from agents.contract.builds.source_tree import UNPACKED_LIMIT_BYTES
from agents.contract.wire import source_upload_key
from runs import services
from runs.analysis.compare import differences
from runs.models import PgBuild, Run, SourceUpload
from runs.presets import find, load_presets
from runs.presets.definitions import BUFFER_PARTITIONS_256_PATCH
from runs.services.experiments import build_job_spec, experiment_cells
from tests.runs import events
from tests.runs.factories import ExperimentFactory, PgBuildFactory, RunFactory, WorkloadFactory
from tests.runs.pages.conftest import finished_run
from tests.source_builds import Zeros, sources_dir, tarball

pytestmark = pytest.mark.django_db

PATCH = "--- a/x.h\n+++ b/x.h\n@@ -1 +1 @@\n-a\n+b\n"
DEFINITION = {
    "source": {"kind": "url", "location": "https://ftp.postgresql.org/pub/source/v14.3/x.tar.bz2"},
    "configure_flags": ["--with-blocksize=16"],
    "patches": [{"name": "partitions", "diff": PATCH, "strip": 1}],
}


def source_build(**fields: object) -> PgBuild:
    values = {"version": "14", "source": "build", "definition": {**DEFINITION, "cflags": None}}
    return PgBuildFactory(**{**values, **fields})


def build_record(failed_step: str | None = None) -> dict:
    return {
        "key": "abc123",
        "definition": {**DEFINITION, "source": {**DEFINITION["source"], "ref": None}},
        "source_digest": "d" * 64,
        "compiler": "cc (Debian 12.2.0) 12.2.0",
        "patches": [{"name": "partitions", "sha256": "e" * 64}],
        "reused": False,
        "seconds": 321.5,
        "failed_step": failed_step,
        "log": "$ ./configure\nchecking for gcc... gcc\n$ make\nlwlock.c:1: error: boom\n",
    }


def test_a_source_build_is_created_through_the_api(api_client):
    payload = {"name": "14.3 16k", "version": "14", "source": "build", "definition": DEFINITION}
    response = api_client.post("/api/builds/", payload, format="json")

    assert response.status_code == 201, response.json()
    stored = PgBuild.objects.get(name="14.3 16k").definition
    assert stored["configure_flags"] == ["--with-blocksize=16"] and stored["cflags"] is None


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ({"configure_flags": ["--prefix=/usr"]}, "configure_flags[0]"),
        ({"patches": [{"name": "p", "diff": "no diff here", "strip": 1}]}, "patches[0].diff"),
        ({"source": {"kind": "ftp", "location": "x"}}, "source.kind"),
        ({"cflags": "-O2 -wrapper /bin/sh,-c,touch CANARY"}, "cflags"),
        ({"configure_flags": ["--with-includes=/tmp/evil"]}, "configure_flags[0]"),
        ({"configure_flags": ["CC=/tmp/evil-cc"]}, "configure_flags[0]"),
    ],
)
def test_a_bad_definition_answers_400_naming_its_part(api_client, change: dict, named: str):
    payload = {"name": "b", "version": "14", "source": "build", "definition": DEFINITION | change}
    response = api_client.post("/api/builds/", payload, format="json")

    assert response.status_code == 400
    assert response.json()["error"]["fields"]["definition"][0].startswith(f"{named}: ")


def test_a_stored_build_with_refused_cflags_is_not_scheduled(api_client, experiment_payload):
    """A build saved before the allow-list (or written around the API) is caught when an
    experiment is scheduled: 400 naming the field, nothing queued."""
    build = source_build(definition={**DEFINITION, "cflags": "-wrapper /bin/sh,-c,touch CANARY"})
    response = api_client.post(
        "/api/experiments/", experiment_payload(builds=[build.pk]), format="json"
    )

    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error["fields"]) == ["postgres.build.cflags"]
    assert "-wrapper is refused: it makes the compiler run or load another program" in str(
        error["fields"]
    )
    assert not Run.objects.exists()


def test_a_definition_on_a_prebuilt_build_is_refused(api_client):
    payload = {"name": "b", "version": "16", "source": "prebuilt", "definition": DEFINITION}
    response = api_client.post("/api/builds/", payload, format="json")
    assert response.status_code == 400
    assert "definition" in response.json()["error"]["fields"]


def test_the_builds_page_saves_a_definition_and_shows_its_errors(signed_in):
    form = {"name": "13 from source", "version": "13", "source": "build"}
    bad = signed_in.post(reverse("build-list"), {**form, "definition": '{"source": {}}'})
    assert "source.kind: must be one of url, path, git" in bad.content.decode()
    good = signed_in.post(
        reverse("build-list"), {**form, "definition": '{"source": {"kind": "path", '
        '"location": "/srv/postgresql-13.16.tar.bz2"}}'}
    )  # fmt: skip
    assert good.status_code == 302
    assert PgBuild.objects.get(name="13 from source").definition["source"]["kind"] == "path"
    listing = signed_in.get(reverse("build-list")).content.decode()
    assert "/srv/postgresql-13.16.tar.bz2" in listing


def test_each_job_spec_carries_the_whole_build_definition():
    experiment = ExperimentFactory()
    experiment.builds.set([source_build()])
    spec = build_job_spec(experiment, experiment_cells(experiment)[0])
    assert spec["postgres"]["source"] == "build"
    assert spec["postgres"]["build"]["patches"][0]["diff"] == PATCH


def test_an_option_the_builds_pgbench_lacks_is_refused_before_queueing(
    api_client, experiment_payload
):
    workload = WorkloadFactory(max_tries=3)
    payload = experiment_payload(builds=[source_build().pk], workloads=[workload.pk])
    response = api_client.post("/api/experiments/", payload, format="json")

    assert response.status_code == 400
    error = response.json()["error"]
    assert list(error["fields"]) == ["workload.max_tries"]
    assert "it came in 15" in error["message"]


def test_the_result_keeps_the_build_record_and_compiled_settings():
    run = RunFactory(status=Run.Status.RUNNING, build=source_build())
    result = {
        "version": 1, "run_id": str(run.pk), "status": "failed",
        "error": {"code": "build_failed", "category": "user", "field": "postgres.build",
                  "message": "source build failed at make"},
        "started_at": "2026-01-01T00:00:00+00:00", "finished_at": "2026-01-01T00:05:00+00:00",
        "build": build_record("make"), "points": [],
        "settings": {"requested": {}, "effective": [], "warnings": [],
                     "compiled": {"block_size": "16384"}},
    }  # fmt: skip
    assert services.run_record_event(events.run_event(run, 1, "result", result))
    run.refresh_from_db()
    assert run.build_record["failed_step"] == "make"
    assert run.compiled_settings == {"block_size": "16384"}


def test_the_run_page_shows_a_failed_builds_log_tail_and_links_the_whole_log(signed_in):
    run = finished_run([], build=source_build(), build_record=build_record("make"))
    page = signed_in.get(reverse("run-detail", args=[run.pk])).content.decode()
    assert "failed at make" in page and "lwlock.c:1: error: boom" in page
    log = signed_in.get(reverse("run-build-log", args=[run.pk]))
    assert log["Content-Type"].startswith("text/plain")
    assert log.content.decode().startswith("$ ./configure")


def test_what_differs_shows_the_build_and_its_compile_time_settings(signed_in):
    points = [(2, 1, 100.0, 20.0)]
    built = finished_run(
        points, build=source_build(), build_record=build_record(),
        compiled_settings={"block_size": "16384", "wal_block_size": "16384"},
    )  # fmt: skip
    prebuilt = finished_run(
        points, compiled_settings={"block_size": "8192", "wal_block_size": "8192"}
    )
    keys = dict(differences([built, prebuilt]))
    assert keys["compiled.block_size"] == ["16384", "8192"]
    assert keys["build.configure_flags"] == ["--with-blocksize=16", None]
    assert keys["build.patches.partitions"] == ["e" * 12, None]
    assert keys["build.compiler"][0].startswith("cc (Debian")

    response = signed_in.post(reverse("comparison-create"), {"runs": [built.pk, prebuilt.pk]})
    page = signed_in.get(response["Location"]).content.decode()
    assert "compiled.block_size" in page and "16384" in page and "8192" in page


def test_the_source_build_presets_load_valid_definitions_and_open_the_form(signed_in):
    load_presets()
    for key in ("source-build-partitions", "source-build-versions"):
        preset = find(key)
        for build in preset.source_builds:
            stored = PgBuild.objects.get(name=build.name)
            assert stored.source == "build"
            assert check_build_definition(stored.definition) == stored.definition
        page = signed_in.get(reverse("schedule"), {"preset": key}).content.decode()
        assert f'value="{preset.title}"' in page


def test_the_preset_5_patch_applies_to_a_real_release(tmp_path: Path):
    wanted = ["src/include/storage/lwlock.h", "src/backend/lib/dshash.c"]
    with tarfile.open(tarball(sources_dir(), "15")) as archive:
        members = [archive.getmember(f"postgresql-15.18/{name}") for name in wanted]
        archive.extractall(tmp_path, members=members, filter="data")
    applied = subprocess.run(
        ["patch", "-p1", "--dry-run", "--batch"],
        input=BUFFER_PARTITIONS_256_PATCH, cwd=tmp_path / "postgresql-15.18",
        capture_output=True, text=True,
    )  # fmt: skip
    assert applied.returncode == 0, applied.stdout + applied.stderr


def release_like_tarball(directory: Path, padding: int = 0) -> bytes:
    """A tiny tarball shaped like a release: `postgresql-0.0/configure` at its top (and
    `padding` incompressible bytes beside it)."""
    tree = directory / "postgresql-0.0"
    tree.mkdir(parents=True)
    (tree / "configure").write_text("#!/bin/sh\n")
    (tree / "padding").write_bytes(os.urandom(padding))
    path = directory / "release.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        archive.add(tree, arcname=tree.name)
    return path.read_bytes()


@pytest.fixture
def upload_dir(settings, tmp_path: Path) -> Path:
    settings.SOURCE_UPLOAD_DIR = tmp_path / "source-uploads"
    return settings.SOURCE_UPLOAD_DIR


@pytest.fixture
def uploads(lab_redis, upload_dir: Path) -> Iterator[list[str]]:
    """Digests of the uploads a test makes; their Redis copies are removed after it."""
    digests: list[str] = []
    yield digests
    if digests:
        lab_redis.delete(*(source_upload_key(digest) for digest in digests))


def post_upload(api_client, build: PgBuild, data: bytes, name: str = "pg.tar.gz"):
    return api_client.post(
        f"/api/builds/{build.pk}/source/",
        {"file": SimpleUploadedFile(name, data)},
        format="multipart",
    )


def test_a_tarball_uploaded_through_the_api_becomes_the_builds_source(
    api_client, user, tmp_path: Path, uploads: list[str], upload_dir: Path
):
    data = release_like_tarball(tmp_path)
    digest = hashlib.sha256(data).hexdigest()
    uploads.append(digest)
    build = source_build(created_by=user)
    response = post_upload(api_client, build, data)

    assert response.status_code == 200, response.json()
    assert response.json()["definition"]["source"] == {
        "kind": "upload", "location": digest, "ref": None
    }  # fmt: skip
    assert (upload_dir / f"{digest}.tar").read_bytes() == data
    assert SourceUpload.objects.get(build=build).size == len(data)
    # Kept outside Redis: the agents' copy is made when a job needs it.
    assert redis.Redis.from_url(settings.REDIS_URL).get(source_upload_key(digest)) is None


def test_a_job_that_builds_an_upload_finds_it_in_redis_with_an_expiry(
    api_client, user, tmp_path: Path, uploads: list[str], settings
):
    data = release_like_tarball(tmp_path)
    uploads.append(hashlib.sha256(data).hexdigest())
    build = source_build(created_by=user, version="15")
    post_upload(api_client, build, data)
    build.refresh_from_db()
    build.definition = {**build.definition, "patches": []}
    build.save()

    (run,) = services.experiment_start(ExperimentFactory(builds=[build]))

    key = source_upload_key(uploads[0])
    copy = redis.Redis.from_url(settings.REDIS_URL)
    assert copy.get(key) == data
    assert 0 < copy.ttl(key) <= settings.SOURCE_UPLOAD_READY_HOURS * 3600
    assert run.spec["postgres"]["build"]["source"]["location"] == uploads[0]


def test_an_upload_goes_with_its_build(
    api_client, user, tmp_path: Path, uploads: list[str], upload_dir: Path,
    django_capture_on_commit_callbacks,
):  # fmt: skip
    data = release_like_tarball(tmp_path)
    uploads.append(hashlib.sha256(data).hexdigest())
    first, second = source_build(created_by=user), source_build(created_by=user, name="again")
    post_upload(api_client, first, data)
    post_upload(api_client, second, data)  # the same tarball: one file
    kept = upload_dir / f"{uploads[0]}.tar"

    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.delete(f"/api/builds/{first.pk}/").status_code == 204
    assert kept.exists()  # the other build still uses it
    with django_capture_on_commit_callbacks(execute=True):
        assert api_client.delete(f"/api/builds/{second.pk}/").status_code == 204
    assert not kept.exists() and not SourceUpload.objects.exists()


def test_an_upload_over_the_size_cap_or_the_users_quota_answers_400(
    api_client, user, tmp_path: Path, uploads: list[str], settings
):
    settings.SOURCE_UPLOAD_QUOTA_MB = 1
    first = release_like_tarball(tmp_path / "a", padding=600_000)
    uploads.append(hashlib.sha256(first).hexdigest())
    assert post_upload(api_client, source_build(created_by=user), first).status_code == 200

    second = release_like_tarball(tmp_path / "b", padding=600_000)
    response = post_upload(api_client, source_build(created_by=user, name="b"), second)
    assert response.status_code == 400
    message = response.json()["error"]["fields"]["file"][0]
    assert "your uploads hold 0 MB of your 1 MB" in message and "delete a build" in message

    settings.SOURCE_UPLOAD_MAX_MB = 0
    response = post_upload(api_client, source_build(created_by=user, name="c"), first)
    assert response.status_code == 400
    assert "at most 0 MB" in response.json()["error"]["fields"]["file"][0]


def test_an_upload_the_agents_would_refuse_to_unpack_answers_400(
    api_client, user, tmp_path: Path, upload_dir: Path
):
    path = tmp_path / "escape.tar.gz"
    with tarfile.open(path, "w:gz") as archive:
        configure = tarfile.TarInfo("postgresql-0.0/configure")
        archive.addfile(configure, io.BytesIO())
        link = tarfile.TarInfo("postgresql-0.0/etc")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc"
        archive.addfile(link)
    response = post_upload(api_client, source_build(created_by=user), path.read_bytes())

    assert response.status_code == 400
    message = response.json()["error"]["fields"]["file"][0]
    assert message.startswith("agents would refuse this tarball: tarball member")
    assert "an absolute path" in message
    assert not upload_dir.exists() or not any(upload_dir.iterdir())


def test_a_gzip_bomb_upload_answers_400_without_unpacking_it(
    api_client, user, tmp_path: Path, upload_dir: Path
):
    path = tmp_path / "bomb.tar.gz"
    with tarfile.open(path, "w:gz", compresslevel=1) as archive:
        member = tarfile.TarInfo("postgresql-0.0/zeros")
        member.size = UNPACKED_LIMIT_BYTES + 1
        archive.addfile(member, io.BufferedReader(Zeros(member.size), 2**20))
    response = post_upload(api_client, source_build(created_by=user), path.read_bytes())

    assert response.status_code == 400
    assert "unpacks to more than 512 MB" in response.json()["error"]["fields"]["file"][0]


def test_an_upload_that_is_not_a_release_tarball_answers_400(api_client, user, upload_dir):
    response = post_upload(api_client, source_build(created_by=user), b"not a tarball", "x.txt")
    assert response.status_code == 400
    assert response.json()["error"]["fields"]["file"][0].startswith("not a readable tarball")


def test_the_builds_page_takes_an_upload_as_the_source(
    signed_in, tmp_path: Path, uploads: list[str], upload_dir: Path
):
    data = release_like_tarball(tmp_path)
    uploads.append(hashlib.sha256(data).hexdigest())
    form = {"name": "uploaded", "version": "14", "source": "build", "definition": ""}
    response = signed_in.post(
        reverse("build-list"), {**form, "source_tarball": SimpleUploadedFile("pg.tgz", data)}
    )
    assert response.status_code == 302
    build = PgBuild.objects.get(name="uploaded")
    assert build.definition["source"] == {"kind": "upload", "location": uploads[0], "ref": None}
    assert build.source_upload.sha256 == uploads[0]
    assert (upload_dir / f"{uploads[0]}.tar").exists()
