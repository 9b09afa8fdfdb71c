"""postgresql.conf settings a job may ask for: the version's catalogue and validation.

Pure Python, no server needed: requested settings are checked against a
`Catalogue` (the rows of one exact PostgreSQL version's `pg_settings`), which
an agent reads once per version from a real server (`CATALOGUE_QUERY`),
caches as JSON and reports when it registers. The lab stores that JSON and
validates config profiles with the same functions the agent runs before it
provisions anything. Applying settings to a cluster is the agent's business
(agents/postgres/settings.py).
"""

import difflib
import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from typing import Any

from agents.contract.errors import ErrorCode, JobError
from agents.contract.settings import guc_values
from agents.contract.spec.document import SettingValue

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

    def as_dict(self) -> dict[str, Any]:
        rows = []
        for info in self.settings.values():
            row = asdict(info)
            row["enumvals"] = list(info.enumvals) if info.enumvals is not None else None
            rows.append(row)
        return {"format": CATALOGUE_FORMAT, "version": self.version, "settings": rows}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Catalogue":
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


def _bounds(info: SettingInfo) -> tuple[str, str]:
    """A numeric setting's range as text; pg_settings fills both ends for numbers."""
    return info.min_val or "-inf", info.max_val or "inf"


def _range_text(info: SettingInfo) -> str:
    def bound(raw: str) -> str:
        number = float(raw)
        if info.unit and guc_values.unit_kind(info.unit) and number > 0:
            return f"{raw} ({guc_values.humanize(number, info.unit)})"
        return raw

    low, high = _bounds(info)
    text = f"must be between {bound(low)} and {bound(high)}"
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
            low, high = _bounds(info)
            if not float(low) <= number <= float(high):
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


def refuse_settings(requested: Mapping[str, SettingValue], allowed: set[str]) -> None:
    """Raise JobError(refused_setting) for the first refused name; needs no catalogue.

    Called before anything is provisioned, and by the web tier before it queues.
    """
    allowed = {name.lower() for name in allowed}
    for name in requested:
        message = _refusal(name, allowed)
        if message:
            raise JobError("refused_setting", message, field=f"settings.{name}")


def _problem(
    name: str, value: object, catalogue: Catalogue, allowed: set[str]
) -> tuple[ErrorCode, str] | None:
    """(code, message) for one requested setting, or None when it is fine."""
    refusal = _refusal(name, allowed)
    if refusal:
        return "refused_setting", refusal
    info = catalogue.get(name)
    if info is None:
        return "unknown_setting", _unknown_message(name, catalogue)
    message = _check_value(name, value, info)
    return ("invalid_setting_value", message) if message else None


def validate_settings(
    requested: Mapping[str, SettingValue], catalogue: Catalogue, allowed: set[str]
) -> list[str]:
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


def _unsafe_warnings(requested: Mapping[str, SettingValue]) -> list[str]:
    warnings = []
    for name, value in requested.items():
        reason = UNSAFE_SETTINGS.get(name.lower())
        if reason and not guc_values.parse_bool(value_text(value)):
            warnings.append(f"unsafe: {name}=off: {reason}")
    return warnings


CATALOGUE_QUERY = """
SELECT name, setting, unit, vartype, min_val, max_val, enumvals, context, boot_val, short_desc
FROM pg_settings ORDER BY name
"""


def catalogue_from_rows(version: str, rows: Iterable[tuple[Any, ...]]) -> Catalogue:
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
