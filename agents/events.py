"""Emitting events (their types and validation: agents.contract.reports.events).

The runner calls `EventEmitter.emit(type, data)`; every sink gets the same
numbered document. Sinks are plain callables: the CLI prints, the worker
publishes to a Redis Stream.
"""

import json
import logging
import threading
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any, TextIO

from agents.contract.reports.events import (
    EVENT_TYPES,
    EVENT_VERSION,
    FORMER_EVENT_TYPES,
    InvalidEvent,
)

logger = logging.getLogger(__name__)

Sink = Callable[[dict[str, Any]], None]


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

    def emit(self, event_type: str, data: Mapping[str, Any]) -> dict[str, Any]:
        """Build the next event and deliver it; thread-safe (samplers emit from their threads)."""
        with self._lock:
            self._seq += 1
            return self._deliver(event_type, data, self._seq, now_iso())

    def resend(self, event_type: str, data: Mapping[str, Any], seq: int, ts: str) -> dict[str, Any]:
        """Deliver an event emitted before (kept by the agent's ledger) with its own seq and
        time, under this emitter's run, token and agent; the numbering goes on unchanged."""
        with self._lock:
            return self._deliver(event_type, data, seq, ts)

    def _deliver(
        self, event_type: str, data: Mapping[str, Any], seq: int, ts: str
    ) -> dict[str, Any]:
        # A ledger kept before an upgrade may hold an event type under its former name.
        event_type = FORMER_EVENT_TYPES.get(event_type, event_type)
        if event_type not in EVENT_TYPES:
            raise InvalidEvent(f"unknown event type {event_type!r}")
        event = {
            "version": EVENT_VERSION,
            "run_id": self.run_id,
            "token": self.token,
            "agent": self.agent,
            "seq": seq,
            "ts": ts,
            "type": event_type,
            "data": data,
        }
        for sink in self.sinks:
            sink(event)
        return event


def json_lines_sink(stream: TextIO) -> Sink:
    """A sink writing each event as one JSON line (the CLI's --json-events)."""

    def write(event: dict[str, Any]) -> None:
        stream.write(json.dumps(event, separators=(",", ":")) + "\n")
        stream.flush()

    return write
