"""Source builds with real release tarballs, a real compiler and real jobs.

The first run on a machine compiles each definition once (about 6 minutes on 2
cores); later runs reuse the agent's cache, as a second job would.
"""

import fcntl
import hashlib
import json
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from agents.config import AgentConfig
from agents.contract.builds.definition import BuildDefinition
from agents.contract.errors import JobError
from agents.contract.settings.catalogue import Catalogue
from agents.contract.wire import source_upload_key
from agents.postgres.cluster.lifecycle import initdb_version_args
from agents.postgres.installs.build_steps import check_prerequisites, git_build_lacks
from agents.postgres.installs.source_build import build_key, builds_dir, ensure_build, fetch_source
from agents.postgres.osuser import OsUser
from tests.agents.jobs import run, small_spec
from tests.source_builds import (
    allowing_builds,
    allowing_patches,
    blocks16_definition,
    pg13_definition,
    sources_dir,
    tarball,
)


def agents_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agents", *args], capture_output=True, text=True, timeout=900
    )


@pytest.fixture(scope="module")
def sources() -> Path:
    return sources_dir()


@pytest.fixture
def build_config(config: AgentConfig, sources: Path) -> AgentConfig:
    """Builds from `sources`, with patches (preset 5's build has one)."""
    return allowing_patches(allowing_builds(config, sources))


def build_spec(definition: BuildDefinition, version: str, **overrides: object) -> dict:
    postgres = {"version": version, "source": "build", "build": definition}
    return small_spec(postgres=postgres, **overrides)


def test_a_16k_block_patched_build_runs_end_to_end(build_config: AgentConfig, sources: Path):
    spec = build_spec(blocks16_definition(sources), "15", sweep={"clients": [2]})
    result, events = run(spec, build_config)

    assert result["status"] == "succeeded", result["error"]
    assert result["install"]["source"] == "build"
    assert result["install"]["version"] == "15.18"
    compiled = result["settings"]["compiled"]
    assert (compiled["block_size"], compiled["wal_block_size"]) == ("16384", "16384")
    record = result["build"]
    assert record["patches"][0]["name"] == "buffer-partitions-256"
    assert record["seconds"] > 0 and "configure" in record["log"]
    assert result["points"][0]["tps"] > 0
    assert events.of_type("step")[0]["data"]["name"] == "build"
    own_catalogue = Path(result["install"]["bindir"]).parent / "catalogue-15.18.json"
    shared_buffers = Catalogue.from_json(own_catalogue.read_text()).settings["shared_buffers"]
    assert shared_buffers.unit == "16kB"  # not the unit of a default 15.18 build


def test_a_second_build_of_the_same_key_reuses_the_cache(
    build_config: AgentConfig, sources: Path, os_user: OsUser
):
    definition = blocks16_definition(sources)
    ensure_build(definition, build_config, os_user)  # built here or by an earlier test
    started = time.monotonic()
    install, record = ensure_build(definition, build_config, os_user)
    assert record["reused"] is True
    assert time.monotonic() - started < 30
    assert install.bindir == builds_dir(build_config.cache_dir) / record["key"] / "bin"


def test_two_jobs_never_build_one_key_at_once(
    build_config: AgentConfig, sources: Path, os_user: OsUser
):
    definition = blocks16_definition(sources)
    _, record = ensure_build(definition, build_config, os_user)
    lock_path = builds_dir(build_config.cache_dir) / f"{record['key']}.lock"
    finished = threading.Event()

    def second_job() -> None:
        ensure_build(definition, build_config, os_user)
        finished.set()

    with open(lock_path, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a first job building this key
        waiter = threading.Thread(target=second_job)
        waiter.start()
        assert not finished.wait(3), "the second job went on while the key was locked"
        fcntl.flock(lock, fcntl.LOCK_UN)
    waiter.join(60)
    assert finished.is_set()


def test_a_broken_patch_fails_at_the_patch_step_with_its_log(
    build_config: AgentConfig, sources: Path
):
    definition = blocks16_definition(sources)
    definition["patches"][0]["diff"] = definition["patches"][0]["diff"].replace(
        "#define NUM_BUFFER_PARTITIONS  128", "#define NO_SUCH_LINE  128"
    )
    result, _ = run(build_spec(definition, "15"), build_config)

    assert result["status"] == "failed"
    assert result["error"]["code"] == "build_failed"
    assert "at patch buffer-partitions-256" in result["error"]["message"]
    assert "FAILED" in result["error"]["message"]  # patch's own words, from the log tail
    assert result["build"]["failed_step"] == "patch buffer-partitions-256"
    assert not (builds_dir(build_config.cache_dir) / result["build"]["key"]).exists()


def test_a_source_the_agent_does_not_allow_is_refused_before_anything_runs(
    config: AgentConfig, sources: Path, tmp_path: Path
):
    elsewhere = tmp_path / "postgresql-15.18.tar.bz2"
    definition = blocks16_definition(sources)
    definition["source"]["location"] = str(elsewhere)
    allowing_builds(config, sources)
    result, events = run(build_spec(definition, "15"), config)

    assert result["error"]["code"] == "build_refused"
    assert result["error"]["field"] == "postgres.build.source.location"
    assert str(sources) in result["error"]["message"]
    assert result["install"] is None and result["steps"] == [] and not events.of_type("step")

    config.allow_source_builds = False
    definition = blocks16_definition(sources)
    result, _ = run(build_spec(definition, "15"), config)
    assert result["error"]["code"] == "build_refused"
    assert "allow_source_builds" in result["error"]["message"]


def test_a_path_outside_the_allowed_directory_is_refused(
    build_config: AgentConfig, sources: Path, os_user: OsUser
):
    definition = blocks16_definition(sources)
    definition["source"]["location"] = f"{sources}/../../../etc/passwd"
    with pytest.raises(JobError, match="does not build from"):
        ensure_build(definition, build_config, os_user)


def test_the_cache_key_changes_with_flags_patches_and_compiler(sources: Path):
    definition = blocks16_definition(sources)
    key = build_key(definition, "digest", "cc 12")
    assert build_key(definition, "digest", "cc 13") != key
    assert build_key(definition, "other", "cc 12") != key
    definition["configure_flags"] = definition["configure_flags"][:-1]
    assert build_key(definition, "digest", "cc 12") != key


def test_postgresql_13_from_source_runs_a_sweep(build_config: AgentConfig, sources: Path):
    spec = build_spec(pg13_definition(sources), "13", sweep={"clients": [1, 2]})
    result, _ = run(spec, build_config)

    assert result["status"] == "succeeded", result["error"]
    assert result["install"]["version"] == "13.16"
    assert [point["clients"] for point in result["points"]] == [1, 2]
    for point in result["points"]:
        assert point["tps"] > 0 and point["latency_avg_ms"] > 0
        samples = point["server_samples"]
        assert samples and all(s["wal_bytes"] > 0 for s in samples)
        assert all(isinstance(s["wait_events"], dict) for s in samples)
    assert result["settings"]["compiled"]["block_size"] == "8192"


def test_an_option_pgbench_13_lacks_is_refused_before_building(
    build_config: AgentConfig, sources: Path
):
    spec = build_spec(pg13_definition(sources), "13", workload={"max_tries": 2})
    result, events = run(spec, build_config)
    assert result["error"]["field"] == "workload.max_tries"
    assert "it came in 15" in result["error"]["message"]
    assert not events.of_type("step")


def test_a_version_that_is_not_what_the_source_builds_is_an_error(
    build_config: AgentConfig, sources: Path
):
    result, _ = run(build_spec(pg13_definition(sources), "14"), build_config)
    assert result["error"]["code"] == "version_unavailable"
    assert "builds PostgreSQL 13.16, not 14" in result["error"]["message"]


def test_initdb_options_follow_the_version() -> None:
    wal = Path("/srv/wal")
    assert initdb_version_args(130016, wal) == ["--auth-host=scram-sha-256", "--waldir", "/srv/wal"]
    assert initdb_version_args(90624, wal) == ["--auth-host=md5", "--xlogdir", "/srv/wal"]
    assert initdb_version_args(90624, None) == ["--auth-host=md5"]


@pytest.mark.cluster  # builds in a child process
def test_the_cli_builds_without_running_anything_and_lists_cached_builds(
    sources: Path, tmp_path: Path
):
    definition_file = tmp_path / "build.json"
    definition_file.write_text(json.dumps(blocks16_definition(sources)))
    allow = ["--allow-source-builds", "--build-source", str(sources), "--allow-user-patches"]
    built = agents_cli("build", str(definition_file), *allow)
    assert built.returncode == 0, built.stderr
    record = json.loads(built.stdout)
    assert record["install"]["version"] == "15.18" and "log" not in record
    assert "build 0%: fetching the source" in built.stderr

    listed = json.loads(agents_cli("installs").stdout)
    assert record["key"] in [build["key"] for build in listed["builds"]]

    refused = agents_cli("build", str(definition_file))
    assert refused.returncode == 2 and "allow_source_builds" in refused.stderr


def test_missing_programs_are_named_with_their_debian_packages(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, sources: Path
):
    for program in ("cc", "make", "perl", "patch"):  # a compiler, but no git
        (tmp_path / program).symlink_to(shutil.which(program))
    monkeypatch.setenv("PATH", str(tmp_path))
    definition = blocks16_definition(sources)
    check_prerequisites(definition)  # a release tarball needs no parser generators
    definition["source"] = {"kind": "git", "location": "/srv/postgresql.git", "ref": "REL_15_18"}
    with pytest.raises(JobError) as caught:
        check_prerequisites(definition)
    assert caught.value.code == "build_prerequisites"
    # bison and flex only once the checkout shows the commit lacks the generated parsers
    assert caught.value.message.endswith("apt-get install git")
    # What the agent says at its start when it may build from source.
    assert git_build_lacks() == ["bison", "flex"]


def test_tarballs_by_url_are_fetched_with_their_digest(sources: Path, tmp_path: Path):
    path = tarball(sources, "15")
    fetched, digest = fetch_source({"kind": "url", "location": path.as_uri()}, tmp_path, "")
    assert digest == hashlib.sha256(path.read_bytes()).hexdigest()
    assert fetched.stat().st_size == path.stat().st_size


@pytest.fixture
def uploaded_pg13(build_config: AgentConfig, sources: Path) -> Iterator[str]:
    """13.16's tarball as the lab keeps an upload (in Redis, by its sha256); removed after."""
    data = tarball(sources, "13").read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    client = redis.Redis.from_url(build_config.redis_url)
    client.set(source_upload_key(digest), data)
    yield digest
    client.delete(source_upload_key(digest))


def test_a_tarball_uploaded_to_the_lab_builds_and_runs(
    build_config: AgentConfig, sources: Path, uploaded_pg13: str
):
    definition = pg13_definition(sources)
    definition["source"] = {"kind": "upload", "location": uploaded_pg13, "ref": None}
    spec = build_spec(definition, "13", sweep={"clients": [1]})
    result, _ = run(spec, build_config)
    assert result["error"]["code"] == "build_refused"  # the agent has not allowed uploads

    build_config.build_sources.append("upload")
    result, _ = run(spec, build_config)
    assert result["status"] == "succeeded", result["error"]
    assert result["build"]["source_digest"] == uploaded_pg13
    assert result["install"]["version"] == "13.16"

    # An upload the lab no longer holds (it keeps one ready for its jobs a while): the
    # source was not fetched, not broken, so a later round may build it (build_interrupted).
    definition["source"]["location"] = "0" * 64
    result, _ = run(build_spec(definition, "13"), build_config)
    assert result["error"]["code"] == "build_interrupted"
    assert "failed at fetch: the lab holds no uploaded source" in result["error"]["message"]
