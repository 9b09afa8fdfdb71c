"""Which mount, filesystem and block device lie behind a directory.

A storage target may not exist yet when the agent starts: everything here
works on the nearest existing parent and creates nothing.
"""

import os
from dataclasses import dataclass
from pathlib import Path

from agents.contract.reports.facts import Space, StorageFacts
from agents.observe.procfs import read_text

SYS_CLASS_BLOCK = Path("/sys/class/block")


@dataclass(frozen=True)
class Mount:
    """One line of /proc/self/mountinfo."""

    mount_point: str
    fs_type: str
    source: str
    options: str
    device_number: str  # "major:minor" as the kernel gives it


def nearest_existing(path: Path) -> Path:
    """The path with symlinks resolved, or its nearest existing parent."""
    candidate = Path(path).resolve()
    while not candidate.exists():
        candidate = candidate.parent
    return candidate


def _unescape(field: str) -> str:
    """Undo mountinfo's octal escapes (a space is written as \\040)."""
    if "\\" not in field:
        return field
    return field.encode().decode("unicode_escape").encode("latin-1").decode()


def _merge_options(mount_options: str, super_options: str) -> str:
    """Per-mount options followed by the filesystem's own, as /proc/mounts shows them."""
    merged = mount_options.split(",")
    merged += [option for option in super_options.split(",") if option not in merged]
    return ",".join(merged)


def _parse_mountinfo_line(line: str) -> Mount:
    fields = line.split()
    separator = fields.index("-")
    fs_type, source, super_options = fields[separator + 1 : separator + 4]
    return Mount(
        mount_point=_unescape(fields[4]),
        fs_type=fs_type,
        source=_unescape(source),
        options=_merge_options(fields[5], super_options),
        device_number=fields[2],
    )


def read_mounts(path: str = "/proc/self/mountinfo") -> list[Mount]:
    """All mounts in kernel order (a later mount on the same point hides an earlier one)."""
    text = read_text(path)
    return [_parse_mountinfo_line(line) for line in (text or "").splitlines()]


def mount_of(path: Path, mounts: list[Mount]) -> Mount | None:
    """The mount that holds an existing, resolved path: the longest matching mount point."""
    best: Mount | None = None
    for mount in mounts:
        if not Path(path).is_relative_to(mount.mount_point):
            continue
        if best is None or len(mount.mount_point) >= len(best.mount_point):
            best = mount
    return best


def block_device_of(mount: Mount) -> str | None:
    """Kernel name of the block device holding a mount ("nvme0n1p2", "dm-0"), if any."""
    sys_entry = Path("/sys/dev/block") / mount.device_number
    if sys_entry.exists():
        return sys_entry.resolve().name
    # btrfs and some others report an anonymous device number: fall back to the source.
    if mount.source.startswith("/dev/"):
        name = Path(os.path.realpath(mount.source)).name
        if (SYS_CLASS_BLOCK / name).exists():
            return name
    return None


def partition_parent(name: str) -> str | None:
    """The disk a partition belongs to, or None when the device is not a partition."""
    entry = SYS_CLASS_BLOCK / name
    if not (entry / "partition").exists():
        return None
    return entry.resolve().parent.name


def whole_device(name: str) -> str:
    """A partition's disk, or the device itself (disks, dm and md devices)."""
    return partition_parent(name) or name


def physical_disks(name: str) -> list[str]:
    """The whole disks under a device, following partitions and dm/md slaves."""
    device = whole_device(name)
    slaves_dir = SYS_CLASS_BLOCK / device / "slaves"
    try:
        slaves = sorted(entry.name for entry in slaves_dir.iterdir())
    except OSError:
        slaves = []
    if not slaves:
        return [device]
    disks: list[str] = []
    for slave in slaves:
        disks += [disk for disk in physical_disks(slave) if disk not in disks]
    return disks


def sampling_device(path: Path) -> str | None:
    """The block device whose /proc/diskstats line measures I/O to a path.

    A partition is measured at its disk (that is where utilisation and queueing
    happen); dm and md devices are measured as themselves. None for filesystems
    without a block device (tmpfs, overlay).
    """
    mount = mount_of(nearest_existing(path), read_mounts())
    if mount is None:
        return None
    device = block_device_of(mount)
    return whole_device(device) if device else None


def _space(path: Path) -> Space:
    try:
        stats = os.statvfs(path)
    except OSError:
        return {"total_bytes": None, "free_bytes": None}
    return {
        "total_bytes": stats.f_blocks * stats.f_frsize,
        "free_bytes": stats.f_bavail * stats.f_frsize,
    }


def target_space(targets: dict[str, Path]) -> dict[str, Space]:
    """Total and free bytes behind each storage target, by name (for heartbeats)."""
    return {name: _space(nearest_existing(path)) for name, path in targets.items()}


def describe_storage(path: Path, mounts: list[Mount]) -> StorageFacts:
    """Mount point, filesystem, device and space of the directory a storage target names."""
    existing = nearest_existing(path)
    mount = mount_of(existing, mounts)
    device = block_device_of(mount) if mount else None
    return {
        "path": str(path),
        "resolved_path": str(Path(path).resolve()),
        "existing_path": str(existing),
        "mount_point": mount.mount_point if mount else None,
        "filesystem": mount.fs_type if mount else None,
        "mount_options": mount.options if mount else None,
        "device": mount.source if mount else None,
        "block_device": whole_device(device) if device else None,
        "partition": device if device and partition_parent(device) else None,
        "disks": physical_disks(device) if device else [],
        **_space(existing),
    }
