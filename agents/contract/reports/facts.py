"""The host's facts (docs/contracts.md): what `python -m agents facts` prints, what an
agent registers with and what a result document snapshots.

A fact the host does not expose is None (or an empty list); keys are stable.
"""

from typing import TypedDict


class CpuClock(TypedDict):
    mhz_min: float | None
    mhz_max: float | None
    mhz_current: float | None


class CpuFacts(CpuClock):
    model: str | None
    vendor: str | None
    sockets: int | None
    cores: int | None
    threads: int | None
    numa_nodes: int | None


class MemoryFacts(TypedDict):
    total_bytes: int | None
    swap_bytes: int | None
    hugepages_total: int | None
    hugepage_size_bytes: int | None


class DiskFacts(TypedDict):
    """One block device with its queue settings and RAID role."""

    name: str
    model: str | None
    vendor: str | None
    size_bytes: int | None
    rotational: bool | None
    scheduler: str | None
    nr_requests: int | None
    write_cache: str | None
    raid_level: str | None
    raid_member_of: list[str]


class Space(TypedDict):
    total_bytes: int | None
    free_bytes: int | None


class StorageFacts(Space):
    """The mount, filesystem, device and space behind a storage target's directory."""

    path: str
    resolved_path: str
    existing_path: str
    mount_point: str | None
    filesystem: str | None
    mount_options: str | None
    device: str | None
    block_device: str | None
    partition: str | None
    disks: list[str]


class OsFacts(TypedDict):
    kernel_release: str
    kernel_version: str
    distribution: str | None
    distribution_id: str | None
    distribution_version: str | None
    architecture: str
    hostname: str
    boot_time: str | None
    virtualization: str | None


class Facts(TypedDict):
    """The hardware profile of one host, with each named storage target described."""

    cpu: CpuFacts
    memory: MemoryFacts
    disks: list[DiskFacts]
    storage: dict[str, StorageFacts]
    os: OsFacts
    # Kernel settings by sysctl name (and transparent_hugepage.*); None where absent.
    sysctls: dict[str, int | str | None]
    # Resource limits of the agent process: a number or "unlimited".
    limits: dict[str, int | str]
    collected_at: str
