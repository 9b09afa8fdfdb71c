"""Events: the agent's running commentary on a job (docs/contracts.md, section 2).

The runner calls `EventEmitter.emit(type, data)`; every sink gets the same
numbered document. Sinks are plain callables: the CLI prints, the worker
publishes to a Redis Stream.
"""

import json
import logging
import threading
from collections.abc import Callable
from datetime import UTC, datetime

logger = logging.getLogger(__name__)

EVENT_VERSION = 1
RUN_EVENT_TYPES = {"status", "step", "progress", "sample", "point", "log", "result"}
AGENT_EVENT_TYPES = {"agent_register", "heartbeat"}
EVENT_TYPES = RUN_EVENT_TYPES | AGENT_EVENT_TYPES

Sink = Callable[[dict], None]


class InvalidEvent(ValueError):
    """An event document that does not follow the contract."""


def now_iso() -> str:
    return datetime.now(UTC).isoformat()


class EventEmitter:
    """Numbers the events of one run and hands each to every sink."""

    def __init__(
        self,
        sinks: list[Sink],
        run_id: str | None = None,
        token: str | None = None,
        agent: str | None = None,
        first_seq: int = 1,
    ):
        self.sinks = list(sinks)
        self.run_id = run_id
        self.token = token
        self.agent = agent
        self._seq = first_seq - 1
        self._lock = threading.Lock()

    def emit(self, event_type: str, data: dict) -> dict:
        """Build the next event and deliver it; thread-safe (samplers emit from their threads)."""
        if event_type not in EVENT_TYPES:
            raise InvalidEvent(f"unknown event type {event_type!r}")
        with self._lock:
            self._seq += 1
            event = {
                "version": EVENT_VERSION,
                "run_id": self.run_id,
                "token": self.token,
                "agent": self.agent,
                "seq": self._seq,
                "ts": now_iso(),
                "type": event_type,
                "data": data,
            }
            for sink in self.sinks:
                sink(event)
        return event


def validate_event(event: dict) -> dict:
    """Check the envelope of an event received from elsewhere; return it unchanged."""
    if not isinstance(event, dict):
        raise InvalidEvent("an event must be a JSON object")
    if event.get("version") != EVENT_VERSION:
        raise InvalidEvent(f"unsupported event version {event.get('version')!r}")
    event_type = event.get("type")
    if event_type not in EVENT_TYPES:
        raise InvalidEvent(f"unknown event type {event_type!r}")
    if not isinstance(event.get("seq"), int) or event["seq"] < 1:
        raise InvalidEvent("seq must be a positive integer")
    if event_type in RUN_EVENT_TYPES and not event.get("run_id"):
        raise InvalidEvent(f"a {event_type} event needs a run_id")
    if event_type in AGENT_EVENT_TYPES and not event.get("agent"):
        raise InvalidEvent(f"a {event_type} event needs an agent name")
    if not isinstance(event.get("data"), dict):
        raise InvalidEvent("data must be a JSON object")
    return event


def json_lines_sink(stream) -> Sink:
    """A sink writing each event as one JSON line (the CLI's --json-events)."""

    def write(event: dict) -> None:
        stream.write(json.dumps(event, separators=(",", ":")) + "\n")
        stream.flush()

    return write
