"""CPU sets: the CPUs a job's programs may run on (each side of a duet has its own).

A side's programs (its server and its pgbench, everything they start) are
confined two ways. Always by affinity: the launcher runs them through
`taskset -c`, and a child inherits its parent's affinity. And, where the host
has the cpuset controller, by a cpuset cgroup too, which a process cannot
widen for itself: `<cpuset mount>/benchlab/agent-<pid>-<start>/<job>` on v1
(each level gets its parent's memory nodes and CPUs, as v1 requires before a
process may enter), or `cpuset.cpus` in the job's own v2 cgroup. The job's
cgroup (agents/cgroups.py) kills what is left at the job's end; the cpuset
directory is removed after it. An agent starting after a killed one removes
the cpuset directories of agents that are gone, as it does their job cgroups.
"""

import logging
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from agents.cgroups import AGENT_PREFIX, CGROUP_MOUNT, PARENT, JobCgroup
from agents.markers import process_start

logger = logging.getLogger(__name__)

CPUSET_V1_MOUNT = CGROUP_MOUNT / "cpuset"
# The two sides of a duet are threads of one agent and open their cpusets at once: they
# create the levels they share in turn, or the second side's mkdir failed and it ran on
# affinity alone.
_LEVELS = threading.Lock()


def cpu_list(cpus: tuple[int, ...]) -> str:
    """`cpus` as the kernel writes a CPU list (0,2,3)."""
    return ",".join(str(cpu) for cpu in cpus)


def parse_cpu_list(text: str) -> tuple[int, ...]:
    """A kernel CPU list ("0-2,5") as its CPUs."""
    cpus: list[int] = []
    for part in text.strip().split(","):
        if not part:
            continue
        first, _, last = part.partition("-")
        cpus.extend(range(int(first), int(last or first) + 1))
    return tuple(cpus)


def host_cpus() -> tuple[int, ...]:
    """The CPUs this agent may use, in order."""
    return tuple(sorted(os.sched_getaffinity(0)))


def halves(cpus: tuple[int, ...], swapped: bool) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The two sides' CPUs: the first half and the second (the second has the odd one);
    `swapped` gives the first side the second half."""
    middle = len(cpus) // 2
    first, second = cpus[:middle], cpus[middle:]
    return (second, first) if swapped else (first, second)


@dataclass(frozen=True)
class CpuSet:
    """A job's CPUs; `procs` is the cpuset cgroup's `cgroup.procs` its programs enter
    (None where the host has no cpuset controller: affinity alone confines them)."""

    cpus: tuple[int, ...]
    procs: Path | None = None
    # A v1 cpuset directory of its own, removed when the job ends (v2 uses the job's cgroup).
    directory: Path | None = None

    def launcher(self) -> list[str]:
        """The argv prefix setting a program's affinity to these CPUs."""
        return ["taskset", "-c", cpu_list(self.cpus)]

    def remove(self) -> str | None:
        """Remove the v1 cpuset directory (its processes died with the job's cgroup);
        what went wrong, for the job's log."""
        if self.directory is None or not self.directory.exists():
            return None
        try:
            self.directory.rmdir()
        except OSError as error:
            return f"the job's cpuset {self.directory} could not be removed: {error}"
        return None


def open_cpuset(cpus: tuple[int, ...], cgroup: JobCgroup | None) -> CpuSet:
    """The job's CPU set: a cpuset cgroup where the host has the controller (v2: the job's
    own cgroup; v1: a directory named after it), else affinity alone."""
    if cgroup is None:
        return CpuSet(cpus)
    try:
        if cgroup.version == 2:
            return _v2_cpuset(cpus, cgroup)
        if (CPUSET_V1_MOUNT / "cgroup.procs").exists():
            return _v1_cpuset(cpus, cgroup)
    except OSError as error:
        logger.warning("no cpuset cgroup for %s, affinity only: %s", cgroup.name, error)
    return CpuSet(cpus)


def _v2_cpuset(cpus: tuple[int, ...], cgroup: JobCgroup) -> CpuSet:
    (directory,) = cgroup.directories
    if "cpuset" not in (directory.parent / "cgroup.controllers").read_text().split():
        return CpuSet(cpus)
    for level in (directory.parent.parent, directory.parent):
        control = level / "cgroup.subtree_control"
        if "cpuset" not in control.read_text().split():
            _write(control, "+cpuset")
    _write(directory / "cpuset.cpus", cpu_list(cpus))
    return CpuSet(cpus, directory / "cgroup.procs")


def _v1_cpuset(cpus: tuple[int, ...], cgroup: JobCgroup) -> CpuSet:
    agent = f"{AGENT_PREFIX}{os.getpid()}-{process_start(os.getpid())}"
    parent = CPUSET_V1_MOUNT / PARENT
    with _LEVELS:
        for level in (parent, parent / agent):
            _make_level(level)
    directory = parent / agent / cgroup.name
    directory.mkdir()
    _write(directory / "cpuset.mems", (directory.parent / "cpuset.mems").read_text().strip())
    _write(directory / "cpuset.cpus", cpu_list(cpus))
    return CpuSet(cpus, directory / "cgroup.procs", directory)


def _make_level(level: Path) -> None:
    """Create a shared level with its parent's CPUs and memory nodes, unless it exists
    (another agent may have made `benchlab/` a moment ago)."""
    try:
        level.mkdir()
    except FileExistsError:
        return
    _inherit(level)


def _inherit(level: Path) -> None:
    """A new v1 cpuset starts with no CPUs or memory nodes: its parent's, so a child can."""
    for name in ("cpuset.mems", "cpuset.cpus"):
        _write(level / name, (level.parent / name).read_text().strip())


def remove_left_cpusets(mount: Path = CPUSET_V1_MOUNT) -> list[str]:
    """Remove the v1 cpuset directories of agents that are gone (their processes were
    killed with their job cgroups); the jobs' names."""
    parent = mount / PARENT
    if not parent.is_dir():
        return []
    removed = []
    for agent in sorted(parent.glob(f"{AGENT_PREFIX}*")):
        pid, _, start = agent.name.removeprefix(AGENT_PREFIX).partition("-")
        if not (pid.isdigit() and start.isdigit()) or process_start(int(pid)) == int(start):
            continue
        for job in sorted(path for path in agent.iterdir() if path.is_dir()):
            try:
                job.rmdir()
            except OSError as error:
                logger.warning("cpuset %s of a gone agent stays: %s", job, error)
                continue
            removed.append(job.name)
        try:
            agent.rmdir()
        except OSError as error:
            logger.warning("cpuset %s of a gone agent stays: %s", agent, error)
    return removed


def _write(path: Path, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)
