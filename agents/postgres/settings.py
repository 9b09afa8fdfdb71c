"""postgresql.conf settings on a live cluster: reading the catalogue, applying, reading back.

The catalogue and the validation of requested settings are pure and shared
with the lab (agents/contract/settings/catalogue.py). Here the agent reads a version's
catalogue from a real server once and caches it, and applies a job's settings:
it writes them into the cluster's own include file (`benchlab.conf` in the
data directory, included at the end of postgresql.conf), then restarts the
server and checks `pg_settings.pending_restart` and `pg_file_settings.error`.
"""

import logging
import re
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import TYPE_CHECKING

from agents.contract.errors import JobError
from agents.contract.reports.results import EffectiveSetting
from agents.contract.settings.catalogue import (
    CATALOGUE_QUERY,
    Catalogue,
    catalogue_from_rows,
    value_text,
)
from agents.contract.spec.document import SettingValue
from agents.postgres.installs.cache import write_atomically

if TYPE_CHECKING:
    import psycopg
    from psycopg.rows import TupleRow

    from agents.postgres.cluster.lifecycle import Cluster
    from agents.postgres.installs.inventory import Install

logger = logging.getLogger(__name__)

BENCHMARK_SETTINGS = (
    "server_version",
    "block_size",
    "wal_block_size",
    "wal_segment_size",
    "data_checksums",
    "shared_buffers",
    "huge_pages",
    "max_connections",
    "work_mem",
    "maintenance_work_mem",
    "effective_cache_size",
    "effective_io_concurrency",
    "random_page_cost",
    "wal_level",
    "wal_buffers",
    "wal_compression",
    "wal_sync_method",
    "wal_writer_delay",
    "synchronous_commit",
    "commit_delay",
    "fsync",
    "full_page_writes",
    "max_wal_size",
    "min_wal_size",
    "checkpoint_timeout",
    "checkpoint_completion_target",
    "bgwriter_delay",
    "bgwriter_lru_maxpages",
    "autovacuum",
    "max_worker_processes",
    "max_parallel_workers",
    "max_parallel_workers_per_gather",
    "jit",
    "io_method",
)

_PARAMETER_IN_LOG = re.compile(r'parameter "([^"]+)"')


# Reading the catalogue from a server, and caching it


def read_catalogue(cluster: "Cluster") -> Catalogue:
    """The pg_settings catalogue of a running cluster."""
    with cluster.connect() as conn:
        rows = conn.execute(CATALOGUE_QUERY).fetchall()
    return catalogue_from_rows(cluster.binaries.version, rows)


def catalogue_path(cache_dir: Path, version: str) -> Path:
    return cache_dir / f"catalogue-{version}.json"


def load_or_read_catalogue(
    install: "Install",
    cache_dir: Path,
    cluster_factory: Callable[[], AbstractContextManager["Cluster"]],
) -> Catalogue:
    """The catalogue of `install`'s exact version: from the cache, else from a server.

    `cluster_factory()` must return a context manager whose value is a running
    cluster of `install` (e.g. `running_cluster(...)`, or a `nullcontext` around
    a job's cluster that is already running); it is called only on a cache miss.
    """
    cached = read_cached_catalogue(catalogue_path(cache_dir, install.version))
    if cached is not None:
        return cached
    with cluster_factory() as cluster:
        catalogue = read_catalogue(cluster)
    write_atomically(catalogue_path(cache_dir, install.version), catalogue.as_json())
    return catalogue


def read_cached_catalogue(path: Path) -> Catalogue | None:
    """A cached catalogue file, or None when it is missing or unreadable (logged)."""
    try:
        return Catalogue.from_json(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError, KeyError, TypeError) as error:
        logger.warning("ignoring unreadable catalogue %s: %s", path, error)
        return None


# Applying settings to a cluster and reading them back


def _conf_line(name: str, value: object) -> str:
    # In quoted conf values a backslash starts an escape and '' is a quote.
    text = value_text(value).replace("\\", "\\\\").replace("'", "''")
    return f"{name.lower()} = '{text}'"


def settings_file_text(requested: Mapping[str, SettingValue]) -> str:
    """The include file for `requested` settings (already validated)."""
    lines = ["# Settings requested for this job (written by the BenchLab agent)."]
    lines += [_conf_line(name, value) for name, value in requested.items()]
    return "\n".join(lines) + "\n"


# pg_file_settings and pg_settings.pending_restart came in 9.5.
FIRST_WITH_FILE_SETTINGS = 90500


def apply_settings(cluster: "Cluster", requested: Mapping[str, SettingValue]) -> None:
    """Write `requested` into the cluster's include file, (re)start it and verify.

    Raises JobError(invalid_setting_value) naming the setting when the server
    refuses a value or a setting still waits for a restart.
    """
    cluster.write_settings_file(settings_file_text(requested))
    try:
        if cluster.is_running():
            cluster.restart()
        else:
            cluster.start()
    except JobError as error:
        raise _start_failure(error, cluster, requested) from error
    if cluster.binaries.version_num < FIRST_WITH_FILE_SETTINGS:
        return  # no pg_file_settings yet: a value the server refuses fails its start
    with cluster.connect() as conn:
        file_errors = conn.execute(
            "SELECT name, error FROM pg_file_settings WHERE error IS NOT NULL"
        ).fetchall()
        pending = conn.execute("SELECT name FROM pg_settings WHERE pending_restart").fetchall()
    problems = [(name, error) for name, error in file_errors]
    problems += [(name, "still waits for a restart") for (name,) in pending]
    if problems:
        name, reason = problems[0]
        raise JobError(
            "invalid_setting_value",
            f"{name}: not applied by the server: {reason}",
            field=f"settings.{_requested_name(name, requested)}",
        )


def _requested_name(name: str | None, requested: Mapping[str, SettingValue]) -> str:
    by_lower = {key.lower(): key for key in requested}
    return by_lower.get((name or "").lower(), name or "?")


def _start_failure(
    error: JobError, cluster: "Cluster", requested: Mapping[str, SettingValue]
) -> JobError:
    """A start failure that the server blamed on one of the requested settings."""
    by_lower = {key.lower() for key in requested}
    for line in reversed(cluster.log_tail(30).splitlines()):
        match = _PARAMETER_IN_LOG.search(line)
        if match and match.group(1).lower() in by_lower:
            name = _requested_name(match.group(1), requested)
            return JobError(
                "invalid_setting_value",
                f"{name}: the server refused to start with it: {line.strip()}",
                field=f"settings.{name}",
            )
    return error


def read_effective_settings(conn: "psycopg.Connection[TupleRow]") -> list[EffectiveSetting]:
    """Every setting not at its default, plus the benchmark-relevant ones, by name."""
    rows = conn.execute(
        "SELECT name, setting, unit, source FROM pg_settings "
        "WHERE source <> 'default' OR name = ANY(%s) ORDER BY name",
        (list(BENCHMARK_SETTINGS),),
    ).fetchall()
    return [
        {"name": name, "setting": setting, "unit": unit, "source": source}
        for name, setting, unit, source in rows
    ]


# Internal settings that describe the session or the cluster, not the build.
NOT_COMPILED = ("server_version", "server_version_num", "server_encoding", "in_hot_standby")


def read_compiled_settings(conn: "psycopg.Connection[TupleRow]") -> dict[str, str]:
    """The compile-time settings the server reports: {"block_size": "8192", ...}."""
    rows = conn.execute(
        "SELECT name, setting, unit FROM pg_settings WHERE context = 'internal' ORDER BY name"
    ).fetchall()
    return {
        name: f"{setting} {unit}" if unit else setting
        for name, setting, unit in rows
        if name not in NOT_COMPILED and not name.startswith("lc_")
    }
