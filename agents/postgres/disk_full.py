"""Telling a full storage target from any other failure of a job's step.

A disk that fills during `pgbench -i` or a point shows up as whatever the
step reported: `PQputline failed` (the server PANICked when pg_wal could not
grow), `PQendcopy failed` (a table could not be extended), a dead server. The
signs are the server's own words, in pgbench's stderr or in the server log
(which lives on the data target and may itself have found no room), and
statvfs of the targets right after the failure. A step that failed with one
of them fails the job as `disk_full`, naming the target and what filled it.
"""

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agents.contract.errors import JobError
from agents.contract.spec.space import megabytes

logger = logging.getLogger(__name__)

# The server's words for a full disk; "could not extend file" is how a table that
# cannot grow reads ("... with FileFallocate(): No space left on device").
DISK_FULL_SIGN = re.compile(
    r"No space left on device|Disk quota exceeded|could not extend file", re.IGNORECASE
)
WAL_FILE = re.compile(r"pg_wal/|pg_xlog/|xlogtemp")
# The server log's line prefix: "2026-11-25 12:36:21.112 UTC [12392] ".
LOG_PREFIX = re.compile(r"^\d{4}-\d\d-\d\d [\d:.]+ \S+ \[\d+\] ")
# Where the server's own words start in a line that has more in front.
SERVER_WORDS = re.compile(r"\b(ERROR|PANIC|FATAL|LOG|WARNING):.*")
# A target with less than this left (for the database's OS user) counts as full.
FULL_BELOW_BYTES = 1024**2


@dataclass(frozen=True)
class Target:
    """A storage target a job's cluster sits on, by role ("data" or "wal")."""

    role: str
    name: str
    path: Path


@dataclass(frozen=True)
class Space:
    free_bytes: int
    total_bytes: int


def space_of(path: Path) -> Space | None:
    """Free (for unprivileged users) and total bytes of the filesystem holding `path`."""
    try:
        stats = os.statvfs(path)
    except OSError as error:
        logger.warning("no free-space figure for %s: %s", path, error)
        return None
    return Space(stats.f_bavail * stats.f_frsize, stats.f_blocks * stats.f_frsize)


def sign_line(text: str) -> str | None:
    """The last line of `text` that says a disk is full, stripped; None when none does.
    Lines end at a newline or at the " | " a job error joins output lines with."""
    found = re.split(r"\n| \| ", text)
    lines = [line.strip() for line in found if DISK_FULL_SIGN.search(line)]
    if not lines:
        return None
    server = SERVER_WORDS.search(lines[-1])
    return server.group(0) if server else lines[-1]


def directory_bytes(path: Path | None, skip: Path | None = None) -> int:
    """Bytes in the files under `path` (0 when absent), leaving out the tree `skip`."""
    if path is None or not path.is_dir():
        return 0
    total = 0

    def unreadable(error: OSError) -> None:
        logger.warning("size of %s is short: cannot read %s", path, error.filename)

    for root, dirs, files in os.walk(path, onerror=unreadable):
        if skip is not None:
            dirs[:] = [d for d in dirs if Path(root, d) != skip]
        for name in files:
            try:
                total += os.lstat(Path(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue  # removed while we walked (a recycled WAL segment)
    return total


@dataclass(frozen=True)
class ClusterPlaces:
    """Where a cluster keeps its files: the data directory and, when apart, its WAL."""

    data_dir: Path
    wal_dir: Path | None

    def usage(self) -> dict[str, int]:
        """Bytes of tables and the rest of the data directory, and of WAL, now."""
        wal = self.wal_dir or self.data_dir / "pg_wal"
        return {"data": directory_bytes(self.data_dir, skip=wal), "wal": directory_bytes(wal)}


def disk_full_error(
    failure: JobError,
    server_log: str,
    targets: list[Target],
    places: ClusterPlaces | None,
    doing: str,
) -> JobError | None:
    """`failure` as `disk_full` when a target filled up, else None.

    `doing` says what the job was doing ("pgbench -i at scale 10"); the
    message names the target, its space, what the cluster held there and the
    server's words.
    """
    if not targets:
        return None
    said = sign_line(failure.message) or sign_line(server_log)
    space = {target.role: space_of(target.path) for target in targets}
    full = [t for t in targets if (s := space[t.role]) and s.free_bytes < FULL_BELOW_BYTES]
    if said is None and not full:
        return None
    target = _target_named(said, targets) or (full[0] if full else targets[0])
    message = _message(target, space[target.role], places, doing, said)
    logger.warning("disk full: %s (the step said: %s)", message, failure.message)
    return JobError("disk_full", message, field=f"storage.{target.role}")


def _target_named(said: str | None, targets: list[Target]) -> Target | None:
    """The target the server's message is about: WAL files lie on the WAL target when
    WAL is apart, everything else on the data target."""
    if said is None:
        return None
    roles = {target.role: target for target in targets}
    if WAL_FILE.search(said) and "wal" in roles:
        return roles["wal"]
    return roles.get("data")


def _message(
    target: Target, space: Space | None, places: ClusterPlaces | None, doing: str, said: str | None
) -> str:
    # Read after the step failed: an aborted load has given some space back by then.
    free = (
        f"{megabytes(space.total_bytes)}, {megabytes(space.free_bytes)} free after the failure"
        if space
        else "free space unknown"
    )
    text = f"the {target.role} storage target “{target.name}” ({target.path}, {free}) was full"
    text += f": it filled during {doing}"
    if places is not None:
        usage = places.usage()
        held = (
            f"WAL {megabytes(usage['wal'])}"
            if target.role == "wal"
            else f"data files {megabytes(usage['data'])}"
            + ("" if places.wal_dir else f", WAL {megabytes(usage['wal'])}")
        )
        text += f", where this job's cluster held {held}"
    if said:
        text += f"; the server said: {LOG_PREFIX.sub('', said)[-300:]}"
    return (
        text + ". Choose a smaller dataset.scale, or a storage target with more free space "
        f"for storage.{target.role}"
    )
