"""Which install a job gets: `ensure_install` picks one found on the host or in the cache,
or downloads a prebuilt release; `list_installs` is what `python -m agents installs` prints.
"""

import logging
import re
from pathlib import Path
from typing import TypedDict

from agents.contract.errors import JobError
from agents.contract.reports.installs import InstallRecord
from agents.contract.vocabulary import SOURCES
from agents.postgres.installs.inventory import (
    Install,
    Progress,
    find_cached_installs,
    find_system_installs,
    matches_version,
    noop,
    version_key,
)
from agents.postgres.installs.prebuilt import (
    available_prebuilt_versions,
    download_prebuilt,
    recent_prebuilt_versions,
)

logger = logging.getLogger(__name__)

VERSION_PATTERN = re.compile(r"^(\d+)(?:\.(\d+))?$")


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
        available = recent_prebuilt_versions(cache_dir)
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


def _newest_per_major(versions: list[str]) -> list[str]:
    newest: dict[str, str] = {}
    for version in sorted(versions, key=version_key):
        newest[version.split(".")[0]] = version
    return sorted(newest.values(), key=version_key)


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
