"""A cluster's directories and files, as lifecycle.py creates and removes them.

Created: owned by the PostgreSQL OS user, reachable by it, marked with the job and
the process that made them (markers.py); the socket path short enough for a Unix
socket; postgresql.conf pointed at the private socket directory and, last, at the
job's settings file. Removed: only a directory whose marker names the job, after
the server processes still working in the data directory are killed.
"""

import contextlib
import logging
import re
from pathlib import Path

import psutil

from agents.contract.errors import JobError
from agents.markers import ClusterMarker
from agents.postgres.osuser import OsUser, chown_tree, make_dirs

logger = logging.getLogger(__name__)

SETTINGS_FILE = "benchlab.conf"
# sun_path holds 108 bytes including the terminating NUL.
MAX_SOCKET_PATH = 107


def usable_job_id(name: str) -> str:
    """`name` (a run id) as a job id JOB_ID accepts: characters other than ASCII letters,
    digits, '-' and '_' become '-', leading '-' and '_' go, at most 48 characters (the
    socket path must stay short); "local" when nothing is left."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", name).lstrip("-_")[:48] or "local"


def untraversable(path: Path, user: OsUser) -> Path | None:
    """The first of `path` and its parents that `user` cannot traverse, or None."""
    for directory in [path, *path.parents]:
        status = directory.stat()
        if status.st_uid == user.uid:
            bit = 0o100
        elif status.st_gid == user.gid:
            bit = 0o010
        else:
            bit = 0o001
        if not status.st_mode & bit:
            return directory
    return None


def require_reachable(path: Path, what: str, user: OsUser) -> None:
    """Raise JobError(initdb_failed) naming the directory `user` cannot traverse to `path`."""
    unreachable = untraversable(path, user)
    if unreachable is not None:
        raise JobError(
            "initdb_failed",
            f"{what} in {path} cannot be reached: {unreachable} cannot be traversed by "
            f"OS user {user.name} (mode {unreachable.stat().st_mode & 0o777:o}); "
            "allow it (chmod o+x) or choose another directory",
        )


def create_owned_dir(path: Path, job_id: str, user: OsUser) -> None:
    """Create `path` (never reused), marked as job `job_id`'s and owned by `user`."""
    make_dirs(path.parent)
    require_reachable(path.parent, "the storage directory", user)
    try:
        path.mkdir(mode=0o700)
    except FileExistsError:
        raise JobError(
            "initdb_failed",
            f"{path} already exists (left by an earlier run of job {job_id}, or not "
            "BenchLab's) and is never reused: remove it if nothing uses it, or use another "
            "run id or storage directory",
        ) from None
    ClusterMarker.for_this_process(job_id).write(path)
    chown_tree(path, user)


def check_socket_path(socket_dir: Path) -> None:
    """Raise JobError(initdb_failed) when a socket in `socket_dir` would not fit sun_path."""
    longest = socket_dir / ".s.PGSQL.65535"
    if len(str(longest).encode()) > MAX_SOCKET_PATH:
        raise JobError(
            "initdb_failed",
            f"socket path {longest} is longer than {MAX_SOCKET_PATH} bytes: "
            "use a shorter storage directory",
        )


def base_config(socket_dir: Path) -> str:
    """What postgresql.conf gets after initdb: how the agent reaches the cluster, then
    the job's settings file, included last."""
    quoted_dir = str(socket_dir).replace("'", "''")
    lines = [
        "",
        "# Added by BenchLab: how the agent reaches this throw-away cluster.",
        "listen_addresses = '127.0.0.1'",
        f"unix_socket_directories = '{quoted_dir}'",
        "# The job's requested settings (agents.postgres.settings), read last.",
        f"include '{SETTINGS_FILE}'",
        "",
    ]
    return "\n".join(lines)


def marked_for_job(directory: Path, job_id: str) -> bool:
    """True when `directory` carries the marker of job `job_id`."""
    try:
        marker = ClusterMarker.read(directory)
    except OSError:
        return False
    return marker is not None and marker.job_id == job_id


def kill_stragglers(job_dir: Path, cluster: object) -> None:
    """Kill leftover job processes: those working inside `job_dir` (the server in its data
    directory, a pgbench and its sandbox in theirs) that outlived the agent that ran them.

    A job's cgroup ends its programs wherever they work (agents/cgroups.py); this still
    ends the agent's own perf, a cluster started outside a job, and the programs of a
    host that gives no cgroups (where the jobs running lab code are refused)."""
    leftovers = []
    for process in psutil.process_iter(["pid"]):
        with contextlib.suppress(psutil.Error):
            if Path(process.cwd()).is_relative_to(job_dir):
                leftovers.append(process)
    for process in leftovers:
        logger.warning("killing leftover job process %s of %s", process.pid, cluster)
        with contextlib.suppress(psutil.Error):
            process.kill()
    psutil.wait_procs(leftovers, timeout=10)
