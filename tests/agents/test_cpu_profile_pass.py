"""The CPU-profile pass, for real: perf records a real PostgreSQL 16 server (the prebuilt
binaries: symbols kept, no frame pointers, so DWARF call graphs) while real pgbench runs;
the CPU profile's folded stacks reach into the backends' query execution, and its runs are
never among the measured points. And a job whose agent may not record a CPU profile says so before
anything is provisioned, and is measured anyway."""

import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import psutil
import pytest

from agents.config import AgentConfig
from agents.contract.reports.cpu_profiles import MAX_STACK_LINES, parse_folded
from tests.agents.jobs import run, small_spec

pytestmark = pytest.mark.skipif(
    subprocess.run(["sh", "-c", "command -v perf"], capture_output=True).returncode != 0,
    reason="perf is not installed",
)


def test_a_cpu_profile_pass_folds_the_backends_stacks_apart_from_the_measured_points(
    config: AgentConfig,
) -> None:
    spec = small_spec(
        workload={"scripts": [{"builtin": "select-only", "weight": 1}]},
        sweep={"clients": [1, 2], "duration_s": 2, "repeats": 2, "cpu_profile": True},
    )
    document, events = run(spec, config)

    assert document["status"] == "succeeded", document["error"]
    assert [(p["clients"], p["repeat"]) for p in document["points"]] == [
        (1, 1),
        (1, 2),
        (2, 1),
        (2, 2),
    ]
    assert len(events.of_type("point")) == 4
    cpu_profiles = document["cpu_profiles"]
    assert [(p["index"], p["clients"], p["error"]) for p in cpu_profiles] == [
        (0, 1, None),
        (1, 2, None),
    ]
    assert [event["data"] for event in events.of_type("cpu_profile")] == cpu_profiles
    for cpu_profile in cpu_profiles:
        stacks = parse_folded(cpu_profile["folded"])
        assert 0 < len(stacks) <= MAX_STACK_LINES
        assert cpu_profile["samples"] >= cpu_profile["kept_samples"] == sum(stacks.values()) > 20
        assert cpu_profile["event"] == "cpu-clock" and cpu_profile["call_graph"] == "dwarf"
        frames = {frame for stack in stacks for frame in stack.split(";")}
        assert {"PostgresMain", "exec_simple_query", "standard_ExecutorRun"} <= frames
        assert cpu_profile["tps"] and cpu_profile["tps"] > 0
    # The CPU-profile pass ran after every measured point, and perf is gone.
    names = [step["name"] for step in document["steps"]]
    assert names.index("pgbench_cpu_profile") > max(
        i for i, name in enumerate(names) if name == "pgbench"
    )
    assert perfs_working_in(config.storage["data"]) == []


def test_an_agent_that_may_not_record_a_cpu_profile_says_so_before_provisioning_and_measures(
    config: AgentConfig,
) -> None:
    spec = small_spec(sweep={"clients": [1], "duration_s": 1, "cpu_profile": True})
    document, events = run(spec, replace(config, allow_cpu_profiling=False))

    assert document["status"] == "succeeded", document["error"]
    assert len(document["points"]) == 1
    [cpu_profile] = document["cpu_profiles"]
    assert '"allow_cpu_profiling": true' in (cpu_profile["error"] or "")
    assert cpu_profile["folded"] == ""
    kinds = [event["type"] for event in events.events]
    assert kinds.index("cpu_profile") < kinds.index("point")
    assert "pgbench_cpu_profile" not in [step["name"] for step in document["steps"]]


def test_perf_left_by_a_killed_agent_is_killed_with_the_jobs_cluster(make_cluster) -> None:
    cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    # An agent process recording the server's CPU profile, killed with SIGKILL (no finally runs).
    agent = subprocess.Popen(
        [sys.executable, "-c", KILLED_AGENT, str(cluster.postmaster_pid), str(cluster.job_dir)],
        cwd=REPO,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert agent.stdout is not None and agent.stdout.readline().strip() == "recording"
    agent.kill()
    agent.wait()
    assert len(perfs_working_in(cluster.job_dir)) == 1

    cluster.destroy()  # what a starting worker does to a dead agent's cluster

    assert perfs_working_in(cluster.job_dir) == []


def perfs_working_in(directory: Path) -> list[psutil.Process]:
    """perf processes still running (not zombies) with their working directory in `directory`
    (other people's perf on this machine are none of the test's business)."""
    found = psutil.process_iter(["name", "cwd", "status"])
    return [
        p
        for p in found
        if p.info["name"] == "perf"
        and p.info["status"] != psutil.STATUS_ZOMBIE
        and Path(p.info["cwd"] or "/").is_relative_to(directory)
    ]


REPO = Path(__file__).resolve().parents[2]
KILLED_AGENT = """
import sys, time
from pathlib import Path
from agents.observe.cpu_profile import recording
with recording("/usr/bin/perf", int(sys.argv[1]), Path(sys.argv[2])):
    print("recording", flush=True)
    time.sleep(600)
"""
