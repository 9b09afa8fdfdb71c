"""Small, tolerant readers for /proc and /sys.

Every reader returns None (or an empty result) when the file is missing or
unreadable, so that a fact the kernel does not expose never stops the agent.
Only OSError and ValueError are caught, around a single read each.
"""

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
    with open(path) as stat:
        fields = stat.readline().split()
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
    counters: dict[str, DiskCounters] = {}
    with open(path) as diskstats:
        for line in diskstats:
            fields = line.split()
            if len(fields) < 14 or fields[2] not in names:
                continue
            counters[fields[2]] = DiskCounters(
                reads=int(fields[3]),
                read_sectors=int(fields[5]),
                writes=int(fields[7]),
                write_sectors=int(fields[9]),
                in_flight=int(fields[11]),
                io_ticks_ms=int(fields[12]),
                weighted_ms=int(fields[13]),
            )
    return counters
