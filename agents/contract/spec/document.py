"""The job spec (docs/contracts.md, section 1): its type, validation and defaults.

`validate_spec` takes a JSON document from anywhere (a file, the web tier, a
Celery message) and returns a normalised `JobSpec` with every default filled
in, or raises `JobError("invalid_spec", ..., field=...)` naming the field to
fix. Pure Python: the web tier calls it before it queues anything.
"""

import copy
import random
import re
from collections.abc import Mapping
from typing import Any, Final, Literal, NotRequired, TypedDict, cast, final

from agents.contract.builds.definition import BuildDefinition, check_build_definition
from agents.contract.errors import JobError
from agents.contract.spec.fields import SECTIONS, defaults
from agents.contract.vocabulary import (
    BUILTIN_SCRIPTS,
    PAIR_ROLES,
    SOURCES,
    BetweenPoints,
    BuiltinScript,
    LatencyLog,
    PairRole,
    PartitionMethod,
    QueryMode,
    Source,
    SweepOrder,
)

SPEC_VERSION: Final = 1
INIT_STEP_CHARS = set("dtgGvpf")
MAX_SCRIPTS = 128
MAX_PROCESSES = 64
VERSION_PATTERN = re.compile(r"^\d{1,2}(\.\d{1,2})?$")
NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")

SettingValue = str | int | float | bool


class PostgresSpec(TypedDict):
    version: str
    source: Source
    # The source build's definition; set exactly when `source` is "build".
    build: BuildDefinition | None


class StorageSpec(TypedDict):
    data: str
    wal: str | None


class DatasetSpec(TypedDict):
    scale: int
    init_steps: str | None
    partitions: int | None
    partition_method: PartitionMethod | None
    unlogged_tables: bool
    fillfactor: int | None
    foreign_keys: bool
    setup_sql: str


# Final, so that `"builtin" in script` tells mypy which of the two a script is.
@final
class BuiltinScriptSpec(TypedDict):
    builtin: BuiltinScript
    weight: int


@final
class CustomScriptSpec(TypedDict):
    name: str
    text: str
    weight: int


ScriptSpec = BuiltinScriptSpec | CustomScriptSpec


class ProcessSpec(TypedDict):
    """One of several pgbench processes a point runs together (preset 3: one per table).

    `clients` and `threads` null: the sweep point's client count and the default threads.
    """

    scripts: list[ScriptSpec]
    clients: int | None
    threads: int | None


class WorkloadSpec(TypedDict):
    scripts: list[ScriptSpec]
    query_mode: QueryMode
    no_vacuum: bool
    rate_tps: float | None
    latency_limit_ms: float | None
    max_tries: int | None
    defines: dict[str, str | int | float]
    latency_log: LatencyLog
    # pgbench -P 1: an exact per-second timeline at about 3 % of select-only throughput;
    # without it the timeline is read from the transaction log (agents/pgbench/log_timeline.py).
    progress: bool
    statement_latencies: bool
    # pgbench -v: vacuum all four standard tables before each run.
    vacuum_all: bool
    # Several pgbench processes per point, started together; empty: one process of `scripts`.
    processes: list[ProcessSpec]
    # pgbench -C: a new connection for every transaction.
    connect_per_transaction: bool
    # pg_stat_statements loaded and each point's statements reported.
    track_statements: bool


class SweepSpec(TypedDict):
    clients: list[int]
    threads: int | None
    duration_s: int | None
    transactions: int | None
    repeats: int
    order: SweepOrder
    warmup_s: int
    between_points: BetweenPoints
    # A CPU-profile pass after the measured ones (agents/sweep/driver.py).
    cpu_profile: bool
    # The number of the first repeat (the lab's rounds send one repeat per job).
    first_repeat: int
    # Seeds the `random` client order; the agent draws one when it is null.
    seed: int | None


class NetworkSpec(TypedDict):
    """Where pgbench runs: on the server's host (`local`), or on a client host. A run with
    a client host is two jobs of one spec: `server` (cluster, dataset, server samples) on
    the server host naming its `peer` the client, `client` (pgbench over TCP) on the client
    host naming the server. Each waits at most `join_timeout_s` for the other to start."""

    role: PairRole
    peer: str | None
    join_timeout_s: int


class JobSpec(TypedDict):
    """A validated job spec: every section present, every default filled in."""

    version: Literal[1]
    run_id: str | None
    token: str | None
    # The job's id (docs/contracts.md): the run id and an id drawn at its first dispatch,
    # the same in every dispatch of the run; the agent's ledger is keyed by it.
    job_id: str | None
    postgres: PostgresSpec
    settings: dict[str, SettingValue]
    storage: StorageSpec
    dataset: DatasetSpec
    workload: WorkloadSpec
    sweep: SweepSpec
    network: NetworkSpec


class SweepShape(TypedDict):
    """What `sweep_points` needs of a sweep (the lab estimates with no full spec)."""

    clients: list[int]
    repeats: int
    order: SweepOrder
    duration_s: NotRequired[int | None]
    first_repeat: NotRequired[int]
    seed: NotRequired[int | None]


DEFAULTS: dict[str, Any] = {
    "run_id": None,
    "token": None,
    "job_id": None,
    "postgres": {"version": "16", "source": "auto", "build": None},
    "settings": {},
    "storage": {"data": "default", "wal": None},
    **{section: defaults(fields) for section, fields in SECTIONS.items()},
    "network": {"role": "local", "peer": None, "join_timeout_s": 3600},
}


# Fields renamed since specs were first written, by section: a spec naming the old
# field (a stored run's, an example's) means the new one; the new name wins when both are.
FORMER_NAMES: dict[str, dict[str, str]] = {"sweep": {"profile": "cpu_profile"}}


def invalid(field: str, message: str) -> JobError:
    return JobError("invalid_spec", message, field=field)


def validate_spec(doc: object) -> JobSpec:
    """Return the spec with defaults filled in, or raise JobError naming the bad field."""
    if not isinstance(doc, dict):
        raise invalid("", "a job spec must be a JSON object")
    if doc.get("version") != SPEC_VERSION:
        raise invalid("version", f"unsupported spec version {doc.get('version')!r}: use 1")
    unknown = set(doc) - set(DEFAULTS) - {"version"}
    if unknown:
        raise invalid(sorted(unknown)[0], f"unknown field; known: {', '.join(sorted(DEFAULTS))}")
    merged: dict[str, object] = {"version": SPEC_VERSION}
    for section, default in DEFAULTS.items():
        merged[section] = _merge(section, default, _current_names(section, doc.get(section)))
    spec = cast(JobSpec, merged)  # each section's shape is checked below
    _check_postgres(spec["postgres"])
    _check_settings(spec["settings"])
    _check_storage(spec["storage"])
    _check_dataset(spec["dataset"])
    _check_workload(spec["workload"])
    _check_sweep(spec["sweep"])
    _check_network(spec["network"])
    return spec


def _current_names(section: str, given: object) -> object:
    """A section with its fields' former names (FORMER_NAMES) replaced by their names."""
    renamed = FORMER_NAMES.get(section, {})
    if not isinstance(given, dict) or not renamed.keys() & given.keys():
        return given
    current = {renamed.get(key, key): value for key, value in given.items()}
    current.update({key: value for key, value in given.items() if key not in renamed})
    return current


def _merge(section: str, default: object, given: object) -> object:
    """Fill a section's defaults; refuse unknown keys inside fixed-shape sections."""
    if given is None:
        return copy.deepcopy(default)
    if not isinstance(default, dict) or section == "settings":
        if isinstance(default, dict) and not isinstance(given, dict):
            raise invalid(section, "must be an object")
        return copy.deepcopy(given)
    if not isinstance(given, dict):
        raise invalid(section, "must be an object")
    unknown = set(given) - set(default)
    if unknown:
        name = sorted(unknown)[0]
        raise invalid(f"{section}.{name}", f"unknown field; known: {', '.join(sorted(default))}")
    merged = copy.deepcopy(default)
    merged.update(copy.deepcopy(given))
    return merged


def _integer(
    value: object, field: str, minimum: int, maximum: int | None = None, allow_none: bool = False
) -> None:
    if value is None and allow_none:
        return
    if isinstance(value, bool) or not isinstance(value, int):
        raise invalid(field, f"must be a whole number, got {value!r}")
    if value < minimum or (maximum is not None and value > maximum):
        bound = f"between {minimum} and {maximum}" if maximum is not None else f">= {minimum}"
        raise invalid(field, f"must be {bound}, got {value}")


def _choice(value: object, field: str, choices: tuple[str, ...], allow_none: bool = False) -> None:
    if value is None and allow_none:
        return
    if value not in choices:
        raise invalid(field, f"must be one of {', '.join(choices)}; got {value!r}")


def _check_postgres(postgres: PostgresSpec) -> None:
    version = str(postgres["version"])
    if not VERSION_PATTERN.match(version):
        raise invalid("postgres.version", f"must look like 16 or 16.15, got {version!r}")
    postgres["version"] = version
    _choice(postgres["source"], "postgres.source", SOURCES)
    if postgres["source"] == "build":
        postgres["build"] = check_build_definition(postgres["build"])
    elif postgres["build"] is not None:
        raise invalid("postgres.build", 'a build definition needs postgres.source "build"')


def _check_settings(settings: dict[str, SettingValue]) -> None:
    for name, value in settings.items():
        field = f"settings.{name}"
        if not re.match(r"^[a-z_][a-z0-9_.]*$", name):
            raise invalid(field, "a setting name has lower-case letters, digits, _ and .")
        if not isinstance(value, str | int | float | bool):
            raise invalid(field, f"value must be a string, number or boolean, got {value!r}")
        if isinstance(value, str) and ("\n" in value or "\x00" in value):
            raise invalid(field, "value must be a single line")


def _check_storage(storage: StorageSpec) -> None:
    for role in ("data", "wal"):
        name = storage[role]
        if role == "wal" and name is None:
            continue
        if not isinstance(name, str) or not NAME_PATTERN.match(name):
            raise invalid(f"storage.{role}", f"must name a storage target, got {name!r}")


def _check_fields(section: str, values: Mapping[str, object]) -> None:
    """Each declared field of a section checked as agents/contract/spec/fields.py declares it."""
    for field in SECTIONS[section]:
        problem = None if field.compound else field.problem(values[field.name])
        if problem:
            raise invalid(f"{section}.{field.name}", problem)


def _check_dataset(dataset: DatasetSpec) -> None:
    _check_fields("dataset", dataset)
    steps = dataset["init_steps"]
    if steps is not None:
        if not isinstance(steps, str) or not steps or set(steps) - INIT_STEP_CHARS:
            raise invalid("dataset.init_steps", f"must be letters from dtgGvpf, got {steps!r}")
    if dataset["partition_method"] and not dataset["partitions"]:
        raise invalid("dataset.partition_method", "needs dataset.partitions > 0")


def _check_workload(workload: WorkloadSpec) -> None:
    _check_fields("workload", workload)
    scripts = workload["scripts"]
    if not isinstance(scripts, list) or not 1 <= len(scripts) <= MAX_SCRIPTS:
        raise invalid("workload.scripts", f"must list 1 to {MAX_SCRIPTS} scripts")
    for index, script in enumerate(scripts):
        _check_script_entry(script, f"workload.scripts[{index}]")
    if sum(script["weight"] for script in scripts) <= 0:
        raise invalid("workload.scripts", "the weights must add up to more than 0")
    if workload["vacuum_all"] and workload["no_vacuum"]:
        raise invalid("workload.vacuum_all", "-v and -n exclude each other: turn one of them off")
    _check_processes(workload["processes"])
    defines = workload["defines"]
    if not isinstance(defines, dict):
        raise invalid("workload.defines", "must be an object of variable names to values")
    for name, value in defines.items():
        if not re.match(r"^[A-Za-z_][A-Za-z0-9_]*$", name):
            raise invalid(f"workload.defines.{name}", "variable names are letters, digits, _")
        if not isinstance(value, str | int | float) or isinstance(value, bool):
            raise invalid(f"workload.defines.{name}", "value must be a string or a number")


def _check_processes(processes: object) -> None:
    if not isinstance(processes, list) or len(processes) > MAX_PROCESSES:
        raise invalid("workload.processes", f"must list at most {MAX_PROCESSES} processes")
    for index, process in enumerate(processes):
        field = f"workload.processes[{index}]"
        if not isinstance(process, dict) or set(process) - {"scripts", "clients", "threads"}:
            raise invalid(field, "must be an object with scripts, and optionally clients, threads")
        process.setdefault("clients", None)
        process.setdefault("threads", None)
        scripts = process.get("scripts")
        if not isinstance(scripts, list) or not 1 <= len(scripts) <= MAX_SCRIPTS:
            raise invalid(f"{field}.scripts", f"must list 1 to {MAX_SCRIPTS} scripts")
        for number, script in enumerate(scripts):
            _check_script_entry(script, f"{field}.scripts[{number}]")
        if sum(script["weight"] for script in scripts) <= 0:
            raise invalid(f"{field}.scripts", "the weights must add up to more than 0")
        _integer(process["clients"], f"{field}.clients", 1, 10_000, allow_none=True)
        _integer(process["threads"], f"{field}.threads", 1, 10_000, allow_none=True)


def script_fields(workload: WorkloadSpec) -> list[tuple[str, ScriptSpec]]:
    """Every script of a workload with its spec field (`workload.scripts[0]`, ...,
    `workload.processes[1].scripts[0]`): what the script and SQL checks go through."""
    fields = [(f"workload.scripts[{i}]", script) for i, script in enumerate(workload["scripts"])]
    for number, process in enumerate(workload["processes"]):
        for index, script in enumerate(process["scripts"]):
            fields.append((f"workload.processes[{number}].scripts[{index}]", script))
    return fields


def _check_script_entry(script: object, field: str) -> None:
    if not isinstance(script, dict):
        raise invalid(field, "must be an object with builtin or name+text, and weight")
    script.setdefault("weight", 1)
    _integer(script["weight"], f"{field}.weight", 0, 1_000_000)
    if "builtin" in script:
        if set(script) - {"builtin", "weight"}:
            raise invalid(field, "a builtin script takes only builtin and weight")
        _choice(script["builtin"], f"{field}.builtin", BUILTIN_SCRIPTS)
        return
    if set(script) - {"name", "text", "weight"}:
        raise invalid(field, "a custom script takes name, text and weight")
    name, text = script.get("name"), script.get("text")
    if not isinstance(name, str) or not NAME_PATTERN.match(name):
        raise invalid(f"{field}.name", "must be 1-64 letters, digits, _ . or -")
    if not isinstance(text, str) or not text.strip():
        raise invalid(f"{field}.text", "must be the script text")


def _check_sweep(sweep: SweepSpec) -> None:
    _check_fields("sweep", sweep)
    clients = sweep["clients"]
    if not isinstance(clients, list) or not clients:
        raise invalid("sweep.clients", "must list at least one client count, e.g. [1, 2, 4]")
    for index, count in enumerate(clients):
        _integer(count, f"sweep.clients[{index}]", 1, 10_000)
    if (sweep["duration_s"] is None) == (sweep["transactions"] is None):
        raise invalid("sweep.duration_s", "give exactly one of duration_s and transactions")


def _check_network(network: NetworkSpec) -> None:
    _choice(network["role"], "network.role", PAIR_ROLES)
    peer = network["peer"]
    if network["role"] == "local":
        if peer is not None:
            raise invalid("network.peer", "a local run names no peer: set role server or client")
    elif not isinstance(peer, str) or not NAME_PATTERN.match(peer):
        raise invalid("network.peer", f"must name the other agent of the run, got {peer!r}")
    _integer(network["join_timeout_s"], "network.join_timeout_s", 1, 7 * 24 * 3600)


def sweep_points(sweep: SweepShape | SweepSpec) -> list[tuple[int, int]]:
    """The (clients, repeat) pairs of a sweep in the order they run.

    Repeats count from `first_repeat` (default 1). `ascending` runs every
    repeat of a client count before the next count, `interleaved` goes
    through the counts once per repeat, and `random` does too, each pass in
    its own order drawn from `seed` (the same seed gives the same order).
    """
    first = sweep.get("first_repeat", 1)
    clients, repeats = sweep["clients"], range(first, first + sweep["repeats"])
    if sweep["order"] == "random":
        rng = random.Random(sweep.get("seed"))
        return [
            (count, repeat) for repeat in repeats for count in rng.sample(clients, len(clients))
        ]
    if sweep["order"] == "interleaved":
        return [(count, repeat) for repeat in repeats for count in clients]
    return [(count, repeat) for count in clients for repeat in repeats]


def warm_up_seconds(sweep: Mapping[str, object]) -> int:
    """How long a sweep warms up before its first point, in seconds: the agent runs it, the
    lab's estimates count it. A sweep without the key has the declared default; a value
    that is not a whole number (a document read back, not validated) counts none."""
    seconds = sweep.get("warmup_s", DEFAULTS["sweep"]["warmup_s"])
    return seconds if isinstance(seconds, int) else 0


# The statements each `sweep.between_points` action runs before every measured point.
STATEMENTS_BEFORE_POINT: Final[Mapping[str, tuple[str, ...]]] = {
    "none": (),
    "checkpoint": ("CHECKPOINT",),
    "vacuum": ("VACUUM",),
    "vacuum_checkpoint": ("VACUUM", "CHECKPOINT"),
}


def statements_before_point(sweep: Mapping[str, object]) -> tuple[str, ...]:
    """What a sweep runs before every measured point, the first too: the agent runs them,
    a reproduce script replays them. A sweep without the key has the declared default; an
    action this version does not know (a document read back, not validated) runs nothing."""
    action = sweep.get("between_points", DEFAULTS["sweep"]["between_points"])
    return STATEMENTS_BEFORE_POINT.get(action, ()) if isinstance(action, str) else ()
