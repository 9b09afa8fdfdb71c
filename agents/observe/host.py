"""Per-second host samples: CPU split, memory, and I/O of the devices behind data and WAL.

Each sample reads three small /proc files (stat, meminfo, diskstats), kept open
and read again from their start, and computes rates from the previous reading.
No subprocesses, no walking of the process table: the sampler must not compete
with pgbench for CPU.
"""

import time
from pathlib import Path

from agents.contract.reports.results import Sample
from agents.contract.reports.samples import DiskRates
from agents.observe.clock import SYSTEM_CLOCK, Clock
from agents.observe.periodic import PeriodicSampler, SampleCallback
from agents.observe.procfs import (
    SECTOR_BYTES,
    CpuTimes,
    DiskCounters,
    KeptOpen,
    cpu_times_of,
    diskstats_of,
    meminfo_bytes,
)
from agents.observe.storage import sampling_device

MEMINFO_FIELDS = ("MemTotal", "MemAvailable", "Dirty")


def process_cpu_seconds() -> float:
    """User plus system CPU time of this process (all threads) so far, to the nanosecond
    (os.times counts clock ticks: 10 ms, a twentieth of a 20 s window's budget)."""
    return time.process_time()


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0


def cpu_split(before: CpuTimes, after: CpuTimes) -> dict[str, float]:
    """Percent of CPU time between two readings.

    user includes nice; system includes hard and soft interrupts.
    """
    total = after.total - before.total

    def share(*fields: str) -> float:
        spent = sum(getattr(after, name) - getattr(before, name) for name in fields)
        return _percent(spent, total)

    return {
        "cpu_user": share("user", "nice"),
        "cpu_system": share("system", "irq", "softirq"),
        "cpu_iowait": share("iowait"),
        "cpu_idle": share("idle"),
        "cpu_steal": share("steal"),
    }


def disk_rates(device: str, before: DiskCounters, after: DiskCounters, seconds: float) -> DiskRates:
    """Throughput, IOPS, utilisation and average queue depth (iostat's aqu-sz) of one device."""
    milliseconds = seconds * 1000.0
    return {
        "device": device,
        "read_bytes_per_s": round(
            (after.read_sectors - before.read_sectors) * SECTOR_BYTES / seconds
        ),
        "write_bytes_per_s": round(
            (after.write_sectors - before.write_sectors) * SECTOR_BYTES / seconds
        ),
        "read_iops": round((after.reads - before.reads) / seconds, 1),
        "write_iops": round((after.writes - before.writes) / seconds, 1),
        "util_percent": round(
            min(100.0, 100.0 * (after.io_ticks_ms - before.io_ticks_ms) / milliseconds), 1
        ),
        "queue_depth": round((after.weighted_ms - before.weighted_ms) / milliseconds, 2),
    }


def _no_device_rates(device: str | None) -> DiskRates:
    """A role whose path has no block device (tmpfs), or one missing from diskstats."""
    return {
        "device": device,
        "read_bytes_per_s": None,
        "write_bytes_per_s": None,
        "read_iops": None,
        "write_iops": None,
        "util_percent": None,
        "queue_depth": None,
    }


class HostSampler(PeriodicSampler):
    """Samples CPU, memory and the block devices behind role paths ("data", "wal").

    The device behind each path is resolved once, before sampling starts. Roles on the
    same device both name it and report the same numbers.
    """

    thread_name = "benchlab-host-sampler"

    def __init__(
        self,
        devices: dict[str, Path],
        interval: float = 1.0,
        on_sample: SampleCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ):
        super().__init__(interval, on_sample, clock)
        self.role_paths = dict(devices)
        self.role_devices: dict[str, str | None] = {}
        self._device_names: set[str] = set()
        self._previous: tuple[float, CpuTimes, dict[str, DiskCounters]] | None = None
        self._files: dict[str, KeptOpen] = {}

    def _prepare(self) -> None:
        """Resolve the device behind each role path."""
        self.role_devices = {role: sampling_device(path) for role, path in self.role_paths.items()}
        self._device_names = {name for name in self.role_devices.values() if name}

    def _read(self) -> tuple[float, CpuTimes, dict[str, DiskCounters]]:
        cpu = cpu_times_of(self._files["stat"].read())
        disks = diskstats_of(self._files["diskstats"].read(), self._device_names)
        return self.clock.monotonic(), cpu, disks

    def _begin(self) -> bool:
        for name in ("stat", "diskstats", "meminfo"):
            self._files[name] = KeptOpen(f"/proc/{name}")
        self._previous = self._read()
        return True

    def _end(self) -> None:
        for kept in self._files.values():
            kept.close()
        self._files.clear()

    def _sample(self) -> Sample:
        if self._previous is None:
            raise RuntimeError("host sampler: _sample before _begin read the baseline")
        at, cpu, disks = current = self._read()
        previous_at, previous_cpu, previous_disks = self._previous
        self._previous = current
        seconds = at - previous_at
        meminfo = meminfo_bytes(self._files["meminfo"].read(), MEMINFO_FIELDS)
        return {
            "t": self.elapsed(),
            **cpu_split(previous_cpu, cpu),
            "mem_used_bytes": meminfo["MemTotal"] - meminfo["MemAvailable"],
            "mem_available_bytes": meminfo["MemAvailable"],
            "mem_dirty_bytes": meminfo["Dirty"],
            "disks": {
                role: self._role_rates(device, previous_disks, disks, seconds)
                for role, device in self.role_devices.items()
            },
        }

    @staticmethod
    def _role_rates(
        device: str | None,
        before: dict[str, DiskCounters],
        after: dict[str, DiskCounters],
        seconds: float,
    ) -> DiskRates:
        if device is None or device not in before or device not in after:
            return _no_device_rates(device)
        return disk_rates(device, before[device], after[device], seconds)
