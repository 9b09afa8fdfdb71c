"""A source build that does not compile is built once per experiment, not once per round.

An experiment in three rounds compares a small release-shaped git tree (tests/source_builds.py)
with that tree and a patch: the patched cell's first round runs as a real job (real git,
patch, make and cc, in seconds), its events stored by the lab as the control worker stores
them. The patch breaks compilation: the later rounds of that build fail at once with the
first failure's reason and log, their jobs dropped by the agent. A build the host stopped
(make killed) is not shared: the next round builds again.
"""

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest
import redis

from agents.config import AgentConfig
from agents.contract.wire import cancel_key, dispatch_key
from agents.events import EventEmitter
from agents.job import run_job
from runs.agentlink.execution import ROUNDS
from runs.models import PgBuild, Run
from runs.services.experiments import experiment_schedule
from runs.services.jobs.events import run_record_event
from tests.agents.conftest import config, storage_root  # noqa: F401 (fixtures)
from tests.runs.factories import ConfigProfileFactory, HostFactory, UserFactory, WorkloadFactory
from tests.runs.timelines.test_digests import digest_builds_sent
from tests.source_builds import allowing_builds, allowing_patches, fake_definition, fake_release

BREAKS_COMPILATION = """--- a/src/backend/main.c
+++ b/src/backend/main.c
@@ -1 +1 @@
-int main(void) { return 0; }
+int main(void) { this does not compile; }
"""
# make's recipe kills make itself: what the OOM killer or a stopping host does to a build.
KILLS_MAKE = """--- a/GNUmakefile
+++ b/GNUmakefile
@@ -1,5 +1,6 @@
 include Makefile.global
 all:
+\tkill -KILL $$PPID
 \tcc $(CFLAGS) -c src/backend/main.c -o src/backend/main.o
 install:
 \tsh ./install.sh $(prefix) "$(CFLAGS)"
"""


@pytest.fixture
def repository(storage_root: Path) -> Path:  # noqa: F811
    """The fake release committed in a git repository the OS user can read."""
    tree = fake_release(storage_root / "sources", "postgres")
    fixed = ["-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree)]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "first"]):
        subprocess.run(["git", *fixed, *args], check=True)
    return tree


@pytest.fixture
def agent(
    config: AgentConfig,  # noqa: F811
    storage_root: Path,  # noqa: F811
    repository: Path,
) -> AgentConfig:
    config.state_dir = storage_root / "state"
    return allowing_patches(allowing_builds(config, repository))


def rounds_of_a_patch(repository: Path, diff: str) -> list[Run]:
    """The patched cell's runs of a queued three-round experiment, round 1 first."""
    source = {"kind": "git", "location": str(repository), "ref": "main"}
    base = fake_definition(repository, source=source)
    patched = {**base, "patches": [{"name": "change.patch", "diff": diff, "strip": 1}]}
    builds = [
        PgBuild.objects.create(
            name=name, version="15", source=PgBuild.Source.BUILD, definition=definition
        )
        for name, definition in (("base", base), ("patched", patched))
    ]
    scheduled = experiment_schedule(
        UserFactory(),
        {
            "name": "a patch in rounds",
            "hosts": [HostFactory()],
            "builds": builds,
            "config_profiles": [ConfigProfileFactory()],
            "workloads": [WorkloadFactory()],
            "storage_layouts": [{"data": "data", "wal": None}],
            "clients": [1],
            "duration_s": 2,
            "repeats": 3,
            "execution": ROUNDS,
        },
        start=True,
    )
    return list(scheduled.experiment.runs.filter(build=builds[1]).order_by("round"))


def run_as_the_agent(run: Run, agent: AgentConfig, capture: Callable) -> list[Callable]:
    """Run `run`'s job as a real job, each of its events stored by the lab (and what the
    lab sends after its commit sent); returns what it sent after its commits."""
    run.refresh_from_db()
    emitter = EventEmitter([run_record_event], run_id=run.run_id, token=run.token)
    with capture(execute=True) as callbacks:
        run_job(run.spec, agent, emitter)
    return callbacks


def test_a_patch_that_does_not_compile_is_built_once_for_every_round(
    repository: Path,
    agent: AgentConfig,
    lab_redis: redis.Redis,
    django_capture_on_commit_callbacks: Callable,
):
    first, *later = rounds_of_a_patch(repository, BREAKS_COMPILATION)
    callbacks = run_as_the_agent(first, agent, django_capture_on_commit_callbacks)

    first.refresh_from_db()
    assert (first.status, first.error_code) == (Run.Status.FAILED, "build_failed")
    said = first.error_message.split("\n")
    assert said[0] == "source build failed at make: exit code 2; its first errors:"
    assert said[1].startswith("src/backend/main.c:1:") and ": error: " in said[1]
    for run in later:
        run.refresh_from_db()
        assert (run.status, run.error_code) == (Run.Status.FAILED, "build_failed")
        assert run.started_at is None, "it was not built"
        assert run.error_message == (
            f"not built again: run {first.pk} (round 1) failed to build it: {first.error_message}"
        )
        assert run.build_record["log"] == first.build_record["log"]
        assert "this does not compile" in run.build_record["log"]
        # The agent drops the job it holds (it checks the flag before it claims).
        assert lab_redis.exists(cancel_key(dispatch_key(run.run_id, run.token)))
    # Each run's digest is built once: the result ended its run, it was not taken for a
    # late event (which builds the digest again).
    assert digest_builds_sent(callbacks) == [(run.pk,) for run in (first, *later)]


def test_a_build_the_host_stopped_is_built_again_in_the_next_round(
    repository: Path,
    agent: AgentConfig,
    lab_redis: redis.Redis,
    django_capture_on_commit_callbacks: Callable,
):
    first, second, third = rounds_of_a_patch(repository, KILLS_MAKE)
    run_as_the_agent(first, agent, django_capture_on_commit_callbacks)

    first.refresh_from_db()
    assert (first.status, first.error_code) == (Run.Status.FAILED, "build_interrupted")
    assert "source build failed at make" in first.error_message
    second.refresh_from_db()
    assert second.status == Run.Status.QUEUED
    run_as_the_agent(second, agent, django_capture_on_commit_callbacks)
    second.refresh_from_db()
    assert second.error_code == "build_interrupted" and second.started_at is not None
    third.refresh_from_db()
    assert third.status == Run.Status.QUEUED
