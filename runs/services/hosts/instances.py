"""Two workers answering to one agent name, seen from the lab.

Each agent worker process draws an instance token at start (agents/worker/exclusive.py)
and sends it with its registration and heartbeats. A new token replacing the last one
is a restart; the replaced token speaking again means the old worker still runs beside
the new one: two workers share the name, read one ledger and take jobs from one queue.
The agent refuses to start a second worker of a name it can see (the lock and the
lease), so this is what remains when that failed (an agent older than the lease, a
lease lost in a long Redis outage): the hosts page and API show it as a conflict.
"""

import logging

from django.utils import timezone

from runs.models import Host

logger = logging.getLogger(__name__)


def host_note_instance(host: Host, instance: object) -> None:
    """Note the worker token an agent event carries on `host` (saved by the caller)."""
    if not isinstance(instance, str) or not instance or instance == host.instance:
        return
    if instance == host.previous_instance:
        host.twin_seen_at = timezone.now()
        logger.error(
            "agent %s: two workers answer to this name (instances %s and %s); stop one",
            host.name,
            host.instance,
            instance,
        )
    host.previous_instance, host.instance = host.instance, instance
