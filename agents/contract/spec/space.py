"""How much disk a job's dataset needs on each storage target (the lab refuses at schedule
time what cannot fit; docs/reliability.md, section "Disk").

Measured with pgbench 16.15 `-i` (client-side `dtgvp`) on PostgreSQL 16, default
settings, by `pg_database_size` and the pg_wal directory:

| scale | options | database | WAL written | pg_wal on disk |
|---|---|---|---|---|
| 1 | | 22 MB | 12 MB | 32 MB |
| 10 | | 157 MB | 123 MB | 144 MB |
| 50 | | 755 MB | 614 MB | 768 MB |
| 10 | `-F 50` | 289 MB | 125 MB | |
| 10 | `-F 10` | 1331 MB | 140 MB | |
| 10 | `--unlogged-tables` | 157 MB | 0.1 MB | |
| 10 | `--partitions=10` | 160 MB | 123 MB | |

So per scale unit: about 13 MB of table heap at fillfactor 100 (growing as
100/fillfactor: `pgbench_accounts` is filled to it), 2.2 MB of primary keys, and
12.5 MB of WAL unless the tables are unlogged; an empty database is about 8 MB
and pg_wal holds about 32 MB before anything is loaded. pg_wal keeps at most
about `max_wal_size` (default 1 GB) between checkpoints. Partitions add little
(0.3 MB each here). The estimate adds `MARGIN` on top: for other versions and
filesystems, and for what the benchmark itself adds (history rows, dead tuples).
"""

from collections.abc import Mapping
from typing import Literal

from agents.contract.settings.guc_values import parse_integer
from agents.contract.spec.document import DatasetSpec, JobSpec, SettingValue

MiB = 1024**2
GiB = 1024**3
MARGIN = 1.2

EMPTY_DATABASE_BYTES = 8 * MiB
HEAP_BYTES_PER_SCALE = 13 * MiB  # at fillfactor 100
INDEX_BYTES_PER_SCALE = int(2.2 * MiB)
PARTITION_BYTES = int(0.3 * MiB)
WAL_BASE_BYTES = 32 * MiB
WAL_BYTES_PER_SCALE = int(12.5 * MiB)
DEFAULT_MAX_WAL_SIZE = 1 * GiB

StorageRole = Literal["data", "wal"]


def dataset_bytes(dataset: DatasetSpec) -> int:
    """Tables and indexes `pgbench -i` leaves in the data directory, without margin."""
    steps = dataset["init_steps"]
    scale = dataset["scale"]
    fillfactor = dataset["fillfactor"] or 100
    heap = 0 if steps is not None and not {"g", "G"} & set(steps) else HEAP_BYTES_PER_SCALE
    index = 0 if steps is not None and "p" not in steps else INDEX_BYTES_PER_SCALE
    per_scale = heap * 100 / fillfactor + index
    partitions = (dataset["partitions"] or 0) * PARTITION_BYTES
    return int(EMPTY_DATABASE_BYTES + scale * per_scale + partitions)


def wal_bytes(dataset: DatasetSpec, settings: Mapping[str, SettingValue]) -> int:
    """The most pg_wal holds while `pgbench -i` runs, without margin."""
    if dataset["unlogged_tables"]:
        return WAL_BASE_BYTES
    written = dataset["scale"] * WAL_BYTES_PER_SCALE
    return WAL_BASE_BYTES + min(written, max_wal_size(settings))


def max_wal_size(settings: Mapping[str, SettingValue]) -> int:
    """`max_wal_size` in bytes from the spec's settings, else PostgreSQL's default (1 GB).

    A value that does not parse is the settings check's to refuse (with the
    catalogue, on the lab or on the agent); the estimate then uses the default.
    """
    value = settings.get("max_wal_size")
    if value is None or isinstance(value, bool):
        return DEFAULT_MAX_WAL_SIZE
    try:
        return parse_integer(str(value), "MB") * MiB
    except ValueError:
        return DEFAULT_MAX_WAL_SIZE


def space_needed(spec: JobSpec) -> dict[StorageRole, int]:
    """Bytes a job needs by storage role ("data", and "wal" when WAL is apart), margin included.

    With WAL in the data directory, or on the same target, the data role needs both.
    """
    data = dataset_bytes(spec["dataset"])
    wal = wal_bytes(spec["dataset"], spec["settings"])
    storage = spec["storage"]
    if storage["wal"] is None or storage["wal"] == storage["data"]:
        return {"data": int((data + wal) * MARGIN)}
    return {"data": int(data * MARGIN), "wal": int(wal * MARGIN)}


def megabytes(size: int | None) -> str:
    """A size for a message: "1,234 MB" (or "unknown")."""
    return "unknown" if size is None else f"{size / MiB:,.0f} MB"
