"""A cgroup per job: what the job's programs leave running is killed when the job ends.

Every program of a job (server, pgbench, initdb, a build, anything they start)
is written into the job's cgroup before it can fork, by the launcher this
module gives (`JobCgroup.launcher`): a shell that writes its own pid into the
cgroup's `cgroup.procs` files, then execs the program (through `setpriv` when
it must drop from root to the job's OS user). A process cannot leave a cgroup
by itself (the sandbox mounts /sys read-only, and the cgroup files are the
agent's), so a `setsid` double fork from a pgbench `\\shell`, a `COPY ... FROM
PROGRAM` or a patched `configure` is still in it when the job ends, whatever
its working directory. The job then ends it: v1 freezes the cgroup, SIGKILLs
every process in it and thaws it; v2 writes `cgroup.kill`. The cgroup also
carries the job's memory, pids and CPU limits (AgentConfig.job_memory_mb,
job_pids, job_cpus).

Layout: `<hierarchy>/benchlab/agent-<pid>-<start>/<job>` (v1: the same path
under each of the `pids`, `memory`, `cpu` and `freezer` mounts; v2: once under
the unified mount). The agent directory names the process that made it (its
start time tells a reused pid apart), so an agent starting after a killed one
removes the cgroups of agents that are gone, and only those.

A host gives cgroups when the agent runs as root or owns a delegated cgroup
under the parent; when it cannot, `detect()` says why, and the agent refuses
the jobs that run a lab user's code (agents/job.py).
"""

import errno
import logging
import os
import secrets
import signal
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from agents.markers import process_start

logger = logging.getLogger(__name__)

CGROUP_MOUNT = Path("/sys/fs/cgroup")
V1_CONTROLLERS = ("pids", "memory", "cpu", "freezer")
V2_CONTROLLERS = ("pids", "memory", "cpu")
PARENT = "benchlab"
AGENT_PREFIX = "agent-"
CPU_PERIOD_US = 100_000
# Kept out of a job's memory limit by default: the agent, the lab's processes, the kernel.
MEMORY_RESERVE_FRACTION = 0.125
MEMORY_RESERVE_MIN = 1024 * 1024 * 1024
DEFAULT_PIDS = 4096
FREEZE_TIMEOUT_S = 10.0
EMPTY_TIMEOUT_S = 10.0
# The launcher: the shell writes its pid ($$) into each cgroup.procs file given before
# `--`, then execs the rest; its arguments are never read as shell syntax.
ENTER_SCRIPT = 'while [ "$1" != -- ]; do echo $$ > "$1" || exit 125; shift; done; shift; exec "$@"'


@dataclass(frozen=True)
class Limits:
    """What one job's processes may use together; None: no limit."""

    memory_bytes: int | None
    pids: int | None
    cpus: float | None

    @classmethod
    def for_host(cls, memory_mb: int | None, pids: int | None, cpus: float | None) -> "Limits":
        """The configured limits; memory defaults to the host's RAM less a reserve."""
        if memory_mb is not None:
            memory = memory_mb * 1024 * 1024
        else:
            total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
            memory = total - max(MEMORY_RESERVE_MIN, int(total * MEMORY_RESERVE_FRACTION))
        return cls(memory_bytes=memory, pids=pids, cpus=cpus)


@dataclass(frozen=True)
class Hierarchy:
    """Where this host's cgroups are: v1, one `benchlab` parent per controller mount, or
    v2, one parent under the unified mount."""

    version: int
    parents: tuple[Path, ...]

    def agent_directories(self, name: str) -> tuple[Path, ...]:
        return tuple(parent / name for parent in self.parents)

    def open_job(self, job: str, limits: Limits) -> "JobCgroup":
        """Create this process's cgroup for `job` (a unique name) with `limits`."""
        agent = f"{AGENT_PREFIX}{os.getpid()}-{process_start(os.getpid())}"
        for directory in self.agent_directories(agent):
            directory.mkdir(parents=True, exist_ok=True)
            if self.version == 2:
                _enable_controllers(directory.parent)
                _enable_controllers(directory)
        cgroup = JobCgroup(
            self.version, tuple(directory / job for directory in self.agent_directories(agent))
        )
        cgroup.create(limits)
        return cgroup

    def leftover_agents(self) -> list[str]:
        """The agent directories whose process is gone (killed, or its host rebooted)."""
        leftovers = []
        for directory in sorted(self.parents[0].glob(f"{AGENT_PREFIX}*")):
            pid, _, start = directory.name.removeprefix(AGENT_PREFIX).partition("-")
            if not (pid.isdigit() and start.isdigit()):
                continue
            if process_start(int(pid)) != int(start):
                leftovers.append(directory.name)
        return leftovers

    def remove_leftovers(self) -> list[str]:
        """Kill and remove the job cgroups of agents that are gone; the jobs' names, and
        an error for a cgroup whose processes would not die."""
        removed = []
        for agent in self.leftover_agents():
            directories = self.agent_directories(agent)
            jobs = sorted(path.name for path in directories[0].iterdir() if path.is_dir())
            for job in jobs:
                JobCgroup(self.version, tuple(d / job for d in directories)).end()
                removed.append(job)
            for directory in directories:
                if directory.exists():
                    directory.rmdir()
        return removed


@dataclass(frozen=True)
class JobCgroup:
    """One job's cgroup: v1 a directory per controller (in V1_CONTROLLERS' order), v2 one."""

    version: int
    directories: tuple[Path, ...]

    @property
    def name(self) -> str:
        return self.directories[0].name

    def launcher(self, also: tuple[Path, ...] = ()) -> list[str]:
        """The argv prefix that puts a program into this cgroup before it runs (and into
        the cgroups whose `cgroup.procs` files `also` names: a cpuset, agents/cpusets.py)."""
        procs = [str(directory / "cgroup.procs") for directory in self.directories]
        procs += [str(path) for path in also if str(path) not in procs]
        return ["/bin/sh", "-c", ENTER_SCRIPT, "benchlab-cgroup", *procs, "--"]

    def create(self, limits: Limits) -> None:
        for directory in self.directories:
            directory.mkdir()
        if self.version == 1:
            controller = dict(zip(V1_CONTROLLERS, self.directories, strict=True))
            memory, pids, cpu = controller["memory"], controller["pids"], controller["cpu"]
            memory_file, pids_file = memory / "memory.limit_in_bytes", pids / "pids.max"
            cpu_files: tuple[Path, Path | None] = (
                cpu / "cpu.cfs_quota_us",
                cpu / "cpu.cfs_period_us",
            )
        else:
            (directory,) = self.directories
            memory_file, pids_file = directory / "memory.max", directory / "pids.max"
            cpu_files = (directory / "cpu.max", None)
        if limits.memory_bytes is not None:
            _write(memory_file, str(limits.memory_bytes))
        if limits.pids is not None:
            _write(pids_file, str(limits.pids))
        if limits.cpus is not None:
            quota = int(limits.cpus * CPU_PERIOD_US)
            quota_file, period_file = cpu_files
            if period_file is None:
                _write(quota_file, f"{quota} {CPU_PERIOD_US}")
            else:
                _write(period_file, str(CPU_PERIOD_US))
                _write(quota_file, str(quota))

    def pids(self) -> set[int]:
        """Every process in the cgroup now."""
        found: set[int] = set()
        for directory in self.directories:
            found.update(_read_pids(directory / "cgroup.procs"))
        return found

    def kill_all(self) -> set[int]:
        """SIGKILL everything in the cgroup; the pids still there after EMPTY_TIMEOUT_S.

        Frozen first (v1, or v2 without cgroup.kill), so nothing forks between the
        listing and the kill."""
        kill_file = self.directories[0] / "cgroup.kill"
        if self.version == 2 and kill_file.exists():
            _write(kill_file, "1")
        else:
            self._set_frozen(True)
            try:
                for pid in self.pids():
                    _kill(pid)
            finally:
                self._set_frozen(False)
        deadline = time.monotonic() + EMPTY_TIMEOUT_S
        while (left := self.pids()) and time.monotonic() < deadline:
            time.sleep(0.05)
        return left

    def _set_frozen(self, frozen: bool) -> None:
        if self.version == 1:
            state = self.directories[V1_CONTROLLERS.index("freezer")] / "freezer.state"
            wanted = "FROZEN" if frozen else "THAWED"
            _write(state, wanted)
            deadline = time.monotonic() + FREEZE_TIMEOUT_S
            while state.read_text().strip() != wanted and time.monotonic() < deadline:
                time.sleep(0.01)
            return
        freeze = self.directories[0] / "cgroup.freeze"
        _write(freeze, "1" if frozen else "0")

    def remove(self) -> None:
        """Remove the (empty) cgroup's directories."""
        for directory in self.directories:
            if directory.exists():
                directory.rmdir()

    def end(self) -> str | None:
        """Kill everything in the cgroup and remove it; an error naming what survived."""
        left = self.kill_all()
        if left:
            return (
                f"the job's processes {sorted(left)} were still alive {EMPTY_TIMEOUT_S:.0f} s "
                f"after SIGKILL (uninterruptible I/O?); their cgroup {self.directories[0]} "
                "is left for the next agent start to remove"
            )
        self.remove()
        return None


def detect(parent: str = PARENT, mount: Path = CGROUP_MOUNT) -> Hierarchy | str:
    """This host's cgroup hierarchy for job cgroups, or why it gives none (a sentence
    naming the fix). v1 when the controllers have their own mounts (a hybrid host's
    unified hierarchy then holds none of them), else v2 at the mount itself."""
    v1_mounts = [mount / controller for controller in V1_CONTROLLERS]
    if all((directory / "cgroup.procs").exists() for directory in v1_mounts):
        hierarchy = Hierarchy(1, tuple(directory / parent for directory in v1_mounts))
    elif (mount / "cgroup.controllers").exists():
        available = (mount / "cgroup.controllers").read_text().split()
        missing = [name for name in V2_CONTROLLERS if name not in available]
        if missing:
            return f"the cgroup2 hierarchy at {mount} lacks the {', '.join(missing)} controllers"
        hierarchy = Hierarchy(2, (mount / parent,))
    else:
        return f"no cgroup hierarchy with the {', '.join(V1_CONTROLLERS)} controllers under {mount}"
    try:
        for directory in hierarchy.parents:
            directory.mkdir(exist_ok=True)
            if hierarchy.version == 2:
                _enable_controllers(directory.parent)
                _enable_controllers(directory)
            if not os.access(directory, os.W_OK):
                raise PermissionError(errno.EACCES, "not writable", str(directory))
    except OSError as error:
        return (
            f"the agent cannot create cgroups under {error.filename or hierarchy.parents[0]} "
            f"({error.strerror}): run it as root, or delegate that cgroup to its user"
        )
    return hierarchy


def _enable_controllers(directory: Path) -> None:
    """Let `directory`'s children use the v2 controllers a job's limits need."""
    control = directory / "cgroup.subtree_control"
    enabled = control.read_text().split()
    wanted = [name for name in V2_CONTROLLERS if name not in enabled]
    if wanted:
        _write(control, " ".join(f"+{name}" for name in wanted))


def new_job_name(job_id: str) -> str:
    """A cgroup name for a job: its id and a random part (one process may run a job id
    twice at once: the two halves of a run with a client host)."""
    return f"{job_id}-{secrets.token_hex(4)}"


def _write(path: Path, value: str) -> None:
    with open(path, "w") as file:
        file.write(value)


def _read_pids(path: Path) -> Iterator[int]:
    try:
        text = path.read_text()
    except FileNotFoundError:
        return
    for line in text.split():
        yield int(line)


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        logger.debug("job process %s ended before the cgroup's kill reached it", pid)
