"""The host's noise as the agent measures it (docs/contracts.md, section 3).

`PointNoise` is a point's `noise`: over its measured window, the CPU the
hypervisor gave to other guests (steal) and the CPU used on the host by
processes outside the job (foreign). `HostCanary` is the result's `canary`:
a few seconds the agent spends before a job's points timing a fixed CPU loop,
an fsync on the job's storage and a memory copy, so the lab can tell a slower host from a
slower PostgreSQL. Agents before these keys omit them.
"""

from typing import Literal, NotRequired, TypedDict

JobCpuSource = Literal["cgroup", "processes"]


class PointNoise(TypedDict):
    """The host's CPU over one point's window.

    Percentages are of the host's whole CPU time in the window (`cpus` CPUs for
    `window_s` seconds), as the host samples' `cpu_*` are. `job_cpu_s` is what
    the job's processes used: their cgroup's usage (`job_cpu_source` "cgroup"),
    or where the job has no cgroup with CPU accounting the server's processes
    plus pgbench ("processes"); None when neither was read. Foreign CPU is the
    host's busy time less the job's and the agent's own; None without `job_cpu_s`.
    """

    window_s: float
    cpus: int
    cpu_steal_percent: float
    host_busy_cpu_s: float
    job_cpu_s: float | None
    job_cpu_source: JobCpuSource | None
    agent_cpu_s: float
    foreign_cpu_s: float | None
    foreign_cpu_percent: float | None


class HostCanary(TypedDict):
    """The result's `canary`: the host timed before the job's cluster starts.

    `cpu_loop_ns` is the median, over `cpu_loop_runs` runs of `cpu_loop_iterations`
    iterations, of one iteration of a fixed integer loop on one CPU (a host whose
    CPU is taken by neighbours or throttled takes longer). `fsync_ms` is the median
    and `fsync_max_ms` the slowest of `fsync_count` 8 kB writes each followed by an
    fsync, in a file in `fsync_directory` (the storage of the job's data directory,
    removed after). `memory_gbps` is the median rate, over `memory_copy_runs` copies of
    a `memory_copy_mib` MiB buffer into another (far larger than the last-level cache),
    in 10^9 bytes copied a second (a host whose memory bandwidth neighbours take copies
    slower); agents before it omit the three. `at` is when it started, `seconds` how
    long it took.
    """

    at: str
    seconds: float
    cpu_loop_iterations: int
    cpu_loop_runs: int
    cpu_loop_ns: float
    fsync_directory: str
    fsync_count: int
    fsync_ms: float
    fsync_max_ms: float
    memory_copy_mib: NotRequired[int]
    memory_copy_runs: NotRequired[int]
    memory_gbps: NotRequired[float]
