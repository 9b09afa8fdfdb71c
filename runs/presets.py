"""The seed experiments (../shared/seed-experiments.md) as presets to start from.

A preset names the builds, config profiles and workloads it needs and the
sweep to run. `load_presets` creates those catalogue entries once (existing
entries with the same name are left as people edited them); the schedule
form then starts from `form_initial(preset)`.
"""

import logging
from dataclasses import dataclass, field
from typing import NotRequired, TypedDict

from django.db import transaction

from agents.contract.builds import BuildDefinition
from agents.contract.spec import ScriptSpec, SettingValue
from agents.contract.vocabulary import BuiltinScript, QueryMode
from runs.models import ConfigProfile, Host, PgBuild, Workload

logger = logging.getLogger(__name__)

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

BRANCH_JOIN_SCRIPT = """\
\\set bid random(1, :scale)
SELECT count(*) FROM pgbench_branches b JOIN pgbench_accounts a ON a.bid = b.bid WHERE b.bid = :bid;
"""


@dataclass(frozen=True)
class Profile:
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


@dataclass(frozen=True)
class Preset:
    """One seed experiment: what it needs in the catalogue and the sweep to run."""

    key: str
    title: str
    description: str
    builds: list[tuple[str, str]]
    profiles: list[Profile]
    workloads: list[WorkloadPreset]
    clients: str
    duration_s: int | None = None
    transactions: int | None = None
    repeats: int = 1
    storage: str = "default"
    between_points: str = "checkpoint"
    # Builds from source the preset needs, created by name with source "build".
    source_builds: list["SourceBuildPreset"] = field(default_factory=list)


def _builtin(name: BuiltinScript, title: str, scale: int) -> WorkloadPreset:
    return {"name": title, "scale": scale, "scripts": [{"builtin": name, "weight": 1}]}


def _branch_join(title: str, scale: int) -> WorkloadPreset:
    """The join on a random bid after the branches key is dropped (seed 5's workload)."""
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
        profiles=[Profile("defaults", {}, description="PostgreSQL's own defaults")],
        workloads=[_builtin("tpcb-like", "TPC-B scale 1", 1)],
        clients="1,2",
        duration_s=3,
    ),
    Preset(
        key="tuning-matrix",
        title="Config tuning matrix (TPC-B, cumulative profiles)",
        description="Defaults, then WAL tuning, memory, more memory and fsync off, each on top "
        "of the previous; 20 clients x 2000 transactions, three repeats each.",
        builds=[PG16],
        profiles=[
            Profile("defaults", {}, description="PostgreSQL's own defaults"),
            Profile(
                "tuning 1: WAL",
                {
                    "wal_buffers": "16MB",
                    "max_wal_size": "4GB",
                    "checkpoint_completion_target": "0.9",
                },
                parent="defaults",
            ),
            Profile(
                "tuning 2: memory",
                {"shared_buffers": "256MB", "work_mem": "16MB", "effective_cache_size": "1GB"},
                parent="tuning 1: WAL",
            ),
            Profile("tuning 3: more memory", {"shared_buffers": "512MB"}, "tuning 2: memory"),
            Profile("tuning 4: fsync off", {"fsync": "off"}, parent="tuning 3: more memory"),
        ],
        workloads=[_builtin("tpcb-like", "TPC-B scale 20", 20)],
        clients="20",
        transactions=2000,
        repeats=3,
    ),
    Preset(
        key="wal-sync-storage",
        title="wal_sync_method x storage with a PL/pgSQL upsert workload",
        description="One profile per wal_sync_method on each storage target; a PL/pgSQL "
        "function updates or inserts a random id, with per-statement latencies (-r). List your "
        "targets in Storage.",
        builds=[PG16],
        profiles=[
            Profile(f"wal_sync_method={method}", {"wal_sync_method": method})
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
        clients="8",
        duration_s=60,
    ),
    Preset(
        key="version-sweep",
        title="Version vs version client sweep (16 vs 17 vs 18)",
        description="The same tuned configuration on three major versions, read-only and "
        "read-write, across a client sweep.",
        builds=[PG16, ("PostgreSQL 17", "17"), ("PostgreSQL 18", "18")],
        profiles=[
            Profile(
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
            _builtin("tpcb-like", "TPC-B scale 10", 10),
        ],
        clients="1,2,4,8,16,32",
        duration_s=30,
    ),
    Preset(
        key="memory-profiles",
        title="Memory profiles: fits / does not fit shared_buffers",
        description="A scale-50 dataset (about 750 MB) with shared_buffers too small for it and "
        "large enough; read-only and TPC-B, clients stepped up.",
        builds=[PG16],
        profiles=[
            Profile("memory: does not fit (64MB)", {"shared_buffers": "64MB"}),
            Profile("memory: fits (1GB)", {"shared_buffers": "1GB"}),
        ],
        workloads=[
            _builtin("select-only", "select-only scale 50", 50),
            _builtin("tpcb-like", "TPC-B scale 50", 50),
        ],
        clients="1,4,8,16",
        duration_s=30,
        between_points="vacuum_checkpoint",
    ),
    Preset(
        key="branch-join",
        title="Custom join on random bid after dropping pgbench_branches pkey",
        description="Drops the primary key of pgbench_branches after init, then joins "
        "accounts on a random branch id.",
        builds=[PG16],
        profiles=[Profile("defaults", {}, description="PostgreSQL's own defaults")],
        workloads=[_branch_join("join on random bid (no branches pkey)", 10)],
        clients="1,2,4,8",
        duration_s=30,
    ),
]


# Source-build presets (seed 5, and seed 1's version against version), scaled to a
# small machine. Their tarballs come from postgresql.org: an agent builds them only
# when its local config allows source builds from that URL prefix.
RELEASES_URL = "https://ftp.postgresql.org/pub/source/"

# Seed 5's change: 256 buffer mapping partitions, and dshash's to match (2^8).
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
        title="Seed 5: 16 kB blocks, 256 buffer partitions vs unpatched (source builds of 14.3)",
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
        profiles=[Profile("defaults", {}, description="PostgreSQL's own defaults")],
        workloads=[_branch_join("join on random bid (no branches pkey), scale 5", 5)],
        clients="2,4,8",
        duration_s=20,
    ),
    Preset(
        key="source-build-versions",
        title="Seed 1: version vs version, 13 built from source vs 16 (TPC-B, small)",
        description="TPC-B at scale 5, 4 clients x 500 transactions, three repeats, on "
        "PostgreSQL 13.16 built from source and on PostgreSQL 16.",
        builds=[PG16],
        source_builds=[
            SourceBuildPreset("PostgreSQL 13.16 (source build)", "13", _release("13.16", [], {}))
        ],
        profiles=[Profile("defaults", {}, description="PostgreSQL's own defaults")],
        workloads=[_builtin("tpcb-like", "TPC-B scale 5", 5)],
        clients="4",
        transactions=500,
        repeats=3,
    ),
]
PRESETS += SOURCE_BUILD_PRESETS


def find(key: str) -> Preset | None:
    return next((preset for preset in PRESETS if preset.key == key), None)


@transaction.atomic
def load_presets() -> dict[str, int]:
    """Create every preset's builds, profiles and workloads that do not exist yet.

    Returns how many of each were created; running it again creates nothing.
    """
    created = {"builds": 0, "config_profiles": 0, "workloads": 0}
    for preset in PRESETS:
        for name, version in preset.builds:
            _, new = PgBuild.objects.get_or_create(name=name, defaults={"version": version})
            created["builds"] += new
        for build in preset.source_builds:
            _, new = PgBuild.objects.get_or_create(
                name=build.name,
                defaults={
                    "version": build.version,
                    "source": "build",
                    "definition": build.definition,
                },
            )
            created["builds"] += new
        for profile in preset.profiles:
            parent = ConfigProfile.objects.get(name=profile.parent) if profile.parent else None
            _, new = ConfigProfile.objects.get_or_create(
                name=profile.name,
                defaults={
                    "settings": profile.settings,
                    "parent": parent,
                    "description": profile.description,
                },
            )
            created["config_profiles"] += new
        for workload in preset.workloads:
            values = {k: v for k, v in workload.items() if k != "name"}
            _, new = Workload.objects.get_or_create(name=workload["name"], defaults=values)
            created["workloads"] += new
    logger.info("presets loaded: %s", created)
    return created


def _pks(model: type[PgBuild | ConfigProfile | Workload], names: list[str]) -> list[int]:
    return list(model.objects.filter(name__in=names).values_list("pk", flat=True))


def form_initial(preset: Preset) -> dict[str, object]:
    """The schedule form's starting values for a preset (its catalogue entries by name)."""
    hosts = list(Host.objects.values_list("pk", flat=True)[:2])
    return {
        "name": preset.title,
        "description": preset.description,
        "hosts": hosts if len(hosts) == 1 else [],
        "builds": _pks(
            PgBuild,
            [name for name, _version in preset.builds] + [b.name for b in preset.source_builds],
        ),
        "config_profiles": _pks(ConfigProfile, [p.name for p in preset.profiles]),
        "workloads": _pks(Workload, [w["name"] for w in preset.workloads]),
        "clients": preset.clients,
        "duration_s": preset.duration_s,
        "transactions": preset.transactions,
        "repeats": preset.repeats,
        "storage": preset.storage,
        "between_points": preset.between_points,
    }
