"""The Redis transport the agent's Celery worker consumes its queue with.

kombu's Redis transport refreshes the expiry of expiring queues' bindings on a timer of
one second it registers on the worker's event loop, whatever the queues: the loop wakes
every second also while a job measures (about 0.2 ms of the agent's CPU a wake: the loop
took 1.5 of the agent's 16 ms in a 5 s window, docs/benchmarks.md). The agent's queue
never expires, so the refresh finds nothing to do; here it runs every BINDING_REFRESH_S
instead (kombu's own period for its other timers of this kind, restoring unacknowledged
messages and re-authenticating), and the loop sleeps until a timer, a job's end (the
pool wakes it) or the BRPOP's answer (`polling_interval`, agents/worker/celery_worker.py):
an idle worker's loop woke 1.27 times a second, now 0.47 (tests/agents/worker/test_worker.py).

Only for `redis://` URLs: kombu gives `rediss://` its TLS defaults by the scheme's name,
so a TLS broker keeps kombu's own transport and its one-second timer.
"""

from typing import Any
from urllib.parse import urlsplit

from kombu.asynchronous import Hub
from kombu.transport import redis as kombu_redis

BINDING_REFRESH_S = 10.0
# How Celery's `broker_transport` setting names the class below.
AGENT_TRANSPORT = f"{__name__}:AgentRedisTransport"


class AgentRedisTransport(kombu_redis.Transport):
    """kombu's Redis transport with its bindings' expiry refreshed every BINDING_REFRESH_S."""

    def register_with_event_loop(self, connection: Any, loop: Hub) -> None:
        super().register_with_event_loop(connection, loop)
        cycle: Any = self.cycle  # kombu's MultiChannelPoller, its timers set by the call above
        # Registered again on every (re)connection: kombu cancels the entry held here first.
        cycle._binding_expiry_tref.cancel()
        cycle._binding_expiry_tref = loop.call_repeatedly(
            BINDING_REFRESH_S, cycle.maybe_refresh_binding_expiry
        )


def broker_transport(redis_url: str) -> str | None:
    """The transport for Celery's `broker_transport` setting, None for kombu's choice by the
    URL's scheme."""
    return AGENT_TRANSPORT if urlsplit(redis_url).scheme == "redis" else None
