"""Telling a full storage target from any other failure of a job's step.

A disk that fills during `pgbench -i` or a point shows up as whatever the
step reported: `PQputline failed` (the server PANICked when pg_wal could not
grow), `PQendcopy failed` (a table could not be extended), a dead server. The
signs are the server's own words, in pgbench's stderr or in the server log
(which lives on the data target and may itself have found no room), and
statvfs of the targets right after the failure. A step that failed with one
of them fails the job as `disk_full`, naming the target and what filled it:
the filesystem's growth since the job started (the free space its facts
recorded then) against what this job's cluster holds there, and the space
the dataset needs against the filesystem's size. When another writer filled
the disk during the job, or other files left too little free before it
started for a dataset that fits the filesystem, a smaller dataset is not the
fix, and the message says who filled it.
"""

import logging
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import cast

from agents.contract.errors import JobError
from agents.contract.reports.results import ResultDocument
from agents.contract.spec.document import JobSpec
from agents.contract.spec.space import megabytes, space_needed

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
# Written by others since the job started, at least this much and this share of the
# filesystem's growth: another writer filled the disk (a busy filesystem's own logs
# during a long job that did fill it stay below).
OTHERS_AT_LEAST_BYTES = 16 * 1024**2
OTHERS_AT_LEAST_SHARE = 0.1


@dataclass(frozen=True)
class Target:
    """A storage target a job's cluster sits on, by role ("data" or "wal"), with the
    free bytes of its filesystem when the job started and the space the job's dataset
    needs there (agents/contract/spec/space.py); None where not known."""

    role: str
    name: str
    path: Path
    free_at_start: int | None = None
    needed: int | None = None


def job_targets(result: ResultDocument) -> list[Target]:
    """The job's targets from its result document: `storage` (role -> name, path), the
    facts collected before its cluster was created (`storage.<role>.free_bytes`) and the
    validated spec's space estimate (`storage` is recorded only for a validated spec)."""
    records = result["storage"]
    if not records:
        return []
    facts = result["facts"]
    described: Mapping[str, object] = facts["storage"] if facts else {}
    needed = {str(role): size for role, size in space_needed(cast(JobSpec, result["spec"])).items()}
    return [
        Target(
            role,
            str(entry["name"]),
            Path(entry["path"]),
            _free(described.get(role)),
            needed.get(role),
        )
        for role, entry in records.items()
    ]


def _free(described: object) -> int | None:
    free = described.get("free_bytes") if isinstance(described, Mapping) else None
    return free if isinstance(free, int) else None


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

    def bytes_on(self, target: Path, usage: Mapping[str, int]) -> int:
        """Of `usage`, the bytes on the filesystem holding `target` (WAL apart may lie on
        another one, or on the same one under another target's name)."""
        device = _device(target)
        wal = self.wal_dir or self.data_dir / "pg_wal"
        return sum(
            usage[part]
            for part, path in (("data", self.data_dir), ("wal", wal))
            if device is not None and _device(path) == device
        )


def _device(path: Path) -> int | None:
    try:
        return os.stat(path).st_dev
    except OSError:
        return None


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
    others = None
    if places is not None:
        usage = places.usage()
        held = (
            f"WAL {megabytes(usage['wal'])}"
            if target.role == "wal"
            else f"data files {megabytes(usage['data'])}"
            + ("" if places.wal_dir else f", WAL {megabytes(usage['wal'])}")
        )
        text += f", where this job's cluster held {held}"
        others = _written_by_others(target, space, places.bytes_on(target.path, usage))
    if said:
        text += f"; the server said: {LOG_PREFIX.sub('', said)[-300:]}"
    fix = f"a storage target with more free space for storage.{target.role}"
    others = others or _held_by_others(target, space)
    if others is not None:
        return f"{text}. {others}. Free space on it, or choose {fix}"
    started = (
        f" ({megabytes(target.free_at_start)} were free when the job started)"
        if target.free_at_start is not None
        else ""
    )
    return f"{text}. Choose a smaller dataset.scale, or {fix}{started}"


def _held_by_others(target: Target, space: Space | None) -> str | None:
    """Who filled the filesystem before the job started: the dataset fits the filesystem
    but not what other files left free then; None when it does not fit even an empty one
    (or a figure is missing)."""
    if target.free_at_start is None or target.needed is None or space is None:
        return None
    if target.needed > space.total_bytes or target.needed <= target.free_at_start:
        return None
    return (
        f"Other files filled it before the job started: {megabytes(target.free_at_start)} "
        f"of its {megabytes(space.total_bytes)} were free then, "
        f"{megabytes(space.total_bytes - target.free_at_start)} held by files outside this "
        f"job's cluster (another process on this host), and the dataset needs about "
        f"{megabytes(target.needed)} here (estimate with a 20% margin)"
    )


def _written_by_others(target: Target, space: Space | None, job_bytes: int) -> str | None:
    """Who filled the filesystem when it was not only this job: its used space grew by
    more than the job's cluster holds there, by at least OTHERS_AT_LEAST_BYTES and
    OTHERS_AT_LEAST_SHARE of the growth; None when the job's own files account for it."""
    if target.free_at_start is None or space is None:
        return None
    grown = target.free_at_start - space.free_bytes
    others = grown - job_bytes
    if others < max(OTHERS_AT_LEAST_BYTES, OTHERS_AT_LEAST_SHARE * grown):
        return None
    return (
        f"Another writer filled it: since the job started ({megabytes(target.free_at_start)} "
        f"free then) the filesystem's used space grew by {megabytes(grown)}, of which this "
        f"job's cluster holds {megabytes(job_bytes)}: {megabytes(others)} were written by "
        "another process on this host (files outside this job's cluster)"
    )
