"""The host's noise around a point: CPU stolen by the hypervisor, CPU used outside the job.

A `CpuWindow` reads /proc/stat, the job cgroup's CPU usage and the agent's own
CPU time when a point's window starts and ends (two reads each, nothing
sampled in between). Where the job's cgroup accounts CPU (v2 `cpu.stat`
`usage_usec`, v1 `cpuacct.usage` where cpuacct is mounted with cpu), the job's
CPU is the cgroup's; elsewhere it is the server's processes (the point's
`os.server_cpu_s` counter) plus pgbench's rusage (`pgbench_cpu_s`), which
miss only what the job ran outside those two.
"""

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from agents.cgroups import JobCgroup
from agents.contract.reports.noise import JobCpuSource, PointNoise
from agents.observe.procfs import CpuTimes, read_cpu_times, read_int, read_text

CLOCK_TICKS_PER_S = os.sysconf("SC_CLK_TCK")
BUSY_FIELDS = ("user", "nice", "system", "irq", "softirq")


def cgroup_cpu_seconds(cgroup: JobCgroup | None) -> float | None:
    """The CPU time the cgroup's processes used so far (reaped ones included); None without
    a cgroup or where it keeps no CPU account."""
    if cgroup is None:
        return None
    for directory in cgroup.directories:
        if cgroup.version == 2:
            stat = read_text(directory / "cpu.stat") or ""
            for line in stat.splitlines():
                name, _, value = line.partition(" ")
                if name == "usage_usec" and value.strip().isdigit():
                    return int(value) / 1e6
        else:
            nanoseconds = read_int(directory / "cpuacct.usage")
            if nanoseconds is not None:
                return nanoseconds / 1e9
    return None


@dataclass(frozen=True)
class CpuReading:
    """One end of a window: seconds on the monotonic clock, the host's CPU ticks, the job
    cgroup's CPU seconds (None without an account) and the agent process's own."""

    at: float
    host: CpuTimes
    job_cpu_s: float | None
    agent_cpu_s: float


def read_cpu(cgroup: JobCgroup | None, stat: Path = Path("/proc/stat")) -> CpuReading:
    times = os.times()
    return CpuReading(
        at=time.monotonic(),
        host=read_cpu_times(str(stat)),
        job_cpu_s=cgroup_cpu_seconds(cgroup),
        agent_cpu_s=times.user + times.system,
    )


@dataclass(frozen=True)
class CpuWindow:
    """A point's window's two readings."""

    before: CpuReading
    after: CpuReading


def _ticks(before: CpuTimes, after: CpuTimes, *fields: str) -> int:
    return sum(getattr(after, name) - getattr(before, name) for name in fields)


def processes_cpu_seconds(point: Mapping[str, object], pgbench_here: bool) -> float | None:
    """The job's CPU on this host from its processes: pgbench's rusage where pgbench ran
    here, plus the server's processes over the window where their counters were read;
    None when a part this host ran is unknown."""
    total = 0.0
    if pgbench_here:
        pgbench = point.get("pgbench_cpu_s")
        if not isinstance(pgbench, int | float):
            return None
        total += pgbench
    counters = point.get("counters")
    if isinstance(counters, Mapping):
        server = counters.get("deltas", {}).get("os.server_cpu_s")
        if not isinstance(server, int | float):
            return None
        total += server
    elif not pgbench_here:
        return None
    return total


def point_noise(
    window: CpuWindow, point: Mapping[str, object], pgbench_here: bool = True
) -> PointNoise:
    """Steal and foreign CPU over the window of `point` (a point result being built);
    `pgbench_here` False where pgbench ran on a client host."""
    before, after = window.before, window.after
    total_ticks = after.host.total - before.host.total
    seconds = max(after.at - before.at, 1e-9)
    host_cpu_s = total_ticks / CLOCK_TICKS_PER_S
    busy_s = _ticks(before.host, after.host, *BUSY_FIELDS) / CLOCK_TICKS_PER_S
    steal = _ticks(before.host, after.host, "steal")
    agent_s = after.agent_cpu_s - before.agent_cpu_s
    source: JobCpuSource | None
    if before.job_cpu_s is not None and after.job_cpu_s is not None:
        job_s: float | None = after.job_cpu_s - before.job_cpu_s
        source = "cgroup"
    else:
        job_s = processes_cpu_seconds(point, pgbench_here)
        source = "processes" if job_s is not None else None
    foreign_s = None if job_s is None else max(0.0, busy_s - job_s - agent_s)
    return {
        "window_s": round(seconds, 3),
        "cpus": os.cpu_count() or 1,
        "cpu_steal_percent": _percent(steal, total_ticks),
        "host_busy_cpu_s": round(busy_s, 2),
        "job_cpu_s": None if job_s is None else round(job_s, 3),
        "job_cpu_source": source,
        "agent_cpu_s": round(agent_s, 3),
        "foreign_cpu_s": None if foreign_s is None else round(foreign_s, 2),
        "foreign_cpu_percent": (
            None if foreign_s is None or host_cpu_s <= 0 else round(100 * foreign_s / host_cpu_s, 2)
        ),
    }


def _percent(part: int, whole: int) -> float:
    return round(100.0 * part / whole, 2) if whole > 0 else 0.0
