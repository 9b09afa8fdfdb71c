"""A point's noise from this machine's real /proc/stat, a real cgroup, and real CPU burners."""

import os
import resource
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from agents.cgroups import JobCgroup
from agents.observe.noise import (
    CpuWindow,
    cgroup_cpu_seconds,
    point_noise,
    processes_cpu_seconds,
    read_cpu,
)

BURN_CPU_S = 0.6
# Spins until it has used BURN_CPU_S of CPU, whatever else the machine runs.
BURNER = [
    sys.executable,
    "-c",
    f"import time\nstart = time.process_time()\nwhile time.process_time() - start < {BURN_CPU_S}:"
    "\n    pass",
]
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def children_cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def burn_outside_the_job() -> tuple[CpuWindow, float]:
    """A window in which a burner ran that is no process of the job; its CPU seconds."""
    before, children = read_cpu(None), children_cpu_seconds()
    subprocess.run(BURNER, check=True)
    burned = children_cpu_seconds() - children
    return CpuWindow(before, read_cpu(None)), burned


def test_cpu_of_a_process_outside_the_job_counts_as_foreign() -> None:
    window, burned = burn_outside_the_job()
    assert burned >= BURN_CPU_S

    noise = point_noise(window, {"pgbench_cpu_s": 0.0})

    assert noise["job_cpu_source"] == "processes"
    assert noise["job_cpu_s"] == 0.0
    # Other processes on the machine can only add to it; ticks are 10 ms.
    assert noise["foreign_cpu_s"] >= burned - 0.05
    assert noise["host_busy_cpu_s"] >= noise["foreign_cpu_s"]
    assert 0 < noise["foreign_cpu_percent"] <= 100
    assert 0 <= noise["cpu_steal_percent"] <= 100
    assert noise["cpus"] == os.cpu_count()


def test_the_same_cpu_counted_as_the_jobs_is_not_foreign() -> None:
    window, burned = burn_outside_the_job()

    outside = point_noise(window, {"pgbench_cpu_s": 0.0})
    as_pgbench = point_noise(window, {"pgbench_cpu_s": burned})

    assert as_pgbench["job_cpu_s"] == pytest.approx(burned, abs=0.001)
    assert as_pgbench["foreign_cpu_s"] == pytest.approx(
        max(0.0, outside["foreign_cpu_s"] - burned), abs=0.011
    )


def test_the_servers_processes_count_as_the_jobs_where_this_host_runs_the_server() -> None:
    counted = {"pgbench_cpu_s": 1.5, "counters": {"deltas": {"os.server_cpu_s": 2.25}}}
    assert processes_cpu_seconds(counted, pgbench_here=True) == 3.75
    # A run with a client host: its pgbench's CPU is the client's, not this host's.
    assert processes_cpu_seconds(counted, pgbench_here=False) == 2.25
    assert processes_cpu_seconds({"pgbench_cpu_s": None}, pgbench_here=True) is None
    assert processes_cpu_seconds({"pgbench_cpu_s": 1.0}, pgbench_here=False) is None


@pytest.fixture
def cpuacct_cgroup() -> Iterator[JobCgroup]:
    """A real v1 cgroup under this machine's cpuacct mount, removed after the test."""
    if not os.access(CPUACCT, os.W_OK) or not (CPUACCT / "cpuacct.usage").exists():
        pytest.skip("no writable cgroup v1 cpuacct hierarchy on this machine")
    directory = CPUACCT / f"benchlab-noise-test-{uuid.uuid4().hex[:8]}"
    directory.mkdir()
    try:
        yield JobCgroup(1, (directory,))
    finally:
        directory.rmdir()


def test_a_job_cgroup_with_cpu_accounting_gives_the_jobs_cpu(cpuacct_cgroup: JobCgroup) -> None:
    before = read_cpu(cpuacct_cgroup)
    assert before.job_cpu_s == 0.0
    subprocess.run([*cpuacct_cgroup.launcher(), *BURNER], check=True)
    after = read_cpu(cpuacct_cgroup)

    noise = point_noise(CpuWindow(before, after), {"pgbench_cpu_s": None})

    assert noise["job_cpu_source"] == "cgroup"
    assert BURN_CPU_S <= noise["job_cpu_s"] < BURN_CPU_S + 0.3
    assert noise["foreign_cpu_s"] is not None


def test_a_v2_cgroups_usage_is_read_from_its_cpu_stat(tmp_path: Path) -> None:
    # The kernel's format (Documentation/admin-guide/cgroup-v2.rst, cpu.stat).
    (tmp_path / "cpu.stat").write_text(
        "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 0\n"
    )
    assert cgroup_cpu_seconds(JobCgroup(2, (tmp_path,))) == 2.5
    assert cgroup_cpu_seconds(JobCgroup(1, (tmp_path,))) is None
    assert cgroup_cpu_seconds(None) is None
