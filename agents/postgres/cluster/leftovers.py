"""Clusters left behind by an agent that was killed mid-job, and their removal."""

import logging
from pathlib import Path

from agents.markers import ClusterMarker
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.osuser import OsUser

logger = logging.getLogger(__name__)


def remove_leftover_clusters(storage: dict[str, Path], os_user: OsUser) -> list[str]:
    """Remove clusters whose creating process is gone; return their job ids.

    An agent killed mid-job (SIGKILL, power loss) leaves its cluster's server
    running and its directories on disk. The worker calls this when it starts,
    before it takes a job: every `benchlab-<job>` directory whose marker names
    that job and a process that no longer runs is destroyed as its own Cluster
    would (servers killed by their working directory, WAL directory on any
    target removed). Clusters of a live process (another agent, a local `run`
    sharing the directory) and directories without a matching marker are left alone.
    """
    parents = sorted({Path(path) for path in storage.values() if Path(path).is_dir()})
    removed = []
    for parent in parents:
        for job_dir in sorted(parent.glob("benchlab-*")):
            marker = ClusterMarker.read(job_dir) if job_dir.is_dir() else None
            if marker is None or job_dir.name != f"benchlab-{marker.job_id}":
                continue
            if marker.owner_alive():
                logger.info(
                    "leaving %s: process %s that created it runs", job_dir, marker.owner_pid
                )
                continue
            job_id = marker.job_id
            wal_parent = next((p for p in parents if (p / f"benchlab-{job_id}-wal").is_dir()), None)
            logger.warning(
                "removing cluster %s: process %s that created it is gone", job_dir, marker.owner_pid
            )
            Cluster(None, os_user, parent, wal_parent, job_id).destroy()
            removed.append(job_id)
    return removed
