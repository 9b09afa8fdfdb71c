"""What a lab user's build definition may not do on an agent, tried through the agent's own
build code on a small release-shaped tree (tests/source_builds.py): real tar, patch,
configure, make and cc, in seconds.

A patch is code (it can edit configure), so it is applied only where the agent's
local config allows user patches; CFLAGS that make the compiler run a program, a
tarball that unpacks to more than the limit, and a patch reaching through a
symlink are refused before they can run or write anything. A patch that adds a file
applies again on a later commit of its kept tree.
"""

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import psutil
import pytest
import redis

from agents.config import AgentConfig
from agents.contract.builds.source_tree import UNPACKED_LIMIT_BYTES
from agents.contract.errors import JobError
from agents.contract.wire import source_upload_key
from agents.postgres.installs.build_steps import BuildFailed
from agents.postgres.installs.source_build import builds_dir, ensure_build
from agents.postgres.osuser import OsUser
from tests.agents.jobs import run, small_spec
from tests.source_builds import (
    FAKE_PARTITIONS_PATCH,
    Zeros,
    allowing_builds,
    allowing_patches,
    fake_definition,
    fake_release,
    pack,
)

CONFIGURE_PATCH = """--- a/configure
+++ b/configure
@@ -1,2 +1,3 @@
 #!/bin/sh
+touch {canary}
 for arg in "$@"; do
"""


@pytest.fixture
def sources(storage_root: Path) -> Path:
    """The directory the agent builds from; its tarballs are readable by the OS user."""
    directory = storage_root / "sources"
    directory.mkdir()
    return directory


@pytest.fixture
def agent(config: AgentConfig, storage_root: Path, sources: Path) -> AgentConfig:
    """An agent with its own state directory that builds from `sources`, without patches."""
    config.state_dir = storage_root / "state"
    return allowing_builds(config, sources)


@pytest.fixture
def release(sources: Path, tmp_path: Path) -> Path:
    return pack(fake_release(tmp_path), sources / "postgresql-15.18.tar.gz")


@pytest.fixture
def canary(storage_root: Path) -> Path:
    """Where a command smuggled into a build would leave its mark (the build's OS user may
    write there, so a missing canary means the command never ran)."""
    directory = storage_root / "canary"
    directory.mkdir(mode=0o777)
    directory.chmod(0o777)
    return directory / "CANARY"


def leftovers(config: AgentConfig) -> list[str]:
    """What a refused build left in the agent's build cache (lock files aside)."""
    cache = builds_dir(config.cache_dir)
    found = cache.iterdir() if cache.exists() else iter(())
    return sorted(path.name for path in found if path.suffix != ".lock")


def test_a_patch_editing_configure_is_refused_where_user_patches_are_not_allowed(
    agent: AgentConfig, release: Path, canary: Path
):
    patch = {"name": "configure", "diff": CONFIGURE_PATCH.format(canary=canary), "strip": 1}
    definition = fake_definition(release, patches=[patch])
    spec = small_spec(postgres={"version": "15", "source": "build", "build": definition})
    result, events = run(spec, agent)

    assert result["error"]["code"] == "build_refused"
    assert result["error"]["field"] == "postgres.build.patches"
    assert "allow_user_patches" in result["error"]["message"]
    assert result["install"] is None and not events.of_type("step")
    assert not canary.exists() and leftovers(agent) == []


def test_an_allowed_patch_is_applied_and_cflags_reach_the_compiler(
    agent: AgentConfig, release: Path, os_user: OsUser
):
    patch = {"name": "partitions-256", "diff": FAKE_PARTITIONS_PATCH, "strip": 1}
    definition = fake_definition(release, patches=[patch], cflags="-O2 -DWAL_DEBUG -g")
    install, record = ensure_build(definition, allowing_patches(agent), os_user)

    assert "NUM_BUFFER_PARTITIONS=256" in install.postgres_version
    assert record["patches"][0]["name"] == "partitions-256" and record["failed_step"] is None
    assert "CFLAGS=-O2 -DWAL_DEBUG -g" in install.postgres_version
    assert "patch -p1 --unified" in record["log"]


def test_a_patch_to_configure_runs_where_allowed_but_only_inside_the_build_sandbox(
    agent: AgentConfig, release: Path, os_user: OsUser, canary: Path
):
    """An operator who enables patches accepts code: the patched configure runs, as the
    job's OS user in the build's sandbox, where the canary's directory (writable by that
    user on the host) is not there to write."""
    diff = CONFIGURE_PATCH.format(canary=f"{canary} && echo patched-configure-ran")
    patch = {"name": "configure", "diff": diff, "strip": 1}
    _install, record = ensure_build(
        fake_definition(release, patches=[patch]), allowing_patches(agent), os_user
    )

    assert "patched-configure-ran" not in record["log"]
    assert "touch: cannot touch" in record["log"]
    assert not canary.exists()


def test_a_finished_build_belongs_to_the_agent_and_is_read_only_to_the_jobs_user(
    agent: AgentConfig, release: Path, os_user: OsUser
):
    install, _record = ensure_build(fake_definition(release), agent, os_user)

    for path in [install.root, *install.root.rglob("*")]:
        info = path.lstat()
        assert (info.st_uid, info.st_gid) == (os.geteuid(), os.getegid()), path
        assert not info.st_mode & 0o022, path


def test_cflags_with_a_wrapper_are_refused_by_the_agent_before_anything_runs(
    agent: AgentConfig, release: Path, os_user: OsUser, canary: Path
):
    definition = fake_definition(release, cflags=f"-O2 -wrapper /bin/sh,-c,touch {canary}")
    with pytest.raises(JobError) as caught:
        ensure_build(definition, agent, os_user)  # as a caller skipping the spec check would
    assert caught.value.field == "postgres.build.cflags"
    assert "-wrapper is refused: it makes the compiler run or load another program" in str(
        caught.value.message
    )

    spec = small_spec(postgres={"version": "15", "source": "build", "build": definition})
    result, events = run(spec, agent)
    assert result["error"]["code"] == "invalid_spec"
    assert result["error"]["field"] == "postgres.build.cflags"
    assert not events.of_type("step") and not canary.exists() and leftovers(agent) == []


def test_a_patch_through_a_symlink_in_the_tree_is_not_applied(
    agent: AgentConfig, sources: Path, tmp_path: Path, os_user: OsUser
):
    tree = fake_release(tmp_path)
    (tree / "include").symlink_to("src/include")  # inside the tree, so the tarball is fine
    tarball = pack(tree, sources / "linked.tar.gz")
    patch = {"name": "linked", "diff": FAKE_PARTITIONS_PATCH.replace("src/include", "include")}
    definition = fake_definition(tarball, patches=[{**patch, "strip": 1}])

    with pytest.raises(BuildFailed) as caught:
        ensure_build(definition, allowing_patches(agent), os_user)
    assert "reached through the symlink include" in caught.value.message
    assert caught.value.step == "patch linked"
    assert leftovers(agent) == []


@pytest.fixture(scope="module")
def gzip_bomb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """About 1 MB of gzip that unpacks to a release tree plus 1 GiB of zeros."""
    root = tmp_path_factory.mktemp("bomb")
    tree = fake_release(root)
    bomb = root / "bomb.tar.gz"
    with tarfile.open(bomb, "w:gz", compresslevel=9) as archive:
        archive.add(tree, arcname=tree.name)
        member = tarfile.TarInfo(f"{tree.name}/zeros")
        member.size = 2**30
        archive.addfile(member, io.BufferedReader(Zeros(member.size), 2**20))
    return bomb


def test_a_gzip_bomb_is_refused_with_bounded_disk_use(
    agent: AgentConfig, gzip_bomb: Path, sources: Path, storage_root: Path, os_user: OsUser
):
    tarball = sources / "bomb.tar.gz"
    tarball.write_bytes(gzip_bomb.read_bytes())
    assert tarball.stat().st_size < 2 * 2**20

    with pytest.raises(BuildFailed) as caught:
        ensure_build(fake_definition(tarball), agent, os_user)
    assert caught.value.step == "fetch"
    assert f"unpacks to more than {UNPACKED_LIMIT_BYTES // 2**20} MB" in caught.value.message
    used = subprocess.run(
        ["du", "-sb", str(storage_root)], capture_output=True, text=True, check=True
    )
    assert int(used.stdout.split()[0]) < 8 * 2**20  # the bomb itself, no unpacked zeros
    assert leftovers(agent) == []


def test_the_cli_applies_patches_only_with_allow_user_patches(
    release: Path, sources: Path, storage_root: Path, tmp_path: Path, canary: Path
):
    patch = {"name": "configure", "diff": CONFIGURE_PATCH.format(canary=canary), "strip": 1}
    definition_file = tmp_path / "build.json"
    definition_file.write_text(json.dumps(fake_definition(release, patches=[patch])))
    state = ["--state-dir", str(storage_root / "cli-state")]
    allow = ["--allow-source-builds", "--build-source", str(sources), *state]
    refused = agents_cli("build", str(definition_file), *allow)
    assert refused.returncode == 2
    assert "--allow-user-patches" in refused.stderr and not canary.exists()

    built = agents_cli("build", str(definition_file), *allow, "--allow-user-patches")
    assert built.returncode == 0, built.stderr
    assert json.loads(built.stdout)["patches"][0]["name"] == "configure"
    assert not canary.exists()  # the patched configure ran in the build's sandbox


def agents_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "agents", *args], capture_output=True, text=True, timeout=120
    )


def test_an_upload_the_lab_made_ready_is_built_and_a_missing_one_is_named(
    agent: AgentConfig, release: Path, os_user: OsUser
):
    """The lab puts an upload in Redis with an expiry when it sends the job (runs.services.
    uploads.source_upload_ready); the agent builds it when it allows `upload`."""
    data = release.read_bytes()
    digest = hashlib.sha256(data).hexdigest()
    client = redis.Redis.from_url(agent.redis_url)
    client.set(source_upload_key(digest), data, ex=60)
    agent.build_sources.append("upload")
    source = {"kind": "upload", "location": digest, "ref": None}
    try:
        install, record = ensure_build(fake_definition(release, source=source), agent, os_user)
    finally:
        client.delete(source_upload_key(digest))
    assert record["source_digest"] == digest and install.version == "15.18"

    with pytest.raises(BuildFailed, match="queue the run again"):
        ensure_build(fake_definition(release, source=source, cflags="-O1"), agent, os_user)


def test_a_build_left_running_by_a_killed_agent_is_killed_by_the_next_build_of_its_key(
    agent: AgentConfig, release: Path, os_user: OsUser
):
    _install, record = ensure_build(fake_definition(release), agent, os_user)
    stale = builds_dir(agent.cache_dir) / f".work-{record['key']}-left"
    stale.mkdir()
    # What a SIGKILLed agent leaves: its build steps in their own session, in its scratch.
    make = subprocess.Popen(["sleep", "600"], cwd=stale, start_new_session=True)
    try:
        ensure_build(fake_definition(release), agent, os_user)
        # Killed and reaped by the build (psutil waits for it), so no exit status is left.
        assert not psutil.pid_exists(make.pid), "the leftover build was killed"
        assert not stale.exists()
    finally:
        make.kill()
        make.wait()


def test_a_build_that_does_not_compile_says_the_compilers_first_error_first(
    agent: AgentConfig, sources: Path, tmp_path: Path, os_user: OsUser
):
    tree = fake_release(tmp_path)
    (tree / "src" / "backend" / "main.c").write_text("int main(void) { this does not compile; }\n")
    broken = pack(tree, sources / "postgresql-15.18.tar.gz")

    with pytest.raises(BuildFailed) as failed:
        ensure_build(fake_definition(broken), agent, os_user)

    said = failed.value.message.split("\n")
    assert said[0] == "source build failed at make: exit code 2; its first errors:"
    assert said[1].startswith("src/backend/main.c:1:") and ": error: " in said[1]
    assert "last lines of the log:" in said


ADDED_FILE_PATCH = """--- /dev/null
+++ b/src/backend/added.c
@@ -0,0 +1 @@
+int added(void) { return 1; }
"""


def test_a_patch_adding_a_file_applies_again_on_a_later_commit_in_its_kept_tree(
    agent: AgentConfig, sources: Path, tmp_path: Path, os_user: OsUser
):
    # `benchlab try` of one patch on a base that moved: the second base commit is checked
    # out over the kept tree the first patched build left, with the patch's new file in it.
    repository = fake_release(sources, "postgres")
    fixed = ["-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repository)]
    subprocess.run(["git", *fixed, "init", "-q", "-b", "main"], check=True)
    subprocess.run(["git", *fixed, "add", "-A"], check=True)
    subprocess.run(["git", *fixed, "commit", "-q", "-m", "first"], check=True)
    first = subprocess.run(
        ["git", *fixed, "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    (repository / "src" / "backend" / "main.c").write_text("int main(void) { return 1; }\n")
    subprocess.run(["git", *fixed, "commit", "-q", "-a", "-m", "second"], check=True)
    patch = {"name": "adds-a-file", "diff": ADDED_FILE_PATCH, "strip": 1}
    agent.build_sources.append(str(repository))

    for ref in (first, "main"):
        source = {"kind": "git", "location": str(repository), "ref": ref}
        definition = fake_definition(repository, source=source, patches=[patch])
        install, _record = ensure_build(definition, allowing_patches(agent), os_user)
        assert install.version == "15.18"
