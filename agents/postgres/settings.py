"""postgresql.conf settings: the version's catalogue, validation, applying, reading back.

Validation needs no server: it checks requested settings against a `Catalogue`
(the rows of one exact PostgreSQL version's `pg_settings`), which the agent reads
once per version from a real server and caches as JSON. The web tier stores the
same JSON and validates config profiles with the same functions, so the
catalogue and validation parts of this module are pure Python.

Applying writes the settings into the cluster's own include file
(`benchlab.conf` in the data directory, included at the end of postgresql.conf),
then restarts the server and checks `pg_settings.pending_restart` and
`pg_file_settings.error`.
"""

import difflib
import json
import logging
import os
import re
import tempfile
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from agents.errors import JobError
from agents.postgres import guc_values

if TYPE_CHECKING:
    import psycopg

    from agents.postgres.cluster import Cluster
    from agents.postgres.installs import Install

logger = logging.getLogger(__name__)

CATALOGUE_FORMAT = 1

_RUNS_COMMANDS = "runs shell commands on the host"
_LOADS_CODE = "loads code into the server"
_TAKES_PATH = "points the server at files or directories on the host"
_MANAGED = "is managed by the agent for the throw-away cluster"
_INCLUDES = "pulls other files into the configuration"

REFUSED_SETTINGS: dict[str, str] = {
    **dict.fromkeys(
        [
            "archive_command",
            "restore_command",
            "archive_cleanup_command",
            "recovery_end_command",
            "ssl_passphrase_command",
        ],
        _RUNS_COMMANDS,
    ),
    **dict.fromkeys(
        [
            "shared_preload_libraries",
            "session_preload_libraries",
            "local_preload_libraries",
            "dynamic_library_path",
            "jit_provider",
            "archive_library",
            "oauth_validator_libraries",
            "extension_control_path",
            "output_plugin_libraries",
        ],
        _LOADS_CODE,
    ),
    **dict.fromkeys(
        [
            "data_directory",
            "config_file",
            "hba_file",
            "ident_file",
            "external_pid_file",
            "log_directory",
            "log_filename",
            "ssl_cert_file",
            "ssl_key_file",
            "ssl_ca_file",
            "ssl_crl_file",
            "ssl_crl_dir",
            "ssl_dh_params_file",
            "krb_server_keyfile",
            "stats_temp_directory",
            "promote_trigger_file",
            "event_source",
        ],
        _TAKES_PATH,
    ),
    **dict.fromkeys(
        [
            "listen_addresses",
            "port",
            "unix_socket_directories",
            "unix_socket_directory",
            "unix_socket_group",
            "unix_socket_permissions",
        ],
        _MANAGED,
    ),
    **dict.fromkeys(["include", "include_if_exists", "include_dir"], _INCLUDES),
    "primary_conninfo": "connects the server to other hosts",
    "debug_io_direct": "is a developer option that bypasses the kernel page cache",
}

UNSAFE_SETTINGS: dict[str, str] = {
    "fsync": "the server does not make commits durable and the cluster cannot survive a crash",
    "full_page_writes": "a crash can leave torn pages: the cluster cannot survive a crash",
}

# Settings pg_settings lists but PostgreSQL ignores in configuration files.
SESSION_ONLY_SETTINGS = {
    "role",
    "session_authorization",
    "seed",
    "transaction_isolation",
    "transaction_read_only",
    "transaction_deferrable",
}

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


@dataclass(frozen=True)
class SettingInfo:
    """One row of pg_settings, as text exactly as the server reports it."""

    name: str
    setting: str | None
    unit: str | None
    vartype: str
    min_val: str | None
    max_val: str | None
    enumvals: tuple[str, ...] | None
    context: str
    boot_val: str | None
    short_desc: str | None = None


@dataclass(frozen=True)
class Catalogue:
    """The settings one exact PostgreSQL version knows, keyed by lower-case name."""

    version: str
    settings: dict[str, SettingInfo]

    def get(self, name: str) -> SettingInfo | None:
        return self.settings.get(name.lower())

    def as_dict(self) -> dict:
        rows = []
        for info in self.settings.values():
            row = asdict(info)
            row["enumvals"] = list(info.enumvals) if info.enumvals is not None else None
            rows.append(row)
        return {"format": CATALOGUE_FORMAT, "version": self.version, "settings": rows}

    @classmethod
    def from_dict(cls, data: dict) -> "Catalogue":
        if data.get("format") != CATALOGUE_FORMAT:
            raise ValueError(f"unsupported catalogue format {data.get('format')!r}")
        settings = {}
        for row in data["settings"]:
            enumvals = tuple(row["enumvals"]) if row.get("enumvals") is not None else None
            info = SettingInfo(**{**row, "enumvals": enumvals})
            settings[info.name.lower()] = info
        return cls(version=data["version"], settings=settings)

    def as_json(self) -> str:
        return json.dumps(self.as_dict(), indent=1, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> "Catalogue":
        return cls.from_dict(json.loads(text))


# Validation (pure: no server needed)


def value_text(value: object) -> str:
    """A spec value (string, number or boolean) as postgresql.conf text."""
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, int | float | str):
        return str(value)
    raise ValueError("must be a string, a number or a boolean")


def _enum_matches(text: str, info: SettingInfo) -> bool:
    allowed = [value.lower() for value in info.enumvals or ()]
    if text.lower() in allowed:
        return True
    # Enums that offer on/off also accept PostgreSQL's hidden boolean spellings,
    # which pg_settings does not list (synchronous_commit = true, huge_pages = 0).
    hidden = ("true", "false", "yes", "no", "1", "0")
    return "on" in allowed and "off" in allowed and text.lower() in hidden


def _range_text(info: SettingInfo) -> str:
    def bound(raw: str) -> str:
        number = float(raw)
        if info.unit and guc_values.unit_kind(info.unit) and number > 0:
            return f"{raw} ({guc_values.humanize(number, info.unit)})"
        return raw

    text = f"must be between {bound(info.min_val)} and {bound(info.max_val)}"
    return f"{text} in units of {info.unit}" if info.unit else text


def _check_value(name: str, value: object, info: SettingInfo) -> str | None:
    """Why `value` is not acceptable for `info`, or None when it is."""
    try:
        text = value_text(value)
    except ValueError as error:
        return f"{name}: {error}"
    shown = json.dumps(text)
    if info.context == "internal":
        return f"{name}: cannot be set (fixed when PostgreSQL was built or the cluster created)"
    if name.lower() in SESSION_ONLY_SETTINGS:
        return f"{name}: cannot be set in a configuration file (it is per session)"
    if "\n" in text or "\r" in text or "\0" in text:
        return f"{name}: {shown} must be a single line"
    try:
        if info.vartype == "bool":
            guc_values.parse_bool(text)
        elif info.vartype == "enum" and not _enum_matches(text, info):
            return f"{name}: {shown} is not one of {', '.join(info.enumvals or ())}"
        elif info.vartype in ("integer", "real"):
            parse = guc_values.parse_integer if info.vartype == "integer" else guc_values.parse_real
            number = parse(text, info.unit)
            if not float(info.min_val) <= number <= float(info.max_val):
                return f"{name}: {shown} is out of range: {_range_text(info)}"
    except ValueError as error:
        return f"{name}: {shown} {error}"
    return None


def _unknown_message(name: str, catalogue: Catalogue) -> str:
    close = difflib.get_close_matches(name.lower(), catalogue.settings, n=1, cutoff=0.7)
    hint = f' (did you mean "{close[0]}"?)' if close else ""
    return f"{name}: unknown setting in PostgreSQL {catalogue.version}{hint}"


def _refusal(name: str, allowed: set[str]) -> str | None:
    """Why `name` is refused (it runs commands, loads code, takes a path), or None."""
    lowered = name.lower()
    if lowered not in REFUSED_SETTINGS or lowered in allowed:
        return None
    return (
        f"{name}: refused because it {REFUSED_SETTINGS[lowered]}; the agent's local "
        "configuration can allow it (allow_settings)"
    )


def refuse_settings(requested: dict, allowed: set[str]) -> None:
    """Raise JobError(refused_setting) for the first refused name; needs no catalogue.

    Called before anything is provisioned, and by the web tier before it queues.
    """
    allowed = {name.lower() for name in allowed}
    for name in requested:
        message = _refusal(name, allowed)
        if message:
            raise JobError("refused_setting", message, field=f"settings.{name}")


def _problem(name: str, value: object, catalogue: Catalogue, allowed: set[str]):
    """(code, message) for one requested setting, or None when it is fine."""
    refusal = _refusal(name, allowed)
    if refusal:
        return "refused_setting", refusal
    info = catalogue.get(name)
    if info is None:
        return "unknown_setting", _unknown_message(name, catalogue)
    message = _check_value(name, value, info)
    return ("invalid_setting_value", message) if message else None


def validate_settings(requested: dict, catalogue: Catalogue, allowed: set[str]) -> list[str]:
    """Check requested settings against `catalogue`; return warnings (unsafe settings).

    Raises one JobError listing every problem; its code and field are those of
    the first problem (`settings.<name>`). `allowed` holds the names the agent's
    local configuration lets through although they are refused by default.
    """
    allowed = {name.lower() for name in allowed}
    problems = []
    for name, value in requested.items():
        problem = _problem(name, value, catalogue, allowed)
        if problem is not None:
            problems.append((name, *problem))
    if problems:
        first_name, first_code, first_message = problems[0]
        message = first_message
        if len(problems) > 1:
            listed = "; ".join(problem_message for _, _, problem_message in problems)
            message = f"{len(problems)} settings are not acceptable: {listed}"
        raise JobError(first_code, message, field=f"settings.{first_name}")
    return _unsafe_warnings(requested)


def _unsafe_warnings(requested: dict) -> list[str]:
    warnings = []
    for name, value in requested.items():
        reason = UNSAFE_SETTINGS.get(name.lower())
        if reason and not guc_values.parse_bool(value_text(value)):
            warnings.append(f"unsafe: {name}=off: {reason}")
    return warnings


# Reading the catalogue from a server, and caching it


CATALOGUE_QUERY = """
SELECT name, setting, unit, vartype, min_val, max_val, enumvals, context, boot_val, short_desc
FROM pg_settings ORDER BY name
"""


def catalogue_from_rows(version: str, rows) -> Catalogue:
    """A Catalogue from the rows of CATALOGUE_QUERY (from any client library)."""
    settings = {}
    for name, setting, unit, vartype, min_val, max_val, enumvals, context, boot, desc in rows:
        settings[name.lower()] = SettingInfo(
            name=name,
            setting=setting,
            unit=unit,
            vartype=vartype,
            min_val=min_val,
            max_val=max_val,
            enumvals=tuple(enumvals) if enumvals is not None else None,
            context=context,
            boot_val=boot,
            short_desc=desc,
        )
    return Catalogue(version=version, settings=settings)


def read_catalogue(cluster: "Cluster") -> Catalogue:
    """The pg_settings catalogue of a running cluster."""
    with cluster.connect() as conn:
        rows = conn.execute(CATALOGUE_QUERY).fetchall()
    return catalogue_from_rows(cluster.install.version, rows)


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
    _write_atomically(catalogue_path(cache_dir, install.version), catalogue.as_json())
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


def _write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    with os.fdopen(handle, "w") as file:
        file.write(text)
    os.chmod(temporary, 0o644)
    os.replace(temporary, path)


# Applying settings to a cluster and reading them back


def _conf_line(name: str, value: object) -> str:
    # In quoted conf values a backslash starts an escape and '' is a quote.
    text = value_text(value).replace("\\", "\\\\").replace("'", "''")
    return f"{name.lower()} = '{text}'"


def settings_file_text(requested: dict) -> str:
    """The include file for `requested` settings (already validated)."""
    lines = ["# Settings requested for this job (written by the BenchLab agent)."]
    lines += [_conf_line(name, value) for name, value in requested.items()]
    return "\n".join(lines) + "\n"


def apply_settings(cluster: "Cluster", requested: dict) -> None:
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


def _requested_name(name: str | None, requested: dict) -> str:
    by_lower = {key.lower(): key for key in requested}
    return by_lower.get((name or "").lower(), name or "?")


def _start_failure(error: JobError, cluster: "Cluster", requested: dict) -> JobError:
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


def read_effective_settings(conn: "psycopg.Connection") -> list[dict]:
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
