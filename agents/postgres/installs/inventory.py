"""PostgreSQL installs on this host: the `Install` type, and those found in the system's
directories and in the agent's cache of prebuilt releases and builds.

Every install is verified by running its `postgres --version` and `pgbench --version`
before it is used. `Progress` is how the long steps of getting an install (a
download, a build) report.
"""

import logging
import os
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from agents.contract.reports.installs import InstallRecord

logger = logging.getLogger(__name__)

DEBIAN_GLOB = "/usr/lib/postgresql/*/bin"

REQUIRED_PROGRAMS = ("postgres", "initdb", "pg_ctl", "pgbench")

REPORTED_VERSION = re.compile(r"\(PostgreSQL\) (\d+(?:\.\d+)*)")

Progress = Callable[[str, float | None], None]


def noop(message: str, percent: float | None) -> None:
    """The default progress callback: report nothing."""


@dataclass(frozen=True)
class Install:
    """One usable set of PostgreSQL binaries (server, initdb, pg_ctl, pgbench)."""

    version: str
    major: int
    source: str
    bindir: Path
    postgres_version: str
    pgbench_version: str

    @property
    def version_num(self) -> int:
        """The server's `server_version_num`: 90624 for 9.6.24, 150018 for 15.18."""
        parts = [int(part) for part in self.version.split(".")] + [0, 0]
        if parts[0] >= 10:
            return parts[0] * 10000 + parts[1]
        return parts[0] * 10000 + parts[1] * 100 + parts[2]

    @property
    def root(self) -> Path:
        """The install's directory (bin/, lib/, share/): what a sandbox shows read-only."""
        return self.bindir.parent

    def program(self, name: str) -> Path:
        """Path of one of this install's programs, e.g. `install.program("initdb")`."""
        return self.bindir / name

    def as_dict(self) -> InstallRecord:
        """The install as it appears in the result document."""
        return {
            "version": self.version,
            "major": self.major,
            "source": self.source,
            "bindir": str(self.bindir),
            "postgres_version": self.postgres_version,
            "pgbench_version": self.pgbench_version,
        }


def version_key(version: str) -> tuple[int, ...]:
    """Sort key for dotted versions: "16.9" < "16.15"."""
    return tuple(int(part) for part in version.split("."))


def major_of(version: str) -> str:
    """The major release a version belongs to: "15" for 15.18, "9.6" for 9.6.24."""
    parts = version.split(".")
    return ".".join(parts[:2]) if int(parts[0]) < 10 else parts[0]


def matches_version(install_version: str, requested: str) -> bool:
    """True when an install of `install_version` is what `requested` ("16", "16.9", "9.6") asks."""
    return install_version == requested or major_of(install_version) == requested


def _run_version(program: Path) -> str:
    result = subprocess.run(
        [str(program), "--version"], capture_output=True, text=True, timeout=30, check=True
    )
    return result.stdout.strip()


def inspect_bindir(bindir: Path, source: str) -> Install | None:
    """The install in `bindir`, or None when programs are missing or do not run."""
    if not all(os.access(bindir / name, os.X_OK) for name in REQUIRED_PROGRAMS):
        return None
    try:
        postgres_version = _run_version(bindir / "postgres")
        pgbench_version = _run_version(bindir / "pgbench")
    except (OSError, subprocess.SubprocessError) as error:
        logger.warning("skipping PostgreSQL binaries in %s: %s", bindir, error)
        return None
    match = REPORTED_VERSION.search(postgres_version)
    if match is None:
        logger.warning("skipping %s: unexpected version text %r", bindir, postgres_version)
        return None
    version = match.group(1)
    return Install(
        version=version,
        major=int(version.split(".")[0]),
        source=source,
        bindir=bindir,
        postgres_version=postgres_version,
        pgbench_version=pgbench_version,
    )


def _system_bindirs() -> list[Path]:
    candidates: list[Path] = []
    pg_config = shutil.which("pg_config")
    if pg_config:
        try:
            bindir = subprocess.run(
                [pg_config, "--bindir"], capture_output=True, text=True, timeout=30, check=True
            ).stdout.strip()
            candidates.append(Path(bindir))
        except (OSError, subprocess.SubprocessError) as error:
            logger.warning("pg_config --bindir failed: %s", error)
    postgres = shutil.which("postgres")
    if postgres:
        candidates.append(Path(postgres).resolve().parent)
    candidates.extend(sorted(Path("/").glob(DEBIAN_GLOB.lstrip("/"))))
    unique: dict[Path, None] = {}
    for candidate in candidates:
        unique.setdefault(candidate.resolve(), None)
    return list(unique)


def find_system_installs() -> list[Install]:
    """Installs already on the host (PATH, pg_config, Debian's layout), newest first."""
    installs = [inspect_bindir(bindir, "system") for bindir in _system_bindirs()]
    found = [install for install in installs if install is not None]
    return sorted(found, key=lambda install: version_key(install.version), reverse=True)


def cache_dir_name(version: str) -> str:
    return f"postgresql-{version}.0"


def find_cached_installs(cache_dir: Path) -> list[Install]:
    """Prebuilt releases already unpacked in `cache_dir`, newest first."""
    if not cache_dir.is_dir():
        return []
    installs = [
        inspect_bindir(path / "bin", "prebuilt")
        for path in cache_dir.glob("postgresql-*")
        if path.is_dir() and not path.name.endswith(".lock")
    ]
    found = [install for install in installs if install is not None]
    return sorted(found, key=lambda install: version_key(install.version), reverse=True)
