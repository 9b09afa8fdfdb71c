"""A job is a unit the OS can end: what its programs start is gone when it ends.

Lab code reaches the host three ways where the agent's local config allows it:
a pgbench `\\shell`, `COPY ... FROM PROGRAM` in superuser setup SQL, a patched
`configure`. Each starts a process that detaches (`cd / && setsid sleep &`: no
working directory in the job, no parent in it), which the cleanup by working
directory used to miss; it must be gone when the job ends. While it lives it is
in a process id namespace of its own: it cannot see or signal a process of the
same OS user outside it (a foreign `sleep` stands for another job's pgbench),
and the job's cgroup bounds its memory and processes, the sandbox's /tmp its
files in memory. Real jobs, real pgbench and PostgreSQL, real cgroups.
"""

import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from agents import job_cgroup
from agents.cgroups import Hierarchy, JobCgroup, Limits, detect
from agents.config import AgentConfig
from agents.job_cgroup import start_of_agent
from agents.markers import process_start
from agents.postgres.osuser import OsUser
from tests.agents.jobs import Event, run, small_spec
from tests.source_builds import (
    allowing_builds,
    allowing_patches,
    fake_definition,
    fake_release,
    pack,
)
from tests.waiting import wait_for


def marker() -> str:
    """A sleep duration no other process on the host has on its command line."""
    return f"{secrets.randbelow(10**6) + 7200}.{secrets.randbelow(10**6)}"


def sleeping(duration: str) -> list[psutil.Process]:
    """The processes running `sleep <duration>` now."""
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if process.info["cmdline"] == ["sleep", duration]:
            found.append(process)
    return found


def namespace_depth(pid: int) -> int:
    """How many pid namespaces `pid` is in (NSpid's fields): 1 for the host's own."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("NSpid:"):
            return len(line.split()) - 1
    raise AssertionError(f"no NSpid for {pid}")


def detach(duration: str) -> str:
    """A shell command that leaves `sleep <duration>` running outside every job directory."""
    return f"cd / && setsid sleep {duration} >/dev/null 2>&1 </dev/null &"


def job_cgroup_file(name: str) -> Path:
    """`name` in this process's one job cgroup (v1 pids controller)."""
    (agent,) = Path("/sys/fs/cgroup/pids/benchlab").glob(f"agent-{os.getpid()}-*")
    (job,) = [path for path in agent.iterdir() if path.is_dir()]
    return job / name


@pytest.fixture
def foreign_process(os_user: OsUser) -> Iterator[int]:
    """A process of the jobs' OS user outside any job: what another job's pgbench would be."""
    process = subprocess.Popen(
        ["sleep", "600"], user=os_user.uid, group=os_user.gid, extra_groups=[]
    )
    yield process.pid
    process.kill()
    process.wait()


@pytest.fixture(autouse=True)
def needs_cgroups() -> None:
    if isinstance(detect(), str):
        pytest.skip(f"this host gives no cgroups: {detect()}")


def shell_job(script_lines: list[str]) -> dict:
    """A job running `script_lines` (pgbench meta-commands) once, then SELECT 1; without a
    transaction log, so no calibration run executes the script before the point."""
    script = "\n".join([*script_lines, "SELECT 1;", ""])
    return small_spec(
        workload={
            "scripts": [{"name": "probe", "text": script, "weight": 1}],
            "latency_log": "none",
        },
        sweep={"clients": [1], "duration_s": None, "transactions": 1},
    )


def test_a_shell_command_is_confined_and_what_it_detaches_ends_with_the_job(
    config: AgentConfig, foreign_process: int
) -> None:
    config.allow_shell_scripts = True
    config.job_tmp_mb = 16
    config.job_memory_mb = 512
    duration = marker()
    probes = {
        "detached": f"{detach(duration)} sleep 0.2; pgrep -x sleep",
        "signal_foreign": f"kill -0 {foreign_process}",
        "see_foreign": f"test -e /proc/{foreign_process}",
        "read_server_cmdline": "grep -qs 'bin/postgre[s]' /proc/[0-9]*/cmdline",
        "fill_tmp": "dd if=/dev/zero of=/tmp/fill bs=1M count=64",
        "use_1g": "python3 -c 'print(len(b\"x\" * (1 << 30)))'",
    }
    lines = [
        f"\\shell {command} >/dev/null 2>&1 && echo probe-{name}=yes || echo probe-{name}=no"
        for name, command in probes.items()
    ]

    result, _ = run(shell_job(lines), config)

    assert result["status"] == "succeeded", (result.get("failed_point") or {}).get("stderr")
    output = result["points"][0]["stdout"]
    answers = dict(line.split("=", 1) for line in output.split() if line.startswith("probe-"))
    assert answers == {
        "probe-detached": "yes",
        "probe-signal_foreign": "no",
        "probe-see_foreign": "no",
        "probe-read_server_cmdline": "no",
        "probe-fill_tmp": "no",
        "probe-use_1g": "no",
    }
    assert sleeping(duration) == []
    assert psutil.Process(foreign_process).status() != psutil.STATUS_STOPPED


def test_a_fork_bomb_stops_at_the_pids_limit_and_the_job_still_ends(config: AgentConfig) -> None:
    """Whether pgbench's client survives the bomb does not matter (its own fork may meet
    the limit): the limit holds, and the job ends with nothing left in its cgroup."""
    config.allow_shell_scripts = True
    config.job_pids = 100
    bomb = (
        "\\shell exec 2>/dev/null; bomb() { bomb | bomb & }; bomb; i=0; "
        "while [ $i -lt 100000 ]; do i=$((i+1)); done; true"
    )
    max_hits: list[int] = []
    cgroups: list[Path] = []

    def at_stopping(event: Event) -> None:
        if event["type"] == "status" and event["data"]["state"] == "stopping":
            lines = job_cgroup_file("pids.events").read_text().splitlines()
            max_hits.append(int(dict(line.split() for line in lines)["max"]))
            cgroups.append(job_cgroup_file("pids.events").parent)

    began = time.monotonic()
    result, _ = run(shell_job([bomb]), config, hook=at_stopping)

    assert result["status"] in ("succeeded", "failed")
    assert max_hits[0] > 0, "the fork bomb never reached the pids limit"
    assert not cgroups[0].exists()
    assert time.monotonic() - began < 120


def test_a_program_started_by_copy_from_program_ends_with_the_job(config: AgentConfig) -> None:
    config.allow_superuser_sql = True
    duration = marker()
    command = detach(duration).replace("'", "''")
    setup = f"CREATE TABLE leak (line text); COPY leak FROM PROGRAM '{command} echo started';"
    alive: list[int] = []

    def at_point(event: Event) -> None:
        if event["type"] == "point":
            alive.extend(namespace_depth(process.pid) for process in sleeping(duration))

    spec = small_spec(
        dataset={"scale": 1, "setup_sql": setup},
        sweep={"clients": [1], "duration_s": None, "transactions": 10},
    )
    result, _ = run(spec, config, hook=at_point)

    assert result["status"] == "succeeded", result["error"]
    assert alive == [2], "the detached program lived through the job, in the server's namespace"
    assert sleeping(duration) == []


def test_a_program_a_patched_configure_detaches_ends_with_the_job(
    config: AgentConfig, storage_root: Path, tmp_path: Path
) -> None:
    """A release-shaped tree that builds in a second (tests/source_builds.py): the build
    ends, its fake binaries fail the job at initdb or start, and the sleep goes with it."""
    duration = marker()
    sources = storage_root / "sources"
    sources.mkdir()
    release = pack(fake_release(tmp_path), sources / "postgresql-15.18.tar.gz")
    config.state_dir = storage_root / "state"
    allowing_patches(allowing_builds(config, sources))
    diff = (
        "--- a/configure\n+++ b/configure\n@@ -1,2 +1,3 @@\n #!/bin/sh\n"
        f"+{detach(duration)}\n"
        ' for arg in "$@"; do\n'
    )
    definition = fake_definition(release, patches=[{"name": "detach", "diff": diff, "strip": 1}])
    alive: list[int] = []

    def after_build(event: Event) -> None:
        if event["type"] == "step" and event["data"]["name"] == "build":
            if event["data"]["percent"] == 100.0:
                alive.extend(process.pid for process in sleeping(duration))

    spec = small_spec(postgres={"version": "15", "source": "build", "build": definition})
    result, _ = run(spec, config, hook=after_build)

    assert result["build"] is not None and result["build"]["failed_step"] is None
    assert len(alive) == 1, "the patched configure's sleep outlived the build"
    assert result["status"] == "failed"
    assert sleeping(duration) == []


def test_a_host_without_cgroups_refuses_jobs_that_run_lab_code(
    config: AgentConfig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No hierarchy under the mount (an agent neither root nor delegated one gets the same
    answer): the shell script is refused although the config allows it."""
    monkeypatch.setattr(job_cgroup, "detect", lambda: detect(mount=tmp_path))
    config.allow_shell_scripts = True
    script = "\\shell true\nSELECT 1;\n"
    spec = small_spec(workload={"scripts": [{"name": "shell", "text": script, "weight": 1}]})

    result, _ = run(spec, config)

    assert result["error"] is not None and result["error"]["code"] == "sandbox_unavailable"
    assert "allow_shell_scripts" in result["error"]["message"]
    assert "no cgroup hierarchy" in result["error"]["message"]
    assert result["install"] is None


def test_an_agent_starting_ends_the_jobs_of_an_agent_that_is_gone(os_user: OsUser) -> None:
    """A killed agent's job cgroup (named after a process that no longer runs) still holds
    a detached program; the next agent's start kills it and removes the cgroup. Other
    agents' cgroups (this test's process is one) stay."""
    gone = subprocess.Popen(["sleep", "60"])
    gone_start = process_start(gone.pid)
    gone.kill()
    gone.wait()
    hierarchy = detect()
    assert not isinstance(hierarchy, str)
    agent_directories = hierarchy.agent_directories(f"agent-{gone.pid}-{gone_start}")
    for directory in agent_directories:
        directory.mkdir(parents=True)
    cgroup = JobCgroup(hierarchy.version, tuple(d / "left-behind" for d in agent_directories))
    cgroup.create(Limits(memory_bytes=None, pids=10, cpus=None))
    duration = marker()
    switch = ["setpriv", f"--reuid={os_user.uid}", f"--regid={os_user.gid}", "--clear-groups"]
    subprocess.run([*cgroup.launcher(), *switch, "sh", "-c", detach(duration)], check=True)
    # The shell returns once it forked: the detached child may not have exec'd sleep yet.
    wait_for(lambda: len(sleeping(duration)) == 1, 10, "the detached sleep to run")
    assert cgroup.pids()

    start_of_agent(AgentConfig())

    assert sleeping(duration) == []
    assert not any(directory.exists() for directory in agent_directories)


def test_a_cgroup2_host_is_found_and_a_missing_controller_named(tmp_path: Path) -> None:
    """Where v1 controllers have no mounts, the unified hierarchy at the mount is used,
    if it offers the controllers job limits need (a file tree standing for cgroupfs)."""
    (tmp_path / "cgroup.controllers").write_text("cpuset cpu io memory pids\n")
    for directory in (tmp_path, tmp_path / "benchlab"):
        directory.mkdir(exist_ok=True)
        (directory / "cgroup.subtree_control").write_text("")
    hierarchy = detect(mount=tmp_path)

    assert hierarchy == Hierarchy(2, (tmp_path / "benchlab",))
    (tmp_path / "cgroup.controllers").write_text("cpuset io memory\n")
    assert detect(mount=tmp_path) == (
        f"the cgroup2 hierarchy at {tmp_path} lacks the pids, cpu controllers"
    )
