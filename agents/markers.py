"""The marker file in every directory a cluster or a client half creates
(agents/postgres/cluster/directories.py), and a process's start time that tells it apart.

It names the job and the process that created the directory, so a cluster
removes only its own directories and a leftover cluster is told from a live one
(agents/postgres/cluster/leftovers.py).
"""

import os
import re
from dataclasses import dataclass
from pathlib import Path

MARKER = ".benchlab-cluster"
JOB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
OWNER_LINE = re.compile(r"(?P<pid>[0-9]+) (?P<start>[0-9]+)")


def process_start(pid: int) -> int | None:
    """When a running process started, in clock ticks after boot (/proc/<pid>/stat field
    22: unlike a wall-clock time, a clock step does not move it); None once it exited."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    state, *fields = stat.rpartition(")")[2].split()
    return None if state in ("Z", "X") else int(fields[18])


@dataclass(frozen=True)
class ClusterMarker:
    """The marker file in each directory a cluster creates: its job on the first line,
    then the pid and start time of the process that created it (the start time tells
    a reused pid apart). A marker without the second line has no known owner."""

    job_id: str
    owner_pid: int | None = None
    owner_start: int | None = None

    @classmethod
    def for_this_process(cls, job_id: str) -> "ClusterMarker":
        return cls(job_id, os.getpid(), process_start(os.getpid()))

    @classmethod
    def read(cls, directory: Path) -> "ClusterMarker | None":
        """The marker in `directory`, or None when there is no usable one."""
        path = directory / MARKER
        if path.is_symlink() or not path.is_file():
            return None
        job_id, _, owner = path.read_text().partition("\n")
        if not JOB_ID.match(job_id):
            return None
        match = OWNER_LINE.fullmatch(owner.strip())
        if match is None:
            return cls(job_id)
        return cls(job_id, int(match["pid"]), int(match["start"]))

    def write(self, directory: Path) -> None:
        (directory / MARKER).write_text(f"{self.job_id}\n{self.owner_pid} {self.owner_start}\n")

    def owner_alive(self) -> bool:
        """Whether the process that created the cluster still runs."""
        if self.owner_pid is None:
            return False
        return process_start(self.owner_pid) == self.owner_start
