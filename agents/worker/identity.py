"""The agent's identity: its own secret, created once in its state directory.

`<state_dir>/identity/<name>.key` holds 64 hex digits (mode 0600, directory
0700: the OS user that runs PostgreSQL and the workload cannot read it). The
agent signs its events with it and checks the lab's jobs against it
(agents.contract.signing). The lab learns it from the agent's registrations,
and trusts it once an administrator approved the host after comparing the
fingerprint. A job signed with it proves the lab has it: the agent then
writes `<name>.confirmed` and stops sending the secret with its registrations.
"""

import logging
import os
import re
from dataclasses import dataclass
from pathlib import Path

from agents.contract.signing import fingerprint, is_secret, new_secret

logger = logging.getLogger(__name__)

AGENT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


class IdentityError(ValueError):
    """An identity file that cannot be used as it is."""


@dataclass(frozen=True)
class Identity:
    """One agent's name, secret and where they are kept."""

    name: str
    secret: str
    path: Path

    @property
    def fingerprint(self) -> str:
        return fingerprint(self.secret)

    @property
    def confirmed_path(self) -> Path:
        return self.path.with_suffix(".confirmed")

    @property
    def confirmed(self) -> bool:
        """Whether a job signed with this secret has arrived: the lab has it."""
        return self.confirmed_path.exists()

    def confirm(self) -> None:
        if not self.confirmed:
            self.confirmed_path.touch(mode=0o600)
            logger.info("agent %s: the lab knows this agent's secret", self.name)


def check_agent_name(name: str) -> str:
    """Agent names become queue and file names: letters, digits, `.`, `_`, `-`."""
    if not AGENT_NAME.fullmatch(name):
        raise IdentityError(
            f"agent name {name!r}: use 1 to 100 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


def identity_path(state_dir: Path, name: str) -> Path:
    return state_dir / "identity" / f"{check_agent_name(name)}.key"


def load_or_create_identity(state_dir: Path, name: str) -> Identity:
    """The agent's identity, created (and logged) on first use."""
    path = identity_path(state_dir, name)
    if not path.exists():
        try:
            _create(path)
        except FileExistsError:
            pass  # another process of this agent created it just now
        else:
            # A confirmation belongs to the secret it confirmed: a new secret is sent again.
            path.with_suffix(".confirmed").unlink(missing_ok=True)
            logger.warning("agent %s: new identity, fingerprint %s", name, fingerprint(_read(path)))
    return Identity(name, _read(path), path)


def _create(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.parent.chmod(0o700)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(new_secret() + "\n")
        file.flush()
        os.fsync(file.fileno())


def _read(path: Path) -> str:
    secret = path.read_text().strip()
    if not is_secret(secret):
        raise IdentityError(f"{path}: not an agent secret (64 hex digits); remove it to start anew")
    return secret
