"""Small, tolerant readers for /proc and /sys.

Every reader returns None (or an empty result) when the file is missing or
unreadable, so that a fact the kernel does not expose never stops the agent.
Only OSError and ValueError are caught, around a single read each.
"""

import os
from pathlib import Path
from typing import NamedTuple

SECTOR_BYTES = 512  # /proc/diskstats and /sys/block/*/size always count 512-byte sectors


def read_text(path: Path | str) -> str | None:
    """The stripped content of a small file, or None when it cannot be read."""
    try:
        return Path(path).read_text().strip()
    except (OSError, ValueError):
        return None


def read_int(path: Path | str) -> int | None:
    """The integer in a small file, or None when it is missing or not an integer."""
    text = read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def selected_choice(text: str | None) -> str | None:
    """The bracketed choice of a sysfs selector such as 'always [madvise] never'."""
    if text is None:
        return None
    for word in text.split():
        if word.startswith("[") and word.endswith("]"):
            return word[1:-1]
    return text or None


def read_meminfo(path: str = "/proc/meminfo") -> dict[str, int]:
    """/proc/meminfo as bytes (values given in kB) or plain counts (HugePages_*)."""
    text = read_text(path)
    values: dict[str, int] = {}
    for line in (text or "").splitlines():
        name, _, rest = line.partition(":")
        parts = rest.split()
        if not parts:
            continue
        number = int(parts[0])
        values[name] = number * 1024 if parts[1:] == ["kB"] else number
    return values


def meminfo_bytes(text: bytes, names: tuple[str, ...]) -> dict[str, int]:
    """The named /proc/meminfo entries (each given in kB) in bytes, read from its `text`
    without parsing the other lines; a name the kernel does not have is left out."""
    lines = b"\n" + text
    values: dict[str, int] = {}
    for name in names:
        start = lines.find(b"\n" + name.encode() + b":")
        if start == -1:
            continue
        end = lines.find(b"\n", start + 1)
        values[name] = int(lines[start : end if end != -1 else None].split()[1]) * 1024
    return values


class KeptOpen:
    """A /proc file kept open and read again from its start with pread: a sampler reading it
    every second saves the open and close (and Python's file objects) each time."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        self._size = 16_384

    def read(self) -> bytes:
        """The file's current content."""
        while True:
            data = os.pread(self._fd, self._size, 0)
            if len(data) < self._size:
                return data
            self._size *= 2

    def close(self) -> None:
        os.close(self._fd)


class CpuTimes(NamedTuple):
    """Aggregate CPU time from the first line of /proc/stat, in clock ticks."""

    user: int
    nice: int
    system: int
    idle: int
    iowait: int
    irq: int
    softirq: int
    steal: int

    @property
    def total(self) -> int:
        # guest and guest_nice are already counted inside user and nice.
        return sum(self)


def read_cpu_times(path: str = "/proc/stat") -> CpuTimes:
    """The aggregate 'cpu' line of /proc/stat."""
    with open(path, "rb") as stat:
        return cpu_times_of(stat.readline())


def cpu_times_of(stat: bytes) -> CpuTimes:
    """The aggregate 'cpu' line (the first) of /proc/stat's content."""
    line_end = stat.find(b"\n")
    fields = stat[: line_end if line_end != -1 else len(stat)].split()
    values = [int(value) for value in fields[1:9]]
    values += [0] * (8 - len(values))
    return CpuTimes(*values)


class DiskCounters(NamedTuple):
    """Cumulative counters of one line of /proc/diskstats."""

    reads: int
    read_sectors: int
    writes: int
    write_sectors: int
    in_flight: int
    io_ticks_ms: int
    weighted_ms: int


def read_diskstats(names: set[str], path: str = "/proc/diskstats") -> dict[str, DiskCounters]:
    """Counters of the named block devices (other lines are skipped)."""
    with open(path, "rb") as diskstats:
        return diskstats_of(diskstats.read(), names)


def diskstats_of(diskstats: bytes, names: set[str]) -> dict[str, DiskCounters]:
    """Counters of the named block devices in /proc/diskstats's content."""
    wanted = {name.encode() for name in names}
    counters: dict[str, DiskCounters] = {}
    for line in diskstats.splitlines():
        fields = line.split()
        if len(fields) < 14 or fields[2] not in wanted:
            continue
        counters[fields[2].decode()] = DiskCounters(
            reads=int(fields[3]),
            read_sectors=int(fields[5]),
            writes=int(fields[7]),
            write_sectors=int(fields[9]),
            in_flight=int(fields[11]),
            io_ticks_ms=int(fields[12]),
            weighted_ms=int(fields[13]),
        )
    return counters
