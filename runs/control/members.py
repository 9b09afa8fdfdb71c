"""Members of the control consumer group that are gone for good.

Each control worker joins the group under a name of its own (host and pid),
so every restart leaves the old name behind. A member idle for longer than
DEAD_AFTER_MS (a live one reads every second) that owns no pending entry
(the consumer reclaims those after a minute) is removed (XGROUP DELCONSUMER),
checked and removed in one script so no entry it might own meanwhile is lost.

A member named for a process of this host that no longer runs (a worker
killed with what it had read still pending) hands its pending entries to the
caller at once (`claim_from_dead_here`): they are stored seconds after the
restart instead of a minute later, before the run they belong to ends.
"""

import logging
import socket
from typing import Any

import psutil
import redis

logger = logging.getLogger(__name__)

DEAD_AFTER_MS = 10 * 60 * 1000
# Remove the consumer only when it owns no pending entry: -1 when it does.
REMOVE_IF_IDLE_SCRIPT = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then
  return -1
end
return redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
"""


def remove_dead_consumers(
    client: redis.Redis, stream: str, group: str, keep: str, idle_ms: int = DEAD_AFTER_MS
) -> list[str]:
    """Remove the group's members other than `keep` idle for over `idle_ms` with nothing
    pending; return their names."""
    removed = []
    members: Any = client.xinfo_consumers(stream, group)
    for member in members:
        name = _text(member["name"])
        if name == keep or member["pending"] or member["idle"] < idle_ms:
            continue
        if client.eval(REMOVE_IF_IDLE_SCRIPT, 1, stream, group, name) == -1:
            continue
        logger.info(
            "removed consumer %s from group %s: idle for %d s", name, group, member["idle"] // 1000
        )
        removed.append(name)
    return removed


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def claim_from_dead_here(client: redis.Redis, stream: str, group: str, claimer: str) -> int:
    """Claim for `claimer` the pending entries of members named for a process of this host
    (`host-pid`) that no longer runs; return how many were claimed."""
    claimed = 0
    members: Any = client.xinfo_consumers(stream, group)
    for member in members:
        name = _text(member["name"])
        if name == claimer or not member["pending"] or not _gone_from_here(name):
            continue
        pending: Any = client.xpending_range(stream, group, "-", "+", member["pending"], name)
        ids = [entry["message_id"] for entry in pending]
        if ids:
            client.xclaim(stream, group, claimer, 0, ids, justid=True)
            claimed += len(ids)
            logger.info("claimed %d pending events of %s, whose process is gone", len(ids), name)
    return claimed


def _gone_from_here(name: str) -> bool:
    """`name` is `host-pid` for this host and a pid that no longer runs."""
    host, _dash, pid = name.rpartition("-")
    return host == socket.gethostname() and pid.isdigit() and not psutil.pid_exists(int(pid))
