"""initdb's output kept per binaries, copied into each new cluster instead of running initdb.

initdb runs the whole catalogue's bootstrap; copying the 38 MB and 1,000 files it
writes is cheaper, though not by much where the disk is still writing back the last
cluster: on a 2-core VM (docs/benchmarks.md) 0.07 s against initdb's 0.31 s in a
quiet loop, 0.86 s against 1.24 s with both CPUs busy, 0.9 to 1.05 s against 1.05 to
1.15 s inside jobs, 0.82 s against 1.61 s for an unoptimised build. Every job
makes a throw-away cluster (every round of an adaptive experiment, every step of a
bisection), so the first initdb with given binaries and options is kept, and later
clusters get a copy of it.

A template is exactly one initdb's data directory, taken before the server ever
started and before the agent added its own configuration: nothing a job sent has
reached it. It is keyed by everything initdb's output depends on here: its argv (the
data and WAL directories aside), the binaries (path, size, modification time, inode of
`postgres` and `initdb`) and the time zone initdb writes into postgresql.conf (`TZ`, or
the zone /etc/localtime links to). A copy
differs from a fresh initdb only in the system identifier and file times.

Templates live where the install's own cache lives (a source build keeps its own
beside its binaries, so removing the build removes them); only the agent reads and
writes them, and a template is moved into place whole (renamed), so a second agent
sharing the cache never sees a half-written one.
"""

import hashlib
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agents.markers import MARKER, ClusterMarker
from agents.postgres.installs.inventory import Install

logger = logging.getLogger(__name__)

TEMPLATES_DIR = "initdb-templates"
ABOUT_FILE = "template.json"
DATA_DIR = "data"
# The options whose value is a path of this job, not part of the template's identity.
JOB_PATH_OPTIONS = ("-D", "--waldir", "--xlogdir")
# Where initdb finds the host's time zone when TZ is not set.
LOCALTIME = "/etc/localtime"


@dataclass(frozen=True)
class Template:
    """A kept initdb data directory and the job whose initdb made it (its argv is in the
    template's ABOUT_FILE, for people reading the cache)."""

    data_dir: Path
    made_at: str
    made_for_job: str

    def note(self) -> str:
        """How a cluster copied from this template came to be, for the job's command list."""
        return (
            "not run for this job: its data directory is a copy of the output of this "
            f"initdb run on this host on {self.made_at} (job {self.made_for_job}) with the "
            "same binaries and options (agents/postgres/cluster/template.py)"
        )


def template_key(install: Install, argv: list[str]) -> str:
    """What makes two initdb runs write the same data directory, as a short hash."""
    identity: list[object] = [install.version_num, str(install.bindir.resolve())]
    identity += [_options(argv), os.environ.get("TZ"), os.path.realpath(LOCALTIME)]
    for program in ("postgres", "initdb"):
        status = install.program(program).stat()
        identity += [program, status.st_size, status.st_mtime_ns, status.st_ino]
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()[:24]


def _options(argv: list[str]) -> list[str]:
    """`argv` without the program and the per-job directory paths."""
    options: list[str] = []
    arguments = iter(argv[1:])
    for argument in arguments:
        if argument in JOB_PATH_OPTIONS:
            next(arguments, None)
            continue
        options.append(argument)
    return options


class TemplateStore:
    """The initdb templates under `root` (a cache directory of the agent's own)."""

    def __init__(self, root: Path) -> None:
        self.root = root / TEMPLATES_DIR

    def find(self, install: Install, argv: list[str]) -> Template | None:
        """The template for these binaries and options, or None when none was kept."""
        directory = self.root / template_key(install, argv)
        try:
            about = json.loads((directory / ABOUT_FILE).read_text())
        except FileNotFoundError:
            return None
        return Template(directory / DATA_DIR, about["made_at"], about["made_for_job"])

    def keep(
        self, install: Install, argv: list[str], data_dir: Path, wal_dir: Path | None, job_id: str
    ) -> None:
        """Keep `data_dir` (with `wal_dir`, where initdb put WAL apart), just written by
        `argv`, as the template for its binaries and options. WAL is kept inside, so the
        template serves clusters with WAL inside or apart. Links are copied as links, never
        followed, and output holding one is not kept (initdb makes none but `pg_wal`'s). A
        template another process kept first stays."""
        final = self.root / template_key(install, argv)
        if final.exists():
            return
        self.root.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._remove_abandoned_work()
        work = Path(tempfile.mkdtemp(dir=self.root, prefix=f".{final.name}."))
        ClusterMarker.for_this_process(job_id).write(work)
        try:
            data = work / DATA_DIR
            shutil.copytree(data_dir, data, symlinks=True, ignore=_wal_at_top(data_dir))
            shutil.copytree(wal_dir or data_dir / "pg_wal", data / "pg_wal", symlinks=True)
            links = [path for path in data.rglob("*") if path.is_symlink()]
            if links:
                logger.warning("initdb's output in %s is not kept: it holds %s", data_dir, links)
                shutil.rmtree(work)
                return
            made_at = time.strftime("%Y-%m-%d %H:%M:%S %Z")
            about = {"argv": argv, "made_at": made_at, "made_for_job": job_id}
            (work / ABOUT_FILE).write_text(json.dumps(about))
            os.rename(work, final)
            (final / MARKER).unlink()
        except OSError:
            shutil.rmtree(work, ignore_errors=True)
            if not final.exists():  # not kept by another process meanwhile
                raise

    def _remove_abandoned_work(self) -> None:
        """Remove what a process killed while keeping a template left: work directories
        whose creating process is gone (the marker of agents/markers.py).
        A miss after such a kill keeps the template again, so the next keep finds them."""
        for work in self.root.glob(".*"):
            marker = ClusterMarker.read(work) if work.is_dir() else None
            if marker is not None and not marker.owner_alive():
                logger.warning(
                    "removing %s: process %s that made it is gone", work, marker.owner_pid
                )
                shutil.rmtree(work, ignore_errors=True)


def copy_template(template: Template, data_dir: Path, wal_dir: Path | None) -> None:
    """Create `data_dir` as a copy of `template`; with `wal_dir`, its WAL goes there and
    `pg_wal` links to it, as `initdb --waldir` leaves it."""
    if wal_dir is None:
        shutil.copytree(template.data_dir, data_dir, symlinks=True)
        return
    shutil.copytree(
        template.data_dir, data_dir, symlinks=True, ignore=_wal_at_top(template.data_dir)
    )
    shutil.copytree(template.data_dir / "pg_wal", wal_dir, symlinks=True)
    os.symlink(wal_dir, data_dir / "pg_wal")


def _wal_at_top(data_dir: Path) -> Callable[[str, list[str]], set[str]]:
    """A copytree filter leaving out `data_dir`'s own pg_wal (a directory or a link)."""

    def ignore(directory: str, names: list[str]) -> set[str]:
        return {"pg_wal"} if Path(directory) == data_dir else set()

    return ignore
