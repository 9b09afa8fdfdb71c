"""The operating system's counters around a point: the server's CPU time, the disks'
bytes, the host's context switches.

The server's processes are the postmaster and its children. Linux adds a
child's CPU time to its parent's `cutime`/`cstime` (/proc/<pid>/stat) when the
parent reaps it: so the backends that exited in the window (pgbench's, at its
end) are counted too, and a difference between two readings is the server's
whole CPU time in between. Context switches are not carried over that way, so
the host's total (/proc/stat `ctxt`) is read instead.

Disk bytes are those the devices behind the data and WAL directories moved
(/proc/diskstats), not the processes' /proc/<pid>/io `write_bytes`: that one
counts a page-cache folio each time a write dirties it again, and with the
large folios of recent kernels a commit's 8 kB WAL write counted as about
270 kB (docs/decisions.md).
"""

import os
from pathlib import Path

from agents.contract.reports.counters import Number
from agents.observe.procfs import SECTOR_BYTES, read_diskstats, read_text

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
# Fields of /proc/<pid>/stat after the command name: 0 is the state, 1 the parent pid,
# 11 to 14 utime, stime, cutime, cstime (proc(5) numbers them 3, 4, 14 to 17).
PARENT_FIELD = 1
CPU_FIELDS = slice(11, 15)


def _stat_fields(pid: int, proc: Path) -> list[str] | None:
    """The fields of /proc/<pid>/stat after `(comm)`, or None when the process is gone."""
    text = read_text(proc / str(pid) / "stat")
    if text is None:
        return None
    return text.rpartition(")")[2].split()


def _cpu_ticks(fields: list[str]) -> int:
    """utime + stime + cutime + cstime: a process's CPU and that of its reaped children."""
    return sum(int(value) for value in fields[CPU_FIELDS])


def server_children(postmaster_pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The pids whose parent is the postmaster, now."""
    children = []
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        fields = _stat_fields(int(entry.name), proc)
        if fields is not None and int(fields[PARENT_FIELD]) == postmaster_pid:
            children.append(int(entry.name))
    return children


def server_counters(postmaster_pid: int, proc: Path = Path("/proc")) -> dict[str, Number]:
    """The server's CPU seconds so far; {} when its postmaster is gone."""
    postmaster = _stat_fields(postmaster_pid, proc)
    if postmaster is None:
        return {}
    ticks = _cpu_ticks(postmaster)
    for child in server_children(postmaster_pid, proc):
        fields = _stat_fields(child, proc)
        ticks += _cpu_ticks(fields) if fields is not None else 0
    return {"os.server_cpu_s": round(ticks / CLOCK_TICKS_PER_S, 2)}


def disk_counters(devices: set[str], path: str = "/proc/diskstats") -> dict[str, Number]:
    """Bytes read and written so far by the named block devices together; {} with none
    (data and WAL on tmpfs)."""
    if not devices:
        return {}
    found = read_diskstats(devices, path)
    if not found:
        return {}
    return {
        "os.disk_read_bytes": sum(c.read_sectors for c in found.values()) * SECTOR_BYTES,
        "os.disk_write_bytes": sum(c.write_sectors for c in found.values()) * SECTOR_BYTES,
    }


def host_context_switches(path: Path = Path("/proc/stat")) -> dict[str, Number]:
    """The host's context switches since boot (/proc/stat `ctxt`); {} when unreadable."""
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "ctxt":
            return {"os.host_context_switches": int(value)}
    return {}
