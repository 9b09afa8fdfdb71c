"""The sandbox every job program runs in: PostgreSQL, pgbench and source builds.

Lab users send text that these programs execute one way or another (a pgbench
script's meta-commands, setup SQL run by the server, a patch's Makefile), so
what those programs may touch is decided here and not by filters on that text.
Each program runs as the agent's unprivileged OS user (agents.postgres.osuser)
inside bubblewrap (Debian's `bubblewrap`), which builds a fresh mount namespace
from an allow-list:

- the system's programs and libraries (`/usr`, `/etc`, `/sys`), read-only;
- the PostgreSQL install the job uses, read-only;
- the directories of this job that the program needs, writable;
- a private `/tmp` (a tmpfs capped at the agent's `job_tmp_mb`: it is memory), `/dev`
  and `/proc`; nothing else: not the agent's state (identity, secret, spool, cache of
  other installs), not other jobs' clusters, not the lab's files, not any home
  directory.

Each program also gets a process id namespace of its own: its `/proc` lists only
the program and what it started, so it can neither read another process's
command line nor name (signal) another job's server or pgbench, even though
every job runs as the same OS user. The agent, outside, still sees the
program's real pid: for a program started `as_init` (pgbench) the program is
the namespace's init, the direct child of the bubblewrap process the agent
waits for (its CPU time reaches the agent's wait4 exactly, and whatever it left
running dies with it); otherwise (the server, builds, initdb) bubblewrap's own
init reaps what the program leaves and the program is that init's child, pid 2
inside, found by its NSpid. What a program leaves running after it ends is
killed with the job's cgroup (agents/cgroups.py).

Without `network` the program also gets a network namespace of its own (only
a loopback of its own): it cannot reach the lab's Redis or database, or
anything else; pgbench reaches a local server through its Unix socket, which
is a file. A server that a client host connects to, and pgbench on a client
host, keep the host's network (docs/decisions.md, "Threat model").

The namespaces come from an unprivileged user namespace, so bubblewrap needs
no setuid bit (bubblewrap reports its child's pid on an info pipe). An operator
who cannot use bubblewrap on a host turns the sandbox off in that agent's
local config (`sandbox: false`), accepting that jobs reach what the OS user can.
"""

import functools
import json
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import psutil

from agents.contract.errors import JobError

BWRAP = "bwrap"
# The system's read-only part: programs, libraries, configuration (nss, locales,
# the dynamic linker's cache), and /sys for CPU topology.
SYSTEM_DIRECTORIES = ("/usr", "/etc", "/sys")
# Top-level names that merged-/usr systems make symlinks into /usr.
SYSTEM_LINKS = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
SANDBOX_HOME = "/tmp"
DEFAULT_TMP_BYTES = 256 * 1024 * 1024
# The program started by bubblewrap's init is the first process of its namespace after it.
PROGRAM_NAMESPACE_PID = 2
# How long bubblewrap may take to build the sandbox and fork the program.
PROGRAM_START_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class View:
    """What one sandboxed program sees besides the system's read-only part."""

    read_only: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    network: bool = False

    def plus(
        self,
        read_only: Sequence[Path] = (),
        writable: Sequence[Path] = (),
        network: bool = False,
    ) -> "View":
        """This view with more paths, and the network when either asks for it."""
        return View(
            self.read_only + tuple(read_only),
            self.writable + tuple(writable),
            self.network or network,
        )


@dataclass(frozen=True)
class Started:
    """A sandboxed program: the process the agent waits for, and the program's own pid."""

    process: "subprocess.Popen[Any]"
    pid: int


@dataclass(frozen=True)
class Sandbox:
    """How job programs are wrapped: bubblewrap with a view, or (operator's choice) not at all."""

    enabled: bool = True
    tmp_bytes: int = DEFAULT_TMP_BYTES
    system_directories: tuple[str, ...] = field(default=SYSTEM_DIRECTORIES)

    def command(
        self,
        argv: Sequence[str],
        view: View,
        cwd: Path,
        info_fd: int | None = None,
        launcher: Sequence[str] = (),
        as_init: bool = False,
    ) -> list[str]:
        """`argv` run inside the sandbox with `view`, starting in `cwd`.

        `launcher` comes first, outside the sandbox (the job's cgroup and user switch,
        agents/postgres/osuser.py); `as_init` makes the program its namespace's init.
        """
        if not self.enabled:
            return [*launcher, *argv]
        wrapper = [
            *launcher, require_bwrap(), "--unshare-ipc", "--unshare-uts", "--unshare-pid",
            "--cap-drop", "ALL",
        ]  # fmt: skip
        if as_init:
            wrapper.append("--as-pid-1")
        if not view.network:
            wrapper.append("--unshare-net")
        for directory in self.system_directories:
            wrapper += ["--ro-bind", directory, directory]
        for link in SYSTEM_LINKS:
            wrapper += _system_link(link)
        wrapper += ["--dev", "/dev", "--proc", "/proc"]
        wrapper += ["--size", str(self.tmp_bytes), "--tmpfs", "/tmp"]
        for path in _distinct(view.read_only):
            wrapper += ["--ro-bind", str(path), str(path)]
        for path in _distinct(view.writable):
            wrapper += ["--bind", str(path), str(path)]
        wrapper += ["--setenv", "HOME", SANDBOX_HOME, "--chdir", str(cwd)]
        if info_fd is not None:
            wrapper += ["--info-fd", str(info_fd)]
        return [*wrapper, "--", *argv]

    def start(
        self,
        argv: Sequence[str],
        view: View,
        cwd: Path,
        launcher: Sequence[str] = (),
        as_init: bool = False,
        **popen_kwargs: Any,
    ) -> Started:
        """Popen `argv` in the sandbox; the pid returned is the program's (as the agent
        sees it), not bubblewrap's."""
        if not self.enabled:
            process = subprocess.Popen([*launcher, *argv], cwd=cwd, **popen_kwargs)
            return Started(process, process.pid)
        read_end, write_end = os.pipe()
        with os.fdopen(read_end, "rb") as info:
            try:
                process = subprocess.Popen(
                    self.command(argv, view, cwd, write_end, launcher, as_init),
                    cwd=cwd,
                    pass_fds=(write_end,),
                    **popen_kwargs,
                )
            finally:
                os.close(write_end)
            pid = _child_pid(info)
        if pid is not None and not as_init:
            pid = _program_pid(pid, process)
        return Started(process, pid if pid is not None else process.pid)


def _child_pid(info: IO[bytes]) -> int | None:
    """The program's pid from bubblewrap's info pipe; None when bubblewrap failed before it."""
    text = info.read()
    if not text:
        return None
    pid = json.loads(text).get("child-pid")
    return int(pid) if pid is not None else None


def _program_pid(init_pid: int, process: "subprocess.Popen[Any]") -> int | None:
    """The pid of the program bubblewrap's init (`init_pid`) starts: the init's child that
    is pid 2 in their namespace. None when the sandbox ended before it started."""
    deadline = time.monotonic() + PROGRAM_START_TIMEOUT_S
    while time.monotonic() < deadline and process.poll() is None:
        try:
            children = psutil.Process(init_pid).children()
        except psutil.NoSuchProcess:
            return None
        for child in children:
            if _namespace_pid(child.pid) == PROGRAM_NAMESPACE_PID:
                return child.pid
        time.sleep(0.002)
    return None


def _namespace_pid(pid: int) -> int | None:
    """`pid`'s pid in its innermost namespace (the last NSpid field), None once it exited."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return None
    for line in status.splitlines():
        if line.startswith("NSpid:"):
            return int(line.split()[-1])
    return None


def _system_link(path: str) -> list[str]:
    if os.path.islink(path):
        return ["--symlink", os.readlink(path), path]
    if os.path.isdir(path):
        return ["--ro-bind", path, path]
    return []


def _distinct(paths: Sequence[Path]) -> list[Path]:
    """Each path once, in order (bubblewrap binds existing paths: a missing one fails it)."""
    seen: list[Path] = []
    for path in paths:
        if path not in seen:
            seen.append(path)
    return seen


@functools.cache
def require_bwrap() -> str:
    """bubblewrap's path, once it has shown it can build a sandbox on this host."""
    path = shutil.which(BWRAP)
    if path is None:
        raise JobError(
            "sandbox_unavailable",
            "bubblewrap is not installed on this benchmark host, and every job runs in its "
            "sandbox: install it (apt-get install bubblewrap), or turn the sandbox off in the "
            "agent's local config (--no-sandbox) to let jobs reach what its OS user can",
        )
    return path
