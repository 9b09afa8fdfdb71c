"""The agent's ledger: the jobs it started and finished, kept on disk (exactly once).

One JSON file per job under `<state_dir>/ledger/<agent name>/`, named by a
digest of the job id, written atomically (a temporary file, fsync, rename).
A job is `started` before anything of it runs and `finished`, with its result
document, before that document is sent. So:

- a job delivered again whose entry is finished is answered with the result
  the ledger holds, never measured again;
- an entry still `started` when the agent starts was cut short (the agent was
  killed, the host rebooted): the job is reported failed as `agent_restarted`,
  never run again;
- a finished entry stays `unconfirmed` (named in heartbeats) until the lab says
  it stored the result (`wire.settled_key`), and is forgotten after KEEP_S. The
  confirmation is an empty `<entry>.confirmed` file beside the entry: the heartbeat
  confirms, often while the next job measures, and writing the entry again (its
  result and log) cost tens of milliseconds of the agent's CPU inside that window.

A finished entry also keeps the job's log (its `status`, `step` and `log`
events, at most LOG_KEPT, each with its own seq and time): a job answered
from the ledger after the lab lost its events (Redis emptied before the lab
stored them) shows the steps it took, when it took them.
"""

import hashlib
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal

from agents.contract.reports.results import ResultDocument

logger = logging.getLogger(__name__)

# A finished entry is kept this long: longer than any redelivery (Celery's visibility
# timeout is an hour) or any resend of the reaper.
KEEP_S = 7 * 24 * 3600
# Heartbeats name at most this many unconfirmed jobs, the newest first.
MAX_UNCONFIRMED = 20
# The events of a job's log a finished entry keeps: the first LOG_HEAD (how it started)
# and the latest others (how it ended); a source build's progress alone can be a hundred.
LOG_TYPES = ("status", "step", "log")
LOG_KEPT = 300
LOG_HEAD = 100

# A listing of the ledger's directory is reused while the directory is unchanged, once it
# had been so this long before it was read: a write in the same tick of the file system's
# clock as the read may leave the directory's mtime as it was.
SETTLED_S = 1.0

EntryState = Literal["started", "finished"]


@dataclass
class LedgerEntry:
    """One job as the ledger knows it; `token` is the dispatch that started it."""

    job_id: str
    run_id: str
    token: str | None
    state: EntryState
    started_at: float
    finished_at: float | None = None
    confirmed: bool = False
    result: dict[str, Any] | None = field(default=None)
    # The job's log events ({seq, ts, type, data}), in order; `log_dropped` left out.
    log: list[dict[str, Any]] = field(default_factory=list)
    log_dropped: int = 0


ENTRY_FIELDS = tuple(entry_field.name for entry_field in fields(LedgerEntry))


class JobLog:
    """The log events of a running job, kept in memory until its entry is finished
    (nothing is written to disk while the job measures): at most LOG_KEPT."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self.dropped = 0

    def keep(self, event: dict[str, Any]) -> None:
        """Keep a log, status or step event (others are not the job's log)."""
        if event.get("type") not in LOG_TYPES:
            return
        kept = {key: event.get(key) for key in ("seq", "ts", "type", "data")}
        self.events.append(kept)
        if len(self.events) > LOG_KEPT:
            del self.events[LOG_HEAD]
            self.dropped += 1


@dataclass(frozen=True)
class _Seen:
    """What the last read of an entry file found, valid while the file is unchanged (the
    same inode, mtime and size: every write replaces the file)."""

    identity: tuple[int, int, int]
    finished_at: float | None
    # The entry while the lab has not confirmed it; None once confirmed (nothing more of
    # it is needed until it is forgotten, so it is not kept in memory either).
    entry: LedgerEntry | None


@dataclass(frozen=True)
class _Listing:
    """The unconfirmed entries one read of the directory found, valid while the directory
    is unchanged (every write of an entry creates and renames a file in it) and no entry
    is due to be forgotten."""

    identity: tuple[int, int]
    unconfirmed: list[LedgerEntry]
    valid_until: float


class Ledger:
    """The ledger of one agent (by name) in its state directory."""

    def __init__(self, state_dir: Path, agent: str):
        self.directory = state_dir / "ledger" / agent
        # Entry files as the heartbeat last read them: each beat (every few seconds, also
        # while a point measures) parses only the files written since, not a week of
        # results and logs (docs/benchmarks.md, "Agent fidelity").
        self._seen: dict[Path, _Seen] = {}
        # ...and the directory as the last beat listed it: an unchanged one is not listed
        # again (a week of entries is a stat each).
        self._listing: _Listing | None = None

    def path(self, job_id: str) -> Path:
        return self.directory / f"{hashlib.sha256(job_id.encode()).hexdigest()[:32]}.json"

    def entry(self, job_id: str) -> LedgerEntry | None:
        """The job's entry; None when this agent never started it."""
        return self._read(self.path(job_id))

    def start(self, job_id: str, run_id: str, token: str | None) -> LedgerEntry:
        """Record that the job starts now (before anything of it runs)."""
        entry = LedgerEntry(job_id, run_id, token, "started", time.time())
        self._write(entry)
        return entry

    def finish(self, entry: LedgerEntry, result: ResultDocument, log: JobLog | None = None) -> None:
        """Record the job's result document (before it is sent) and its log."""
        entry.state, entry.finished_at, entry.result = "finished", time.time(), dict(result)
        if log is not None:
            entry.log, entry.log_dropped = list(log.events), log.dropped
        self._write(entry)

    def confirm(self, entry: LedgerEntry) -> None:
        """Record that the lab stored the job's result (the entry itself is not written)."""
        entry.confirmed = True
        path = self.path(entry.job_id)
        os.close(os.open(_confirmation_file(path), os.O_WRONLY | os.O_CREAT, 0o600))
        self._fsync_directory()
        seen = self._seen.get(path)
        if seen is not None:
            self._seen[path] = replace(seen, entry=None)

    def interrupted(self) -> list[LedgerEntry]:
        """The jobs started and never finished: cut short by an earlier agent process."""
        return [entry for entry in self._entries() if entry.state == "started"]

    def unconfirmed(self) -> list[LedgerEntry]:
        """Finished jobs whose result the lab has not confirmed, newest first (at most
        MAX_UNCONFIRMED); entries older than KEEP_S are removed on the way."""
        now = time.time()
        try:
            directory = self.directory.stat()
        except FileNotFoundError:
            return []
        identity = (directory.st_ino, directory.st_mtime_ns)
        listing = self._listing
        if listing is not None and listing.identity == identity and now < listing.valid_until:
            return list(listing.unconfirmed)
        unconfirmed = self._list(now)
        self._listing = None
        if now - directory.st_mtime_ns / 1e9 > SETTLED_S:
            finished = [seen.finished_at for seen in self._seen.values() if seen.finished_at]
            valid_until = min(finished, default=math.inf) + KEEP_S
            self._listing = _Listing(identity, unconfirmed, valid_until)
        return list(unconfirmed)

    def _list(self, now: float) -> list[LedgerEntry]:
        """Read the directory: its unconfirmed entries, the forgotten ones removed."""
        kept = []
        paths = sorted(self.directory.glob("*.json"))
        for gone in self._seen.keys() - set(paths):
            del self._seen[gone]
        for path in paths:
            seen = self._look(path)
            if seen is None:
                continue
            if seen.finished_at is not None and now - seen.finished_at > KEEP_S:
                path.unlink(missing_ok=True)
                _confirmation_file(path).unlink(missing_ok=True)
                del self._seen[path]
            elif seen.entry is not None and seen.entry.state == "finished":
                kept.append(seen.entry)
        kept.sort(key=lambda entry: entry.finished_at or 0.0, reverse=True)
        return kept[:MAX_UNCONFIRMED]

    def _look(self, path: Path) -> _Seen | None:
        """The file's entry as last read, read again only when the file changed; None once
        it is gone."""
        try:
            stat = path.stat()
        except FileNotFoundError:
            self._seen.pop(path, None)
            return None
        identity = (stat.st_ino, stat.st_mtime_ns, stat.st_size)
        seen = self._seen.get(path)
        if seen is not None and seen.identity == identity:
            return seen
        entry = self._read(path)
        if entry is None:
            self._seen.pop(path, None)
            return None
        finished_at = entry.finished_at if entry.state == "finished" else None
        seen = _Seen(identity, finished_at, None if entry.confirmed else entry)
        self._seen[path] = seen
        return seen

    def _entries(self) -> list[LedgerEntry]:
        found = (self._read(path) for path in sorted(self.directory.glob("*.json")))
        return [entry for entry in found if entry is not None]

    def _read(self, path: Path) -> LedgerEntry | None:
        try:
            entry = LedgerEntry(**json.loads(path.read_text()))
        except FileNotFoundError:
            return None
        entry.confirmed = entry.confirmed or _confirmation_file(path).exists()
        return entry

    def _write(self, entry: LedgerEntry) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        path = self.path(entry.job_id)
        temporary = path.with_name(path.name + ".tmp")
        with temporary.open("w") as out:
            # Field by field, not asdict: its deep copy of the result doubled the cost.
            json.dump({name: getattr(entry, name) for name in ENTRY_FIELDS}, out)
            out.flush()
            os.fsync(out.fileno())
        if not entry.confirmed:
            # An entry written again unconfirmed is not confirmed by an earlier file.
            _confirmation_file(path).unlink(missing_ok=True)
        os.replace(temporary, path)
        self._fsync_directory()

    def _fsync_directory(self) -> None:
        fd = os.open(self.directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _confirmation_file(path: Path) -> Path:
    """The empty file that says the lab confirmed the entry at `path`."""
    return path.with_name(path.name + ".confirmed")
