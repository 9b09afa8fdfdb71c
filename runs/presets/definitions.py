"""Presets: ready-made experiments to start from (a smoke test and presets 1 to 5), after
the benchmark write-ups the lab was conceived from, each a kind of experiment people ran by
hand with shell loops and spreadsheets.

A preset names the builds, config profiles and workloads it needs and the
sweep to run. `load_presets` creates those catalogue entries once (existing
entries with the same name are left as people edited them); the schedule
form then starts from `form_initial(preset)`.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from agents.contract.builds.definition import BuildDefinition
from agents.contract.spec.document import ProcessSpec, ScriptSpec, SettingValue
from agents.contract.vocabulary import BuiltinScript, QueryMode
from runs import tpcc_like
from runs.agentlink.row_fields import EXPERIMENT_ROW_FIELDS, value_problems

UPSERT_SETUP_SQL = """\
CREATE TABLE kv (id bigint PRIMARY KEY, counter bigint NOT NULL DEFAULT 0);
INSERT INTO kv (id) SELECT g FROM generate_series(1, 1000000) AS g;
CREATE FUNCTION upsert_kv(p_id bigint) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
  UPDATE kv SET counter = counter + 1 WHERE id = p_id;
  IF NOT FOUND THEN
    INSERT INTO kv (id, counter) VALUES (p_id, 1)
      ON CONFLICT (id) DO UPDATE SET counter = kv.counter + 1;
  END IF;
END
$$;
"""

UPSERT_SCRIPT = "\\set id random(1, 2000000)\nSELECT upsert_kv(:id);\n"

# Preset 3's insert workloads: one table, one table per inserting process, 400-row batches.
INSERT_TABLES = 4
INSERT_SETUP_SQL = "".join(
    f"CREATE TABLE ins_{n} (id bigserial PRIMARY KEY, v int NOT NULL);\n"
    for n in ["single", "batch", *range(1, INSERT_TABLES + 1)]
)


def _insert_into(table: str) -> ScriptSpec:
    return {
        "name": f"insert-{table}",
        "text": f"INSERT INTO ins_{table} (v) VALUES (1);\n",
        "weight": 1,
    }


BATCH_INSERT_SCRIPT = "INSERT INTO ins_batch (v) SELECT g FROM generate_series(1, 400) AS g;\n"

BRANCH_JOIN_SCRIPT = """\
\\set bid random(1, :scale)
SELECT count(*) FROM pgbench_branches b JOIN pgbench_accounts a ON a.bid = b.bid WHERE b.bid = :bid;
"""


@dataclass(frozen=True)
class ConfigProfilePreset:
    """A config profile a preset needs, created by name if missing."""

    name: str
    settings: dict[str, SettingValue]
    parent: str | None = None
    description: str = ""


class WorkloadPreset(TypedDict):
    """A workload a preset needs: the catalogue Workload's field values, by name."""

    name: str
    scale: int
    scripts: list[ScriptSpec]
    setup_sql: NotRequired[str]
    query_mode: NotRequired[QueryMode]
    no_vacuum: NotRequired[bool]
    statement_latencies: NotRequired[bool]
    description: NotRequired[str]
    init_steps: NotRequired[str]
    vacuum_all: NotRequired[bool]
    processes: NotRequired[list[ProcessSpec]]


@dataclass(frozen=True)
class Preset:
    """One preset: what it needs in the catalogue and the sweep to run."""

    key: str
    title: str
    description: str
    builds: list[tuple[str, str]]
    config_profiles: list[ConfigProfilePreset]
    workloads: list[WorkloadPreset]
    # The sweep fields it sets, by their declared names (runs/agentlink/row_fields.py);
    # every other one starts at its declared default.
    sweep: Mapping[str, object]
    storage: str = "default"
    # Preset 4: pgbench on another host (the form picks the second approved host, if any).
    client_host: bool = False
    execution: str = "rounds"
    # Builds from source the preset needs, created by name with source "build".
    source_builds: list["SourceBuildPreset"] = field(default_factory=list)

    def __post_init__(self) -> None:
        problems = value_problems(EXPERIMENT_ROW_FIELDS, self.sweep)
        if problems:
            raise ValueError(f"preset {self.key}'s sweep: {'; '.join(problems)}")


def _builtin(name: BuiltinScript, title: str, scale: int) -> WorkloadPreset:
    return {"name": title, "scale": scale, "scripts": [{"builtin": name, "weight": 1}]}


def _tpcc_like(warehouses: int) -> WorkloadPreset:
    values = tpcc_like.workload_values(warehouses)
    return {
        "name": f"{tpcc_like.TITLE}, {warehouses} warehouse{'s' if warehouses > 1 else ''}",
        "description": values["description"],
        "scale": values["scale"],
        "init_steps": values["init_steps"],
        "setup_sql": values["setup_sql"],
        "scripts": values["scripts"],
        "no_vacuum": True,
    }


def _inserts(
    name: str, scripts: list[ScriptSpec], processes: list[ProcessSpec] | None = None
) -> WorkloadPreset:
    """A preset 3 insert workload on its own tables (pgbench's are dropped: -I d, no vacuum)."""
    return {
        "name": name,
        "scale": 1,
        "init_steps": "d",
        "no_vacuum": True,
        "setup_sql": INSERT_SETUP_SQL,
        "scripts": scripts,
        "processes": processes or [],
    }


def _branch_join(title: str, scale: int) -> WorkloadPreset:
    """The join on a random bid after the branches key is dropped (preset 5's workload)."""
    return {
        "name": title,
        "scale": scale,
        "setup_sql": "ALTER TABLE pgbench_branches DROP CONSTRAINT pgbench_branches_pkey;",
        "scripts": [{"name": "branch-join", "text": BRANCH_JOIN_SCRIPT, "weight": 1}],
    }


PG16 = ("PostgreSQL 16", "16")
PRESETS = [
    Preset(
        key="smoke",
        title="Smoke test (TPC-B, scale 1, 3 s)",
        description="The smallest useful run: checks a host end to end in under a minute.",
        builds=[PG16],
        config_profiles=[
            ConfigProfilePreset("defaults", {}, description="PostgreSQL's own defaults")
        ],
        workloads=[_builtin("tpcb-like", "TPC-B scale 1", 1)],
        sweep={"clients": [1, 2], "duration_s": 3},
    ),
    Preset(
        key="tuning-matrix",
        title="Preset 1: config tuning matrix, version A vs B, TPC-B and TPC-C-like",
        description="Cumulative profiles (defaults, WAL tuning, memory, more memory, fsync off "
        "last), each with WAL beside the data and on a second storage target named wal "
        "(storage default and default:wal), PostgreSQL 16 against 17, TPC-B and the "
        "TPC-C-like workload, 3 repeats in rounds. Scaled from the write-up: prebuilt 16 vs 17 "
        "instead of 8.2 vs 8.4 built from source; checkpoint_segments became max_wal_size; "
        "TPC-B keeps scale 20 and 2000 transactions per client; TPC-C-like runs at 1 warehouse "
        "so it loads in seconds; one client sweep 5/10/15/20 for both workloads (the write-up "
        "ran TPC-B at 20 only).",
        builds=[PG16, ("PostgreSQL 17", "17")],
        config_profiles=[
            ConfigProfilePreset("defaults", {}, description="PostgreSQL's own defaults"),
            ConfigProfilePreset(
                "tuning 1: WAL",
                {
                    "wal_buffers": "16MB",
                    "max_wal_size": "4GB",
                    "checkpoint_completion_target": "0.9",
                },
                parent="defaults",
            ),
            ConfigProfilePreset(
                "tuning 2: memory",
                {"shared_buffers": "256MB", "work_mem": "16MB", "effective_cache_size": "1GB"},
                parent="tuning 1: WAL",
            ),
            ConfigProfilePreset(
                "tuning 3: more memory", {"shared_buffers": "512MB"}, "tuning 2: memory"
            ),
            ConfigProfilePreset(
                "tuning 4: fsync off", {"fsync": "off"}, parent="tuning 3: more memory"
            ),
        ],
        workloads=[_builtin("tpcb-like", "TPC-B scale 20", 20), _tpcc_like(1)],
        sweep={"clients": [5, 10, 15, 20], "transactions": 2000, "repeats": 3},
        storage="default,default:wal",
    ),
    Preset(
        key="wal-sync-storage",
        title="Preset 2: wal_sync_method x storage with a PL/pgSQL upsert workload",
        description="One profile per wal_sync_method on each storage target; a PL/pgSQL "
        "function updates or inserts a random id, -M prepared -n -r, 8 clients for 60 s. List "
        "your targets in Storage (one column each). Scaled: 1 million rows instead of 10 "
        "million, ids drawn from 2 million so about half the calls insert.",
        builds=[PG16],
        config_profiles=[
            ConfigProfilePreset(f"wal_sync_method={method}", {"wal_sync_method": method})
            for method in ("fdatasync", "fsync", "open_sync")
        ],
        workloads=[
            {
                "name": "PL/pgSQL upsert",
                "scale": 1,
                "setup_sql": UPSERT_SETUP_SQL,
                "scripts": [{"name": "upsert", "text": UPSERT_SCRIPT, "weight": 1}],
                "query_mode": "prepared",
                "no_vacuum": True,
                # The write-up ran `-M prepared -n -r`: its table has per-statement latencies.
                "statement_latencies": True,
            }
        ],
        sweep={"clients": [8], "duration_s": 60},
    ),
    Preset(
        key="version-sweep",
        title="Preset 3: version vs version over many workloads (16 vs 17 vs 18)",
        description="The same tuned configuration on three major versions: select by primary "
        "key, update by primary key, the read-write mix, single-table inserts, one inserting "
        "pgbench process per table (4 tables, results summed) and 400-row batch inserts, "
        "across a client sweep. Scaled: 16/17/18 instead of 9.5/9.6, scale 10 instead of 100 "
        "million rows, clients 1-32 for 30 s instead of 16-256 for 120 s, shared_buffers "
        "512MB.",
        builds=[PG16, ("PostgreSQL 17", "17"), ("PostgreSQL 18", "18")],
        config_profiles=[
            ConfigProfilePreset(
                "tuned: async commit, long checkpoints",
                {
                    "shared_buffers": "512MB",
                    "synchronous_commit": "off",
                    "full_page_writes": "off",
                    "max_wal_size": "8GB",
                    "checkpoint_timeout": "30min",
                },
            )
        ],
        workloads=[
            _builtin("select-only", "select-only scale 10", 10),
            _builtin("simple-update", "update by key scale 10", 10),
            _builtin("tpcb-like", "TPC-B scale 10", 10),
            _inserts("single-table inserts", [_insert_into("single")]),
            _inserts(
                f"inserts, {INSERT_TABLES} tables, one process each",
                [_insert_into("single")],
                [
                    {"scripts": [_insert_into(str(n))], "clients": None, "threads": None}
                    for n in range(1, INSERT_TABLES + 1)
                ],
            ),
            _inserts(
                "400-row batch inserts",
                [{"name": "insert-batch", "text": BATCH_INSERT_SCRIPT, "weight": 1}],
            ),
        ],
        sweep={"clients": [1, 2, 4, 8, 16, 32], "duration_s": 30},
    ),
    Preset(
        key="memory-profiles",
        title="Preset 4: two memory profiles, read-only and TPC-B, pgbench on a client host",
        description="A scale-50 dataset (about 750 MB) with shared_buffers too small for it and "
        "large enough; read-only and TPC-B (with -v: every table vacuumed before each "
        "read-write point), clients stepped up, pgbench on a second host over TCP (pick it as "
        "the client host). Scaled: scale 50 instead of 5000 (74 GB), 30 s points; the "
        "write-up compared operating systems, which here are the hosts you pick.",
        builds=[PG16],
        config_profiles=[
            ConfigProfilePreset("memory: does not fit (64MB)", {"shared_buffers": "64MB"}),
            ConfigProfilePreset("memory: fits (1GB)", {"shared_buffers": "1GB"}),
        ],
        workloads=[
            _builtin("select-only", "select-only scale 50", 50),
            {**_builtin("tpcb-like", "TPC-B scale 50, vacuum first (-v)", 50), "vacuum_all": True},
        ],
        sweep={"clients": [1, 4, 8, 16], "duration_s": 30, "between_points": "vacuum_checkpoint"},
        client_host=True,
    ),
    Preset(
        key="branch-join",
        title="Custom join on random bid after dropping pgbench_branches pkey",
        description="Drops the primary key of pgbench_branches after init, then joins "
        "accounts on a random branch id.",
        builds=[PG16],
        config_profiles=[
            ConfigProfilePreset("defaults", {}, description="PostgreSQL's own defaults")
        ],
        workloads=[_branch_join("join on random bid (no branches pkey)", 10)],
        sweep={"clients": [1, 2, 4, 8], "duration_s": 30},
    ),
]


# Source-build presets (preset 5, and preset 1's version against version), scaled to a
# small machine. Their tarballs come from postgresql.org: an agent builds them only
# when its local config allows source builds from that URL prefix.
RELEASES_URL = "https://ftp.postgresql.org/pub/source/"

# Preset 5's change: 256 buffer mapping partitions, and dshash's to match (2^8).
LWLOCK_PARTITIONS_256_PATCH = "\n".join(
    [
        "--- a/src/include/storage/lwlock.h",
        "+++ b/src/include/storage/lwlock.h",
        "@@ -88,7 +88,7 @@",
        "  */",
        " ",
        " /* Number of partitions of the shared buffer mapping hashtable */",
        "-#define NUM_BUFFER_PARTITIONS  128",
        "+#define NUM_BUFFER_PARTITIONS  256",
        " ",
        " /* Number of partitions the shared lock tables are divided into */",
        " #define LOG2_NUM_LOCK_PARTITIONS  4",
        "",
    ]
)
DSHASH_PARTITIONS_256_PATCH = "\n".join(
    [
        "--- a/src/backend/lib/dshash.c",
        "+++ b/src/backend/lib/dshash.c",
        "@@ -58,7 +58,7 @@",
        "  * the buffer pool must be good enough for any other purpose.  This could",
        "  * become a runtime parameter in future.",
        "  */",
        "-#define DSHASH_NUM_PARTITIONS_LOG2 7",
        "+#define DSHASH_NUM_PARTITIONS_LOG2 8",
        " #define DSHASH_NUM_PARTITIONS (1 << DSHASH_NUM_PARTITIONS_LOG2)",
        " ",
        " /* A magic value used to identify our hash tables. */",
        "",
    ]
)
BUFFER_PARTITIONS_256_PATCH = LWLOCK_PARTITIONS_256_PATCH + DSHASH_PARTITIONS_256_PATCH


@dataclass(frozen=True)
class SourceBuildPreset:
    """A build from source a preset needs: name, version and its definition."""

    name: str
    version: str
    definition: BuildDefinition


def _release(version: str, flags: list[str], patches: dict[str, str]) -> BuildDefinition:
    return {
        "source": {
            "kind": "url",
            "location": f"{RELEASES_URL}v{version}/postgresql-{version}.tar.bz2",
            "ref": None,
        },
        "configure_flags": flags,
        "patches": [{"name": name, "diff": diff, "strip": 1} for name, diff in patches.items()],
        "cflags": None,
    }


BLOCKS_16K = ["--with-blocksize=16", "--with-wal-blocksize=16"]
SOURCE_BUILD_PRESETS = [
    Preset(
        key="source-build-partitions",
        title="Preset 5: 16 kB blocks, 256 buffer partitions vs unpatched (source builds of 14.3)",
        description="PostgreSQL 14.3 built with 16 kB blocks and WAL blocks, with and without a "
        "patch raising NUM_BUFFER_PARTITIONS to 256; the branches key dropped after init, a join "
        "on a random bid, a client sweep; compare the wait events on the run pages.",
        builds=[],
        source_builds=[
            SourceBuildPreset(
                "PostgreSQL 14.3, 16 kB blocks, 256 buffer partitions",
                "14",
                _release(
                    "14.3", BLOCKS_16K, {"buffer-partitions-256": BUFFER_PARTITIONS_256_PATCH}
                ),
            ),
            SourceBuildPreset(
                "PostgreSQL 14.3, 16 kB blocks", "14", _release("14.3", BLOCKS_16K, {})
            ),
        ],
        config_profiles=[
            ConfigProfilePreset("defaults", {}, description="PostgreSQL's own defaults")
        ],
        workloads=[_branch_join("join on random bid (no branches pkey), scale 5", 5)],
        sweep={"clients": [2, 4, 8], "duration_s": 20},
    ),
    Preset(
        key="source-build-versions",
        title="Preset 1: version vs version, 13 built from source vs 16 (TPC-B, small)",
        description="TPC-B at scale 5, 4 clients x 500 transactions, three repeats, on "
        "PostgreSQL 13.16 built from source and on PostgreSQL 16.",
        builds=[PG16],
        source_builds=[
            SourceBuildPreset("PostgreSQL 13.16 (source build)", "13", _release("13.16", [], {}))
        ],
        config_profiles=[
            ConfigProfilePreset("defaults", {}, description="PostgreSQL's own defaults")
        ],
        workloads=[_builtin("tpcb-like", "TPC-B scale 5", 5)],
        sweep={"clients": [4], "transactions": 500, "repeats": 3},
    ),
]
PRESETS += SOURCE_BUILD_PRESETS
