"""What an agent's local config lets its jobs do, and how an operator turns each on.

The agent reports these at registration (`agent_register`'s `allows`) so the lab
can refuse an experiment at review instead of queuing runs the agent refuses; both
halves word the fix the same way: the `scripts/lab` variable for the lab's own
local agent, the `python -m agents worker` option and config key for any other.
"""

import posixpath
from dataclasses import dataclass
from typing import TypedDict


class HostAllows(TypedDict):
    """The agent's local config, as far as it decides which jobs the host accepts."""

    allow_source_builds: bool
    build_sources: list[str]
    allow_user_patches: bool
    allow_shell_scripts: bool
    allow_superuser_sql: bool
    # Job programs in bubblewrap; a host without cgroups refuses lab code only when on.
    sandbox: bool


@dataclass(frozen=True)
class Switch:
    """One config key and the two ways of setting it."""

    key: str
    option: str
    lab_variable: str
    lab_value: str

    def how_to_enable(self) -> str:
        return (
            f"for the local agent of scripts/lab set {self.lab_variable}={self.lab_value}; "
            f"for another agent start `python -m agents worker` with {self.option} "
            f"(config key {self.key})"
        )


SWITCHES = {
    switch.key: switch
    for switch in (
        Switch("allow_user_patches", "--allow-user-patches", "BENCHLAB_AGENT_ALLOW_PATCHES", "1"),
        Switch(
            "allow_shell_scripts",
            "--allow-shell-scripts",
            "BENCHLAB_AGENT_ALLOW_SHELL_SCRIPTS",
            "1",
        ),
        Switch(
            "allow_superuser_sql",
            "--allow-superuser-sql",
            "BENCHLAB_AGENT_ALLOW_SUPERUSER_SQL",
            "1",
        ),
    )
}


def how_to_enable(key: str) -> str:
    """The fix for a refused job needing config key `key`, in both forms."""
    return SWITCHES[key].how_to_enable()


def how_to_allow_source(location: str) -> str:
    """The fix for a source build from `location` an agent does not allow."""
    return (
        f"for the local agent of scripts/lab add it to BENCHLAB_AGENT_BUILD_SOURCES "
        f"(BENCHLAB_AGENT_BUILD_SOURCES='{location}'); for another agent start "
        f"`python -m agents worker` with --allow-source-builds --build-source {location} "
        "(config keys allow_source_builds and build_sources)"
    )


def source_allowed(kind: str, location: str, allowed: str) -> bool:
    """Whether a build source (`kind`, `location`) falls under one entry of build_sources.

    A directory must lie under an allowed absolute directory, an upload needs
    `upload`, a git repository must be named exactly, and a URL must start with
    an allowed prefix without climbing out of it with "..".
    """
    if kind == "path":
        directory = posixpath.normpath(allowed)
        resolved = posixpath.normpath(location)
        return allowed.startswith("/") and (
            resolved == directory or resolved.startswith(directory.rstrip("/") + "/")
        )
    if kind == "upload":
        return allowed == "upload"
    if kind == "git":
        return location == allowed
    return "://" in allowed and location.startswith(allowed) and "/.." not in location
