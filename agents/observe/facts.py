"""The host's hardware profile: CPU, memory, disks, storage targets, OS and sysctls.

`collect_facts` returns a JSON-serialisable dict with stable keys. A fact the
host does not expose is None (or an empty list), never an exception. It is
collected once per job, so it may run one small subprocess
(systemd-detect-virt).
"""

import os
import platform
import resource
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

from agents.contract.reports.facts import CpuClock, CpuFacts, DiskFacts, Facts, MemoryFacts, OsFacts
from agents.observe.procfs import (
    SECTOR_BYTES,
    read_int,
    read_meminfo,
    read_text,
    selected_choice,
)
from agents.observe.storage import describe_storage, read_mounts, whole_device

SYS_BLOCK = Path("/sys/block")
SYS_CPU = Path("/sys/devices/system/cpu")
SKIPPED_DISK_PREFIXES = ("loop", "ram", "zram")
SYSCTLS = (
    "vm.dirty_ratio",
    "vm.dirty_background_ratio",
    "vm.dirty_bytes",
    "vm.dirty_background_bytes",
    "vm.swappiness",
    "vm.overcommit_memory",
    "vm.nr_hugepages",
    "vm.zone_reclaim_mode",
    "kernel.shmmax",
    "kernel.shmall",
    "kernel.sched_autogroup_enabled",
    "fs.file-max",
    "net.core.somaxconn",
)


def collect_facts(storage: dict[str, Path]) -> Facts:
    """The hardware profile of this host, with each named storage target described."""
    mounts = read_mounts()
    return {
        "cpu": cpu_facts(),
        "memory": memory_facts(),
        "disks": disk_facts(),
        "storage": {name: describe_storage(path, mounts) for name, path in storage.items()},
        "os": os_facts(),
        "sysctls": sysctl_facts(),
        "limits": limit_facts(),
        "collected_at": datetime.now(UTC).isoformat(),
    }


def _cpuinfo_first_values() -> dict[str, str]:
    """The first value of each /proc/cpuinfo key (the first processor's block, mostly)."""
    values: dict[str, str] = {}
    for line in (read_text("/proc/cpuinfo") or "").splitlines():
        key, separator, value = line.partition(":")
        if separator:
            values.setdefault(key.strip(), value.strip())
    return values


def _online_cpu_dirs() -> list[Path]:
    return sorted(
        path
        for path in SYS_CPU.glob("cpu[0-9]*")
        if (path / "topology").exists() and read_int(path / "online") != 0
    )


def _cpu_mhz(cpuinfo: dict[str, str]) -> CpuClock:
    cpufreq = SYS_CPU / "cpu0" / "cpufreq"
    minimum = read_int(cpufreq / "cpuinfo_min_freq")
    maximum = read_int(cpufreq / "cpuinfo_max_freq")
    current = read_int(cpufreq / "scaling_cur_freq")
    try:
        current_mhz = current / 1000 if current else float(cpuinfo["cpu MHz"])
    except (KeyError, ValueError):
        current_mhz = None
    return {
        "mhz_min": minimum / 1000 if minimum else None,
        "mhz_max": maximum / 1000 if maximum else None,
        "mhz_current": current_mhz,
    }


def cpu_facts() -> CpuFacts:
    """Model, vendor, topology (sockets, cores, threads), clock and NUMA nodes."""
    cpuinfo = _cpuinfo_first_values()
    topology = [
        (read_int(cpu / "topology/physical_package_id"), read_int(cpu / "topology/core_id"))
        for cpu in _online_cpu_dirs()
    ]
    numa_nodes = list(Path("/sys/devices/system/node").glob("node[0-9]*"))
    return {
        "model": cpuinfo.get("model name") or cpuinfo.get("Model") or cpuinfo.get("cpu model"),
        "vendor": cpuinfo.get("vendor_id") or cpuinfo.get("CPU implementer"),
        "sockets": len({package for package, _ in topology}) or None,
        "cores": len(set(topology)) or None,
        "threads": os.cpu_count(),
        **_cpu_mhz(cpuinfo),
        "numa_nodes": len(numa_nodes) or None,
    }


def memory_facts() -> MemoryFacts:
    """Total memory, swap and the huge page pool."""
    meminfo = read_meminfo()
    return {
        "total_bytes": meminfo.get("MemTotal"),
        "swap_bytes": meminfo.get("SwapTotal"),
        "hugepages_total": meminfo.get("HugePages_Total"),
        "hugepage_size_bytes": meminfo.get("Hugepagesize"),
    }


def _raid_membership() -> dict[str, list[str]]:
    """Whole disk name -> the md arrays it (or one of its partitions) belongs to."""
    membership: dict[str, list[str]] = {}
    for array in sorted(SYS_BLOCK.glob("md*")):
        for member in sorted((array / "slaves").glob("*")):
            membership.setdefault(whole_device(member.name), []).append(array.name)
    return membership


def _disk(device: Path, raid_membership: dict[str, list[str]]) -> DiskFacts:
    sectors = read_int(device / "size")
    rotational = read_int(device / "queue/rotational")
    return {
        "name": device.name,
        "model": read_text(device / "device/model") or None,
        "vendor": read_text(device / "device/vendor") or None,
        "size_bytes": sectors * SECTOR_BYTES if sectors is not None else None,
        "rotational": bool(rotational) if rotational is not None else None,
        "scheduler": selected_choice(read_text(device / "queue/scheduler")),
        "nr_requests": read_int(device / "queue/nr_requests"),
        "write_cache": read_text(device / "queue/write_cache"),
        "raid_level": read_text(device / "md/level"),
        "raid_member_of": raid_membership.get(device.name, []),
    }


def disk_facts() -> list[DiskFacts]:
    """Every block device except loop and RAM disks, with its queue settings and RAID role."""
    raid_membership = _raid_membership()
    return [
        _disk(device, raid_membership)
        for device in sorted(SYS_BLOCK.iterdir())
        if not device.name.startswith(SKIPPED_DISK_PREFIXES)
    ]


def _os_release() -> dict[str, str]:
    values: dict[str, str] = {}
    for line in (read_text("/etc/os-release") or "").splitlines():
        key, separator, value = line.partition("=")
        if separator:
            values[key] = value.strip().strip("\"'")
    return values


def _boot_time() -> str | None:
    for line in (read_text("/proc/stat") or "").splitlines():
        if line.startswith("btime "):
            return datetime.fromtimestamp(int(line.split()[1]), UTC).isoformat()
    return None


def _virtualization() -> str | None:
    """systemd-detect-virt's answer ("kvm", "docker", "none"), else the DMI product name."""
    detector = shutil.which("systemd-detect-virt")
    if detector:
        try:
            answer = subprocess.run(
                [detector], capture_output=True, text=True, timeout=5, check=False
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            answer = ""
        if answer:
            return answer
    return read_text("/sys/class/dmi/id/product_name") or None


def os_facts() -> OsFacts:
    """Kernel, distribution, architecture, hostname, boot time and virtualization."""
    uname = platform.uname()
    release = _os_release()
    return {
        "kernel_release": uname.release,
        "kernel_version": uname.version,
        "distribution": release.get("PRETTY_NAME"),
        "distribution_id": release.get("ID"),
        "distribution_version": release.get("VERSION_ID"),
        "architecture": uname.machine,
        "hostname": uname.node,
        "boot_time": _boot_time(),
        "virtualization": _virtualization(),
    }


def _sysctl(name: str) -> int | str | None:
    text = read_text(Path("/proc/sys") / name.replace(".", "/"))
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return text


def sysctl_facts() -> dict[str, int | str | None]:
    """The kernel settings that change PostgreSQL results; None where the kernel lacks one."""
    values: dict[str, int | str | None] = {name: _sysctl(name) for name in SYSCTLS}
    thp = Path("/sys/kernel/mm/transparent_hugepage")
    values["transparent_hugepage.enabled"] = selected_choice(read_text(thp / "enabled"))
    values["transparent_hugepage.defrag"] = selected_choice(read_text(thp / "defrag"))
    return values


def _limit(value: int) -> int | str:
    return "unlimited" if value == resource.RLIM_INFINITY else value


def limit_facts() -> dict[str, int | str]:
    """Resource limits of the agent process (PostgreSQL children inherit them)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    return {"nofile_soft": _limit(soft), "nofile_hard": _limit(hard)}
