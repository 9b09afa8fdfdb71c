"""Free space on the hosts' storage targets: stored as agents report it, checked when an
experiment is scheduled or started.

Agents report total and free bytes per target at registration (their facts) and in
heartbeats (once a minute, and when a job starts or ends). `Host.storage_space`
keeps the latest: `{target: {"total_bytes", "free_bytes", "at"}}`. A cell whose
dataset cannot fit (agents/contract/spec/space.py's estimate, margin included) is
refused with `insufficient_space`; where no figure was reported yet, it is not.
"""

import logging
from collections.abc import Iterable, Mapping
from typing import Any

from django.utils import timezone

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec
from agents.contract.spec.space import megabytes, space_needed
from runs.models import Host

logger = logging.getLogger(__name__)

NO_FIGURE_NOTE = (
    "host {host} has reported no free space for storage target “{target}” yet: "
    "whether the dataset fits was not checked"
)


def stamped_space(reported: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """What an agent reported per target, as stored: its two figures and the time now.
    Anything that is not a target's figures is left out."""
    now = timezone.now().isoformat()
    stored = {}
    for name, figures in reported.items():
        if not isinstance(figures, Mapping):
            continue
        stored[str(name)] = {
            "total_bytes": _bytes(figures.get("total_bytes")),
            "free_bytes": _bytes(figures.get("free_bytes")),
            "at": now,
        }
    return stored


def _bytes(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def registered_space(facts: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The space in a registration's facts (`facts.storage.<target>`)."""
    storage = facts.get("storage")
    return stamped_space(storage) if isinstance(storage, Mapping) else {}


def host_record_space(host_pk: int, reported: object) -> None:
    """Store a heartbeat's `space` (when it has one) as the host's latest."""
    if isinstance(reported, Mapping) and reported:
        Host.objects.filter(pk=host_pk).update(storage_space=stamped_space(reported))


def require_room(cells: Iterable[tuple[Host, JobSpec]]) -> list[str]:
    """Refuse the first cell whose dataset its target cannot hold; notes for unknown space.

    Raises JobError `insufficient_space` naming the storage field, the host and
    target, the space needed and the space free.
    """
    notes: set[str] = set()
    for host, spec in cells:
        for role, needed in space_needed(spec).items():
            target = spec["storage"][role]
            if target is None:
                continue
            free = (host.storage_space.get(target) or {}).get("free_bytes")
            if free is None:
                notes.add(NO_FIGURE_NOTE.format(host=host.name, target=target))
            elif needed > free:
                raise JobError(
                    "insufficient_space", _refusal(host, target, role, needed, free, spec),
                    field=f"storage.{role}",
                )  # fmt: skip
    for note in sorted(notes):
        logger.info("space check: %s", note)
    return sorted(notes)


def _refusal(host: Host, target: str, role: str, needed: int, free: int, spec: JobSpec) -> str:
    dataset = spec["dataset"]
    what = "its WAL" if role == "wal" else "the dataset"
    if role == "data" and spec["storage"]["wal"] in (None, target):
        what = "the dataset and its WAL"
    at = (host.storage_space.get(target) or {}).get("at") or "its last report"
    return (
        f"storage target “{target}” on host {host.name} has {megabytes(free)} free "
        f"(reported {at}), and {what} at scale {dataset['scale']}"
        f"{_fillfactor(dataset['fillfactor'])} needs about {megabytes(needed)} "
        "(estimate with a 20% margin): choose a smaller scale, or a target with more room"
    )


def _fillfactor(fillfactor: int | None) -> str:
    return f", fillfactor {fillfactor}" if fillfactor and fillfactor != 100 else ""
