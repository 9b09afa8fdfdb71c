"""CPU sets of a duet's sides: the halves, the launcher, what a gone agent left."""

from pathlib import Path

from agents.cgroups import JobCgroup
from agents.cpusets import CpuSet, halves, parse_cpu_list, remove_left_cpusets
from agents.markers import process_start
from agents.postgres.osuser import OsUser


def test_the_halves_swap_and_the_odd_cpu_goes_to_the_second() -> None:
    assert halves((0, 1), swapped=False) == ((0,), (1,))
    assert halves((0, 1), swapped=True) == ((1,), (0,))
    assert halves((0, 1, 2, 3, 4), swapped=False) == ((0, 1), (2, 3, 4))
    assert parse_cpu_list("0-2,5\n") == (0, 1, 2, 5)


def test_a_side_enters_its_cpuset_then_takes_its_affinity_then_drops_to_its_user() -> None:
    cgroup = JobCgroup(1, (Path("/cg/pids/job"), Path("/cg/memory/job")))
    cpuset = CpuSet((2, 3), Path("/cg/cpuset/job/cgroup.procs"), Path("/cg/cpuset/job"))
    user = OsUser("benchlab", 1234, 1234, Path("/home/benchlab")).in_cgroup(cgroup)

    launcher = user.on_cpus(cpuset).launcher()

    procs_end = launcher.index("--")
    assert launcher[4:procs_end] == [
        "/cg/pids/job/cgroup.procs",
        "/cg/memory/job/cgroup.procs",
        "/cg/cpuset/job/cgroup.procs",
    ]
    assert launcher[procs_end + 1 : procs_end + 4] == ["taskset", "-c", "2,3"]
    assert launcher[procs_end + 4] == "setpriv"


def test_without_cgroups_a_side_is_confined_by_affinity_alone() -> None:
    user = OsUser("benchlab", 1234, 1234, Path("/home/benchlab"))

    assert user.on_cpus(CpuSet((1,))).launcher() == ["taskset", "-c", "1"]
    assert user.launcher() == []


def test_the_cpusets_of_a_gone_agent_are_removed_and_a_live_agents_stay(tmp_path: Path) -> None:
    gone = tmp_path / "benchlab" / "agent-999999999-1"
    live = tmp_path / "benchlab" / f"agent-1-{_start_of_init()}"
    for directory in (gone / "job-a", live / "job-b"):
        directory.mkdir(parents=True)

    assert remove_left_cpusets(tmp_path) == ["job-a"]
    assert not gone.exists()
    assert (live / "job-b").is_dir()


def _start_of_init() -> int:
    """Process 1's start time as the agents' directories name it."""
    start = process_start(1)
    assert start is not None
    return start
