"""Git builds in a kept tree (what a bisection builds from): a second commit recompiles
only what it changed, a clone's grammar commit builds with its own generated parser, the
range a bisection halves is listed, and refs that git could read as options or ranges are
refused before git sees them.

The first run on a machine compiles 15.18 at -O0 twice, as released and as a clone has it
(each about 2 to 4 minutes on 2 cores); later runs find every commit's build in the
agent's cache.
"""

import os
import shutil
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from agents.config import AgentConfig
from agents.contract.builds.definition import BuildDefinition, check_build_definition
from agents.contract.errors import JobError
from agents.postgres.installs.build_steps import compiler_version
from agents.postgres.installs.kept_tree import KeptTree, tree_key, trees_dir
from agents.postgres.installs.source_build import build_key, builds_dir, ensure_build
from agents.postgres.osuser import OsUser
from tests.bisect_repo import (
    EIGHT_COMMITS,
    EIGHT_REGRESSION_AT,
    EIGHT_SPIN,
    GRAMMAR_MARK,
    bisect_repository,
    clone_shaped_repository,
    commit_subjects,
)
from tests.source_builds import SMALL_FLAGS, UNOPTIMISED, sources_dir


def git_definition(repository: Path, ref: str, list_from: str | None = None) -> BuildDefinition:
    source = {"kind": "git", "location": str(repository), "ref": ref}
    if list_from is not None:
        source["list_from"] = list_from
    return check_build_definition(
        {"source": source, "configure_flags": SMALL_FLAGS, "patches": [], "cflags": UNOPTIMISED}
    )


@pytest.mark.parametrize(
    "ref", ["--upload-pack=touch /tmp/x", "-x", "base..head", "/etc/passwd", "a b", "x" * 101]
)
def test_refs_git_would_read_as_options_or_ranges_are_refused(ref: str):
    definition = {"source": {"kind": "git", "location": "/srv/pg.git", "ref": ref}}
    with pytest.raises(JobError) as caught:
        check_build_definition(definition)
    assert caught.value.field == "postgres.build.source.ref"
    definition["source"] = {"kind": "git", "location": "/srv/pg.git", "ref": "main"}
    definition["source"]["list_from"] = ref
    with pytest.raises(JobError) as refused:
        check_build_definition(definition)
    assert refused.value.field == "postgres.build.source.list_from"


def small_repository(tmp_path: Path) -> Path:
    repository = tmp_path / "repo"
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@t")
    subprocess.run(["git", "init", "-q", "-b", "main", str(repository)], check=True)
    for number in range(4):
        (repository / "configure").write_text(f"#!/bin/sh\n# {number}\n")
        subprocess.run(["git", "-C", str(repository), "add", "configure"], check=True, env=env)
        message = f"commit {number}"
        subprocess.run(
            ["git", "-C", str(repository), "commit", "-qm", message], check=True, env=env
        )
        if number == 0:
            subprocess.run(["git", "-C", str(repository), "tag", "first"], check=True)
    return repository


def test_the_mirror_resolves_refs_and_lists_the_first_parent_range(tmp_path: Path):
    kept = KeptTree(tmp_path / "kept", str(small_repository(tmp_path)))
    kept.root.mkdir()
    kept.update()
    kept.update()  # a fetch, the second time
    first, head = kept.resolve("first", "ref"), kept.resolve("main", "ref")
    listed = kept.first_parent_range(first, head)
    assert [commit["subject"] for commit in listed] == ["commit 1", "commit 2", "commit 3"]
    assert listed[0]["parent"] == first and listed[-1]["sha"] == head
    assert kept.commit_info(head)["author_date"].startswith("20")
    with pytest.raises(JobError) as unknown:
        kept.resolve("REL_99_0", "postgres.build.source.ref")
    assert unknown.value.field == "postgres.build.source.ref"
    with pytest.raises(JobError) as backwards:
        kept.first_parent_range(head, first)
    assert "is not an ancestor" in backwards.value.message


def rebuilt(repository: Path, commit: str, config: AgentConfig, os_user: OsUser) -> dict:
    """`commit` built again in the kept tree (its cache entry removed first)."""
    definition = git_definition(repository, commit)
    key = build_key(definition, f"git:{commit}", compiler_version())
    shutil.rmtree(builds_dir(config.cache_dir) / key, ignore_errors=True)
    _install, record = ensure_build(definition, config, os_user)
    assert not record["reused"] and record["source_digest"] == f"git:{commit}"
    return record


@pytest.mark.timeout(900)
def test_a_second_commit_recompiles_only_what_it_changed(config: AgentConfig, os_user: OsUser):
    repository = bisect_repository(sources_dir(), EIGHT_COMMITS, EIGHT_REGRESSION_AT, EIGHT_SPIN)
    config.allow_source_builds, config.build_sources = True, [str(repository)]
    commits = commit_subjects(repository)

    install, record = ensure_build(git_definition(repository, "head", "base"), config, os_user)
    assert install.version == "15.18"
    assert [c["sha"] for c in record["commits"]] == [sha for sha, _ in commits]
    assert record["commit"]["subject"] == commits[-1][1]

    # The regression's parent, then the regression: the second changes postgres.c only.
    rebuilt(repository, commits[3][0], config, os_user)
    started = time.time()
    culprit = rebuilt(repository, commits[4][0], config, os_user)
    assert "./configure" not in culprit["log"]  # configured once per kept tree
    tree = trees_dir(config.cache_dir) / tree_key(
        git_definition(repository, "head"), compiler_version()
    )
    objects = tree / "work" / "src" / "src" / "backend"
    assert (objects / "tcop" / "postgres.o").stat().st_mtime > started
    assert (objects / "utils" / "adt" / "varlena.o").stat().st_mtime < started
    # The mirror git runs in as the agent is the agent's; the build wrote only the work tree.
    mirror = (tree / "git" / "config").stat()
    assert mirror.st_uid == os.geteuid() and not mirror.st_mode & 0o022
    assert (tree / "work" / "src" / "config.status").stat().st_uid == os_user.uid


@pytest.mark.timeout(900)
def test_make_left_running_in_the_kept_tree_by_a_killed_agent_is_killed_by_the_next_build(
    config: AgentConfig, os_user: OsUser
):
    repository = bisect_repository(sources_dir(), EIGHT_COMMITS, EIGHT_REGRESSION_AT, EIGHT_SPIN)
    config.allow_source_builds, config.build_sources = True, [str(repository)]
    definition = git_definition(repository, "head")
    ensure_build(definition, config, os_user)
    work = trees_dir(config.cache_dir) / tree_key(definition, compiler_version()) / "work"
    # What a SIGKILLed agent leaves: its build steps in their own session, in the tree.
    make = subprocess.Popen(["sleep", "600"], cwd=work / "src", start_new_session=True)
    try:
        ensure_build(definition, config, os_user)
        # Killed and reaped by the build (psutil waits for it), so no exit status is left.
        assert not psutil.pid_exists(make.pid), "the leftover build was killed"
        assert (work / "src").is_dir(), "the kept tree stays"
    finally:
        make.kill()
        make.wait()


@pytest.mark.timeout(1800)
def test_a_clone_without_generated_parsers_builds_and_its_grammar_commit_with_its_own(
    config: AgentConfig, os_user: OsUser
):
    """A clone has no gram.c: bison and flex make it in the kept tree. The commit that
    changes gram.y, built after its parent there, compiles its own gram.c, not the one the
    parent's build left: the string its grammar action logs is in its server only."""
    repository = clone_shaped_repository(sources_dir(), EIGHT_SPIN)
    config.allow_source_builds, config.build_sources = True, [str(repository)]

    parent, _record = ensure_build(git_definition(repository, "base"), config, os_user)
    grammar, record = ensure_build(git_definition(repository, "head"), config, os_user)

    assert record["commit"]["subject"] == "Spin while parsing every SELECT (gram.y)"
    assert GRAMMAR_MARK.encode() not in (parent.bindir / "postgres").read_bytes()
    assert GRAMMAR_MARK.encode() in (grammar.bindir / "postgres").read_bytes()
