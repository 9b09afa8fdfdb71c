"""A job's cgroup from the agent's config, and the jobs a host without cgroups refuses.

Killing what a job left running relies on its cgroup (agents/cgroups.py). A
host that cannot give one (the agent neither root nor delegated a cgroup)
still runs jobs whose programs are the lab's own (pgbench's built-in scripts,
plain SQL); those that run a lab user's code (a `\\shell` script, superuser
SQL, which reaches `COPY ... FROM PROGRAM`, a patch) are refused there, even
when the local config allows them, rather than run with nothing to end what
they start. `sandbox: false` is the operator's acceptance that jobs reach
everything the OS user can: it refuses nothing more.
"""

import logging

from agents.cgroups import Hierarchy, JobCgroup, Limits, detect, new_job_name
from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.reports.events import JobIsolation
from agents.contract.spec.document import JobSpec
from agents.contract.workload_text.scripts import check_workload_scripts
from agents.contract.workload_text.workload_sql import check_workload_sql
from agents.cpusets import remove_left_cpusets

logger = logging.getLogger(__name__)


def limits(config: AgentConfig) -> Limits:
    return Limits.for_host(config.job_memory_mb, config.job_pids, config.job_cpus)


def open_job_cgroup(config: AgentConfig, spec: JobSpec, job_id: str) -> JobCgroup | None:
    """The job's cgroup, created with the config's limits; None on a host without
    cgroups, where a job running lab code is refused (JobError sandbox_unavailable)."""
    hierarchy = detect()
    if isinstance(hierarchy, str):
        refuse_lab_code(spec, config, hierarchy)
        logger.warning("job %s runs without a cgroup: %s", job_id, hierarchy)
        return None
    return _open(hierarchy, config, job_id)


def _open(hierarchy: Hierarchy, config: AgentConfig, job_id: str) -> JobCgroup:
    try:
        return hierarchy.open_job(new_job_name(job_id), limits(config))
    except OSError as error:
        raise JobError(
            "sandbox_unavailable",
            f"the job's cgroup could not be created under {hierarchy.parents[0]}: {error}",
        ) from error


def end_job_cgroup(cgroup: JobCgroup) -> str | None:
    """Kill what is left in `cgroup` and remove it; what went wrong, for the job's log."""
    try:
        return cgroup.end()
    except OSError as error:
        return f"ending the job's cgroup {cgroup.directories[0]} failed: {error}"


def lab_code_in(spec: JobSpec) -> list[str]:
    """What in `spec` runs a lab user's code on the host: each as its config option."""
    found = []
    try:
        check_workload_scripts(spec["workload"], allow_shell=False)
    except JobError:
        found.append("allow_shell_scripts")
    try:
        check_workload_sql(spec, allow_superuser_sql=False)
    except JobError:
        found.append("allow_superuser_sql")
    build = spec["postgres"]["build"]
    if build is not None and build["patches"]:
        found.append("allow_user_patches")
    return found


def refuse_lab_code(spec: JobSpec, config: AgentConfig, problem: str) -> None:
    """Refuse a job that runs lab code on a host whose jobs get no cgroup (`problem`)."""
    if not config.sandbox:
        return
    options = lab_code_in(spec)
    if options:
        raise JobError(
            "sandbox_unavailable",
            f"this job needs {', '.join(options)}, and this host cannot give a job a cgroup "
            f"({problem}): what the lab's code started could outlive the job, so the agent "
            "refuses it whatever its local config allows",
        )


def host_isolation() -> JobIsolation:
    """Whether this host gives its jobs cgroups, as `agent_register` reports it."""
    hierarchy = detect()
    if isinstance(hierarchy, str):
        return {"cgroups": None, "problem": hierarchy}
    return {"cgroups": f"v{hierarchy.version}", "problem": None}


def start_of_agent(config: AgentConfig) -> None:
    """At the agent's start: say whether its jobs get cgroups (and what it refuses when
    they do not), and kill and remove the cgroups of jobs whose agent is gone."""
    hierarchy = detect()
    if isinstance(hierarchy, str):
        refused = (
            ""
            if not config.sandbox
            else (
                "; it refuses jobs with shell scripts, superuser SQL or patches, whatever its "
                "local config allows"
            )
        )
        logger.warning("jobs on this host get no cgroup: %s%s", hierarchy, refused)
        return
    job_limits = limits(config)
    logger.info(
        "jobs run in cgroups (v%s under %s): memory %s bytes, %s processes, %s CPUs",
        hierarchy.version, hierarchy.parents[0], job_limits.memory_bytes, job_limits.pids,
        job_limits.cpus or "all",
    )  # fmt: skip
    removed = hierarchy.remove_leftovers()
    if removed:
        logger.warning("killed and removed the cgroups of jobs left behind: %s", removed)
    cpusets = remove_left_cpusets()
    if cpusets:
        logger.warning("removed the cpusets of duet sides left behind: %s", cpusets)
