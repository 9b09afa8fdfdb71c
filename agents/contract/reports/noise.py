"""The host's noise as the agent measures it (docs/contracts.md, section 3).

`PointNoise` is a point's `noise`: over its measured window, the CPU the
hypervisor gave to other guests (steal) and the CPU used on the host by
processes outside the job (foreign). Agents before it omit it.
"""

from typing import Literal, TypedDict

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

