"""The agent's local configuration: what the server may not decide for it.

Storage targets, the OS user that owns PostgreSQL processes, the cache of
binaries, and the escape hatches for settings and scripts that run commands or
load code. Read from a small JSON file and/or command-line flags.
"""

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_OS_USER = "benchlab"
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_JOB_PIDS = 4096
DEFAULT_JOB_TMP_MB = 256
# Config file keys renamed since: a file naming the former key means the new one.
FORMER_KEYS = {"allow_profiling": "allow_cpu_profiling"}


def default_state_dir() -> Path:
    """Where the agent keeps its cache and scratch space.

    Under /var when running as root, because the unprivileged PostgreSQL user
    must be able to read the binaries (root's home is private).
    """
    if env := os.environ.get("BENCHLAB_AGENT_DIR"):
        return Path(env)
    if os.geteuid() == 0:
        return Path("/var/lib/benchlab-agent")
    return Path.home() / ".local" / "share" / "benchlab-agent"


def default_redis_url() -> str:
    """REDIS_URL from the environment (as the web tier reads it), else the local default."""
    return os.environ.get("REDIS_URL") or DEFAULT_REDIS_URL


@dataclass
class AgentConfig:
    """Local, trusted configuration of one agent."""

    name: str = "local"
    state_dir: Path = field(default_factory=default_state_dir)
    storage: dict[str, Path] = field(default_factory=dict)
    os_user: str = DEFAULT_OS_USER
    allow_settings: set[str] = field(default_factory=set)
    allow_shell_scripts: bool = False
    # Workload SQL (pgbench -i, setup SQL, scripts) as the superuser instead of the
    # non-superuser role that owns the benchmark database; only this config can allow it.
    allow_superuser_sql: bool = False
    # Job programs run in a sandbox (agents/sandbox.py); only this config can turn it off.
    sandbox: bool = True
    # What one job's programs may use together (its cgroup, agents/cgroups.py): memory
    # (None: the host's RAM less an eighth, at least 1 GiB kept back), processes and
    # threads, CPUs (None: unlimited, a benchmark measures the host); and the size of
    # the sandbox's /tmp, which is memory.
    job_memory_mb: int | None = None
    job_pids: int | None = DEFAULT_JOB_PIDS
    job_cpus: float | None = None
    job_tmp_mb: int = DEFAULT_JOB_TMP_MB
    # Source builds run the source's own configure and make scripts: only when allowed,
    # and only from these URL prefixes, directories and git repositories.
    allow_source_builds: bool = False
    build_sources: list[str] = field(default_factory=list)
    # Patches from the lab are code (a patch may edit configure or a Makefile): applied
    # only when the operator accepts that here; without it a job with patches is refused.
    allow_user_patches: bool = False
    # The CPU-profile pass runs perf as this agent against the job's own server processes,
    # with a fixed command line (agents/observe/cpu_profile.py); off here, jobs get no CPU
    # profile. A config file may still name it by its former name, `allow_profiling`.
    allow_cpu_profiling: bool = True
    redis_url: str = field(default_factory=default_redis_url)
    # The address other agents reach this host's clusters at (a run with a client host).
    advertise_address: str = "127.0.0.1"
    # How long the halves of a run with a client host wait out a Redis outage before the
    # run fails as `redis_lost` (agents/pair/link.py): the lab's AGENT_LOST_GRACE_S default,
    # the outage a run without a client host survives.
    redis_grace_s: float = 90.0

    @property
    def cache_dir(self) -> Path:
        return self.state_dir / "cache"

    @property
    def spool_dir(self) -> Path:
        return self.state_dir / "spool"

    @property
    def job_tmp_bytes(self) -> int:
        return self.job_tmp_mb * 1024 * 1024

    def storage_targets(self) -> dict[str, Path]:
        """Configured targets, plus `default` under the state directory when none is named so."""
        targets = dict(self.storage)
        targets.setdefault("default", self.state_dir / "storage" / "default")
        return targets

    @classmethod
    def load(cls, path: Path | None = None, **overrides: object) -> "AgentConfig":
        """Read a JSON config file (if given) and apply non-empty overrides from flags."""
        values: dict[str, Any] = {}
        if path is not None:
            values = json.loads(Path(path).read_text())
        for former, name in FORMER_KEYS.items():
            if former in values:
                values.setdefault(name, values.pop(former))
        values.update({k: v for k, v in overrides.items() if v not in (None, {}, set(), [])})
        if "state_dir" in values:
            values["state_dir"] = Path(values["state_dir"])
        values["storage"] = {k: Path(v) for k, v in values.get("storage", {}).items()}
        values["allow_settings"] = set(values.get("allow_settings", ()))
        values["build_sources"] = [str(source) for source in values.get("build_sources", ())]
        unknown = set(values) - set(cls.__dataclass_fields__)
        if unknown:
            raise ValueError(f"unknown agent config keys: {', '.join(sorted(unknown))}")
        return cls(**values)
