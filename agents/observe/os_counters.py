"""The operating system's counters of a PostgreSQL server: CPU time and disk bytes.

The server's processes are the postmaster and its children. Linux adds a
child's CPU time and I/O to its parent when the parent reaps it (the
postmaster's `cutime`/`cstime` in /proc/<pid>/stat, and its /proc/<pid>/io,
which counts the whole process with its reaped children): so the backends
that exited in the window (pgbench's, at its end) are counted too, and a
difference between two readings is the server's whole use in between.
Context switches are not carried over that way, so the host's total
(/proc/stat `ctxt`) is read instead.
"""

import os
from pathlib import Path

from agents.contract.reports.counters import Number
from agents.observe.procfs import read_text

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


def _io_bytes(pid: int, proc: Path) -> tuple[int, int] | None:
    """(read_bytes, write_bytes) of /proc/<pid>/io; None when unreadable (another user's)."""
    text = read_text(proc / str(pid) / "io")
    if text is None:
        return None
    values = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
    if "read_bytes" not in values or "write_bytes" not in values:
        return None
    return int(values["read_bytes"]), int(values["write_bytes"])


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
    """CPU seconds and disk bytes of the server so far; {} when its postmaster is gone.

    Disk bytes are left out when /proc/<pid>/io cannot be read (the agent runs
    as another user than the server and without the right to read it).
    """
    postmaster = _stat_fields(postmaster_pid, proc)
    if postmaster is None:
        return {}
    ticks = _cpu_ticks(postmaster)
    io = _io_bytes(postmaster_pid, proc)
    read_bytes, write_bytes = io if io is not None else (0, 0)
    for child in server_children(postmaster_pid, proc):
        fields = _stat_fields(child, proc)
        ticks += _cpu_ticks(fields) if fields is not None else 0
        child_io = _io_bytes(child, proc)
        if child_io is not None:
            read_bytes += child_io[0]
            write_bytes += child_io[1]
    counters: dict[str, Number] = {"os.server_cpu_s": round(ticks / CLOCK_TICKS_PER_S, 2)}
    if io is not None:
        counters["os.server_read_bytes"] = read_bytes
        counters["os.server_write_bytes"] = write_bytes
    return counters


def host_context_switches(path: Path = Path("/proc/stat")) -> dict[str, Number]:
    """The host's context switches since boot (/proc/stat `ctxt`); {} when unreadable."""
    for line in (read_text(path) or "").splitlines():
        name, _, value = line.partition(" ")
        if name == "ctxt":
            return {"os.host_context_switches": int(value)}
    return {}
