"""The install cache's rules: one process fills an entry at a time (`locked`), a build
that outlived its agent is killed by the next holder of the entry's lock
(`kill_leftover_builds`), and what an entry holds is the agent's own and read-only to the
PostgreSQL OS user (`seal_install`). An entry is a build's install beside its record
(`new_record`, written last by `store_entry`: an entry without one is unfinished)."""

import fcntl
import hashlib
import json
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from agents.contract.builds.definition import BuildDefinition, BuildRecord
from agents.postgres.cluster.directories import kill_stragglers

RECORD_FILE = "BUILD.json"


def write_atomically(path: Path, text: str) -> None:
    """`text` into `path` (world-readable), whole or not at all: written beside it, then
    renamed over it."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def kill_leftover_builds(work_dirs: Iterable[Path], what: str, remove: bool) -> None:
    """Kill the processes still working inside `work_dirs`, then remove the directories
    when `remove` (a tarball build's scratch; a kept tree stays).

    Build steps run in their own session, so `make` and the compiler outlive an agent
    that was killed. Call this holding the entry's lock: holding it proves the agent
    that built there is gone (a live one would hold it).
    """
    for work in work_dirs:
        kill_stragglers(work, what)
        if remove:
            shutil.rmtree(work)


def make_world_readable(root: Path) -> None:
    """Let the unprivileged PostgreSQL user read every file and run every program.

    Symbolic links are left alone, never followed (`os.walk` lists a link to a
    directory among the directories).
    """
    root.chmod(0o755)
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            path = Path(directory) / name
            if path.is_symlink():
                continue
            mode = path.stat().st_mode
            path.chmod(0o755 if path.is_dir() or mode & 0o100 else 0o644)


def seal_install(root: Path) -> None:
    """Make an install the agent's own and read-only to everyone else.

    A source build runs as the job's OS user and leaves its files to that user;
    sealed, no later job (that user too) can rewrite the binaries other runs use.
    Symbolic links are changed themselves, never followed: a build may have
    planted one pointing anywhere.
    """
    uid, gid = os.geteuid(), os.getegid()
    os.chown(root, uid, gid, follow_symlinks=False)
    for directory, subdirs, files in os.walk(root):
        for name in subdirs + files:
            os.chown(Path(directory) / name, uid, gid, follow_symlinks=False)
    make_world_readable(root)


def new_record(
    key: str, definition: BuildDefinition, source_digest: str, compiler: str
) -> BuildRecord:
    """The record of the entry `key`, as a reused one reads until a build fills it in."""
    patches = [
        {"name": p["name"], "sha256": hashlib.sha256(p["diff"].encode()).hexdigest()}
        for p in definition["patches"]
    ]
    return {
        "key": key,
        "definition": definition,
        "source_digest": source_digest,
        "compiler": compiler,
        "patches": patches,
        "reused": True,
        "seconds": None,
        "failed_step": None,
        "log": "",
    }


def store_entry(target: Path, record: BuildRecord, started: float) -> None:
    """Seal the install built into `target` and write its log and, last, its record
    (`started`: the build's `time.monotonic()` start)."""
    seal_install(target)
    record["seconds"] = round(time.monotonic() - started, 1)
    (target / "build.log").write_text(record["log"])
    (target / RECORD_FILE).write_text(json.dumps(record, indent=2))
