"""The unprivileged OS user that owns a job's files and runs its programs, and its sandbox.

initdb and postgres refuse to run as root, so an agent running as root creates
a system user (once) and starts every job program (PostgreSQL, pgbench, a
source build) as that user, inside the sandbox of agents.sandbox: no su or
sudo. Outside a job (a cluster of the tests, a local build) the switch is
subprocess's `user=`/`group=`/`extra_groups=` parameters. Within a job, the
program must first enter the job's cgroup (agents/cgroups.py) as root, which
subprocess's hooks run too late for (`preexec_fn` runs after the switch): the
cgroup's launcher writes the process into the cgroup, then `setpriv` drops to
the user and execs the sandbox. That user owns a job's directories while the
job runs and nothing else: binaries, the agent's state and the lab's files
belong to others. An agent running as an ordinary user runs everything as
itself, in the same sandbox (and in a cgroup delegated to it, if any).
"""

import dataclasses
import logging
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NotRequired, TypedDict

from agents.cgroups import JobCgroup
from agents.contract.errors import JobError
from agents.cpusets import CpuSet
from agents.sandbox import DEFAULT_TMP_BYTES, Sandbox, Started, View

logger = logging.getLogger(__name__)

SAFE_PATH = "/usr/local/bin:/usr/bin:/bin"


class SubprocessKwargs(TypedDict):
    """subprocess.run/Popen keyword arguments: the environment, and the user to switch to."""

    env: dict[str, str]
    user: NotRequired[int]
    group: NotRequired[int]
    extra_groups: NotRequired[list[int]]


@dataclass(frozen=True)
class OsUser:
    """Who runs a job's programs for the agent, and the sandbox they run in."""

    name: str
    uid: int
    gid: int
    home: Path
    sandbox: Sandbox = Sandbox()
    # The job's cgroup its programs enter; None outside a job.
    cgroup: JobCgroup | None = None
    # The CPUs its programs run on (a side of a duet, agents/cpusets.py); None: any.
    cpuset: CpuSet | None = None

    @property
    def is_current(self) -> bool:
        """True when the agent itself runs as this user (no switch needed)."""
        return self.uid == os.geteuid()

    def env(self, **extra: str) -> dict[str, str]:
        """A minimal environment for this user's programs: nothing inherited but the locale."""
        env = {"HOME": str(self.home), "USER": self.name, "LOGNAME": self.name, "PATH": SAFE_PATH}
        env["LANG"] = "C.UTF-8"
        env.update(extra)
        return env

    def in_cgroup(self, cgroup: JobCgroup | None) -> "OsUser":
        """This user, its programs entering `cgroup` (a job's) before they run."""
        return dataclasses.replace(self, cgroup=cgroup)

    def on_cpus(self, cpuset: CpuSet | None) -> "OsUser":
        """This user, its programs confined to `cpuset` (None: any CPU)."""
        return dataclasses.replace(self, cpuset=cpuset)

    def subprocess_kwargs(self, **extra_env: str) -> "SubprocessKwargs":
        """Keyword arguments for subprocess.run/Popen that run a program as this user."""
        env = self.env(**extra_env)
        if self.is_current or self.cgroup is not None:
            return {"env": env}
        return {"env": env, "user": self.uid, "group": self.gid, "extra_groups": []}

    def launcher(self) -> list[str]:
        """What runs before the sandbox: entering the job's cgroup (and cpuset), taking its
        CPUs, then becoming this user."""
        pinned = self.cpuset.launcher() if self.cpuset is not None else []
        if self.cgroup is None:
            return pinned
        switch = [] if self.is_current else [
            "setpriv", f"--reuid={self.uid}", f"--regid={self.gid}", "--clear-groups", "--",
        ]  # fmt: skip
        cpuset_procs = self.cpuset.procs if self.cpuset is not None else None
        entered = self.cgroup.launcher(also=(cpuset_procs,) if cpuset_procs else ())
        return [*entered, *pinned, *switch]

    def command(self, argv: list[str], view: View, cwd: Path) -> list[str]:
        """`argv` wrapped in this user's sandbox with `view` (run it with subprocess_kwargs)."""
        return self.sandbox.command(argv, view, cwd, launcher=self.launcher())

    def start(
        self, argv: list[str], view: View, cwd: Path, as_init: bool = False, **popen_kwargs: Any
    ) -> Started:
        """Popen `argv` as this user in its sandbox; `popen_kwargs` may carry `env`.

        `as_init`: the program is its namespace's init (agents/sandbox.py)."""
        env = popen_kwargs.pop("env", None) or {}
        return self.sandbox.start(
            argv,
            view,
            cwd,
            self.launcher(),
            as_init,
            **self.subprocess_kwargs(**env),
            **popen_kwargs,
        )


def _from_passwd(entry: pwd.struct_passwd, sandbox: Sandbox) -> OsUser:
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir), sandbox)


def ensure_os_user(name: str, sandboxed: bool = True, tmp_bytes: int = DEFAULT_TMP_BYTES) -> OsUser:
    """The job's OS user: `name` (created if missing) as root, else the current user.

    `sandboxed=False` (only the agent's local config says so) runs its programs
    without the sandbox; `tmp_bytes` caps the sandbox's `/tmp`.
    """
    sandbox = Sandbox(enabled=sandboxed, tmp_bytes=tmp_bytes)
    if os.geteuid() != 0:
        return _from_passwd(pwd.getpwuid(os.geteuid()), sandbox)
    try:
        return _from_passwd(pwd.getpwnam(name), sandbox)
    except KeyError:
        pass
    logger.info("creating system user %s for PostgreSQL", name)
    result = subprocess.run(
        ["useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    try:
        return _from_passwd(pwd.getpwnam(name), sandbox)
    except KeyError:
        # Another agent process may have created it at the same moment; only a user
        # that still does not exist is a failure.
        raise JobError(
            "internal_error", f"could not create OS user {name}: {result.stderr.strip()}"
        ) from None


def check_sandbox(user: OsUser) -> None:
    """Run `true` in an empty sandbox as `user`; a clear JobError when that fails.

    The worker calls this when it starts, so a host where bubblewrap cannot
    build a sandbox (no user namespaces) is found before a job is taken.
    """
    if not user.sandbox.enabled:
        return
    argv = user.command(["true"], View(), Path("/"))
    result = subprocess.run(
        argv, capture_output=True, text=True, timeout=60, **user.subprocess_kwargs()
    )
    if result.returncode != 0:
        raise JobError(
            "sandbox_unavailable",
            f"bubblewrap could not build a sandbox on this host ({result.stderr.strip()}): "
            "allow unprivileged user namespaces (sysctl user.max_user_namespaces, "
            "kernel.apparmor_restrict_unprivileged_userns), or turn the sandbox off in the "
            "agent's local config (--no-sandbox)",
        )


def chown_tree(path: Path, user: OsUser) -> None:
    """Give `path` and everything below it (not following symlinks) to `user`."""
    if user.is_current:
        return
    os.chown(path, user.uid, user.gid, follow_symlinks=False)
    for directory, subdirs, files in os.walk(path):
        for name in subdirs + files:
            os.chown(Path(directory) / name, user.uid, user.gid, follow_symlinks=False)


def make_dirs(path: Path) -> None:
    """Create `path` and missing parents as 0755, so the PostgreSQL OS user can traverse them."""
    missing = []
    for directory in [path, *path.parents]:
        if directory.exists():
            break
        missing.append(directory)
    for directory in reversed(missing):
        directory.mkdir(exist_ok=True)
        directory.chmod(0o755)
