"""The unprivileged OS user that owns PostgreSQL's files and processes.

initdb and postgres refuse to run as root, so an agent running as root creates
a system user (once) and starts every PostgreSQL program as that user, through
subprocess's `user=`/`group=`/`extra_groups=` parameters: no shell, no su or
sudo. An agent running as an ordinary user runs everything as itself.
"""

import logging
import os
import pwd
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import NotRequired, TypedDict

from agents.contract.errors import JobError

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
    """Who runs PostgreSQL programs for the agent."""

    name: str
    uid: int
    gid: int
    home: Path

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

    def subprocess_kwargs(self, **extra_env: str) -> "SubprocessKwargs":
        """Keyword arguments for subprocess.run/Popen that run a program as this user."""
        env = self.env(**extra_env)
        if self.is_current:
            return {"env": env}
        return {"env": env, "user": self.uid, "group": self.gid, "extra_groups": []}


def _from_passwd(entry: pwd.struct_passwd) -> OsUser:
    return OsUser(entry.pw_name, entry.pw_uid, entry.pw_gid, Path(entry.pw_dir))


def ensure_os_user(name: str) -> OsUser:
    """The OS user for PostgreSQL: `name` (created if missing) as root, else the current user."""
    if os.geteuid() != 0:
        return _from_passwd(pwd.getpwuid(os.geteuid()))
    try:
        return _from_passwd(pwd.getpwnam(name))
    except KeyError:
        pass
    logger.info("creating system user %s for PostgreSQL", name)
    result = subprocess.run(
        ["useradd", "--system", "--create-home", "--shell", "/usr/sbin/nologin", name],
        capture_output=True,
        text=True,
    )
    try:
        return _from_passwd(pwd.getpwnam(name))
    except KeyError:
        # Another agent process may have created it at the same moment; only a user
        # that still does not exist is a failure.
        raise JobError(
            "internal_error", f"could not create OS user {name}: {result.stderr.strip()}"
        ) from None


def chown_tree(path: Path, user: OsUser) -> None:
    """Give `path` and everything below it (not following symlinks) to `user`."""
    if user.is_current:
        return
    os.chown(path, user.uid, user.gid, follow_symlinks=False)
    for directory, subdirs, files in os.walk(path):
        for name in subdirs + files:
            os.chown(Path(directory) / name, user.uid, user.gid, follow_symlinks=False)
