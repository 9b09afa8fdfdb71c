"""A job's storage: the agent's named targets its spec asks for, and what the result
document records of each (path, and the device, filesystem and mount options found)."""

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.reports.facts import Facts
from agents.contract.spec.document import StorageSpec


def resolve_storage(config: AgentConfig, wanted: StorageSpec) -> dict[str, Path]:
    """role ("data", "wal") -> the directory of the target the spec names for it."""
    targets = config.storage_targets()
    resolved: dict[str, Path] = {}
    for role in ("data", "wal"):
        name = wanted[role]
        if name is None:
            continue
        if name not in targets:
            raise JobError(
                "storage_unknown",
                f"this agent has no storage target {name!r}; it has "
                f"{', '.join(sorted(targets))} (add one with --storage {name}=PATH)",
                field=f"storage.{role}",
            )
        resolved[role] = targets[name]
    return resolved


def storage_records(
    storage: Mapping[str, Path], names: StorageSpec, facts: Facts | None
) -> dict[str, dict[str, Any]]:
    """role -> what the result document records of its target."""
    facts_storage: Mapping[str, Any] = facts["storage"] if facts else {}
    records: dict[str, dict[str, Any]] = {}
    for role, path in storage.items():
        detected: Mapping[str, Any] = facts_storage.get(role) or {}
        records[role] = {
            "name": names["data"] if role == "data" else names["wal"],
            "path": str(path),
            "device": detected.get("device"),
            "filesystem": detected.get("filesystem"),
            "mount_options": detected.get("mount_options"),
        }
    return records
