"""The host and server sample documents (docs/contracts.md): what agents/observe/host.py
and agents/observe/server.py measure each second, as the lab reads them.

Every key but `t` may be missing (a sample stored by an older agent, or a measurement
the server's version lacks), so both are partial.
"""

from typing import TypedDict


class DiskRates(TypedDict):
    """One role's device over one interval; all None for a role with no block device."""

    device: str | None
    read_bytes_per_s: int | None
    write_bytes_per_s: int | None
    read_iops: float | None
    write_iops: float | None
    util_percent: float | None
    queue_depth: float | None


class HostSampleDocument(TypedDict, total=False):
    """A host's second: CPU split in percent, memory in bytes, disks by role (data, wal)."""

    t: float
    cpu_user: float
    cpu_system: float
    cpu_iowait: float
    cpu_idle: float
    cpu_steal: float
    mem_used_bytes: int
    mem_available_bytes: int
    mem_dirty_bytes: int
    disks: dict[str, DiskRates]


class ServerSampleDocument(TypedDict, total=False):
    """A server's second: cumulative counters, the rates of some (None across a statistics
    reset), and the active backends by wait event (None before 9.6)."""

    t: float
    checkpoints_timed: int
    checkpoints_req: int
    buffers_checkpoint: int
    buffers_clean: int
    buffers_backend: int
    buffers_alloc: int
    wal_bytes: int
    buffers_checkpoint_per_s: float | None
    buffers_clean_per_s: float | None
    buffers_backend_per_s: float | None
    buffers_alloc_per_s: float | None
    wal_bytes_per_s: float | None
    active_backends: int
    wait_events: dict[str, int] | None
