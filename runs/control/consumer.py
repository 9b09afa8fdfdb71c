"""The control worker's event consumer (docs/contracts.md, section 4).

Reads the events stream (BENCHLAB_EVENTS_STREAM, by default the contract's
EVENTS_STREAM) as a member of the consumer group `control`, stores each batch
of entries in one transaction (the per-second events of many runs together,
runs.services.jobs.ingest) and acknowledges and deletes its entries only after the
commit; a batch that fails is stored again entry by entry, each in its own
transaction. Order of work in each round: this consumer's own pending entries
(left by a database error), then entries other consumers left pending for too
long (they died), then new entries.

- An event that is not from an approved agent or not signed with its
  secret (runs.services.hosts.enrollment) is stored nowhere but the dead-letter
  stream, with the reason.
- A bad event (not JSON, not the contract) or one whose storing failed (our
  bug) is logged with the reason, copied with that reason to the dead-letter
  stream (`wire.dead_letter_stream`: kept, so it can be replayed once fixed)
  and then acknowledged: it would fail the same way forever. Events of unknown runs or
  with a wrong token are dropped by the services, and logged there.
- A database that cannot be reached leaves the entry pending, unacknowledged;
  the loop waits and retries it, so nothing is lost.
- A dead letter keeps no secret and no signature (agents.contract.redaction):
  a pending agent's registration carries its secret. The dead-letter stream
  is capped (BENCHLAB_DEAD_LETTER_MAXLEN, approximately) and entries older
  than BENCHLAB_DEAD_LETTER_MAX_AGE_S are trimmed once a minute (MINID), so
  an agent waiting for approval, whose heartbeats are refused every 5 s, grows
  nothing without bound; the same refusal is logged once per
  REFUSAL_LOG_INTERVAL_S.

The reaper (runs.control.reaper) runs beside it, in a thread of its own.
"""

import json
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from django.conf import settings
from django.db import transaction

from agents.contract import wire
from agents.contract.redaction import MASK, SECRET_FIELD, redact_text, redacted_event
from agents.contract.reports.events import InvalidEvent, is_agent_event
from runs.agentlink.transport import redis_connection
from runs.control.loop import DATABASE_DOWN, run_until_stopped
from runs.control.members import claim_from_dead_here, remove_dead_consumers
from runs.services import event_refusal, record_event
from runs.services.jobs.ingest import (
    is_heartbeat,
    is_live_event,
    record_heartbeats,
    record_live_events,
)
from runs.services.retry import retry_on_conflict

logger = logging.getLogger(__name__)

# How often the consumer looks for members of its group that are gone.
MEMBERS_CHECK_S = 60.0

DEAD_LETTER_EXPIRY_INTERVAL_S = 60.0
REFUSAL_LOG_INTERVAL_S = 600.0
REFUSALS_REMEMBERED = 1000

# A stream entry: its id and its fields (the client decodes responses to str).
Fields = dict[str, str]
Entry = tuple[str, Fields | None]


def _stream_entries(reply: Any) -> list[Entry]:
    """The entries of an XREADGROUP reply for one stream (empty when nothing came)."""
    return reply[0][1] if reply else []


@retry_on_conflict
def _store_one(event: object) -> str | None:
    """Store one event in a transaction of its own; why it is refused, or None."""
    with transaction.atomic():
        refusal = event_refusal(event)
        if refusal is None:
            record_event(event)
    return refusal


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}"


class EventConsumer:
    """One member of the `control` consumer group; `run_round()` is one pass of the loop."""

    def __init__(
        self,
        client: redis.Redis | None = None,
        stream: str | None = None,
        group: str | None = None,
        consumer: str | None = None,
        block_ms: int = 1000,
        batch: int = 500,
        claim_idle_ms: int = 60_000,
    ):
        self.client = client or redis_connection()
        self.stream: str = stream or settings.BENCHLAB_EVENTS_STREAM
        self.group: str = group or settings.BENCHLAB_EVENTS_GROUP
        self.consumer = consumer or default_consumer_name()
        self.block_ms = block_ms
        self.batch = batch
        self.claim_idle_ms = claim_idle_ms
        self._next_members_check = 0.0
        self.dead_letter_maxlen: int = settings.BENCHLAB_DEAD_LETTER_MAXLEN
        self.dead_letter_max_age_s: int = settings.BENCHLAB_DEAD_LETTER_MAX_AGE_S
        self._next_expiry = 0.0
        self._refusals_logged: dict[str, float] = {}

    def ensure_group(self) -> None:
        """Create the stream and the consumer group, reading from the start, if missing."""
        try:
            self.client.xgroup_create(self.stream, self.group, id="0", mkstream=True)
        except redis.ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def run_round(self) -> int:
        """Handle one batch: own pending, else reclaimed, else new entries; return how many."""
        if time.monotonic() >= self._next_expiry:
            self.expire_dead_letters()
            self._next_expiry = time.monotonic() + DEAD_LETTER_EXPIRY_INTERVAL_S
        self._forget_dead_members()
        entries = self._own_pending() or self._reclaimed() or self._new()
        if entries:
            self.handle_batch(entries)
        return len(entries)

    def _forget_dead_members(self) -> None:
        """Now and then (first at start), take over what members whose process is gone
        left pending and remove the group's members that are gone (runs.control.members)."""
        if time.monotonic() < self._next_members_check:
            return
        self._next_members_check = time.monotonic() + MEMBERS_CHECK_S
        claim_from_dead_here(self.client, self.stream, self.group, self.consumer)
        remove_dead_consumers(self.client, self.stream, self.group, keep=self.consumer)

    def _own_pending(self) -> list[Entry]:
        reply = self.client.xreadgroup(
            self.group, self.consumer, {self.stream: "0"}, count=self.batch
        )
        return _stream_entries(reply)

    def _reclaimed(self) -> list[Entry]:
        reply: Any = self.client.xautoclaim(
            self.stream, self.group, self.consumer, self.claim_idle_ms, "0-0", count=self.batch
        )
        entries: list[Entry] = reply[1]
        if entries:
            logger.info("reclaimed %d events left pending by other consumers", len(entries))
        return entries

    def _new(self) -> list[Entry]:
        reply = self.client.xreadgroup(
            self.group, self.consumer, {self.stream: ">"}, count=self.batch, block=self.block_ms
        )
        return _stream_entries(reply)

    def handle_batch(self, entries: list[Entry]) -> None:
        """Store a batch in one transaction and acknowledge it after the commit.

        Progress and sample events are stored together (runs.services.jobs.ingest)
        up to the next event of a run, which is stored on its own after them;
        heartbeats are stored together at the end (they touch no run's samples),
        registrations as they come. When
        anything but a lost database fails, the batch is rolled back and each
        entry is handled again on its own (`handle`), so only a bad one ends
        in the dead-letter stream, with its reason.
        """
        try:
            dead = retry_on_conflict(self._store_batch)(entries)
        except DATABASE_DOWN:
            raise
        except Exception:
            logger.warning("a batch of %d events failed; storing each on its own", len(entries))
            for entry_id, fields in entries:
                self.handle(entry_id, fields)
            return
        for fields, reason in dead:
            self._keep_dead(fields, reason)
        self._acknowledge(*(entry_id for entry_id, _fields in entries))

    def _store_batch(self, entries: list[Entry]) -> list[tuple[Fields | None, str]]:
        """Store the batch's events in one transaction; the refused ones, with the reason."""
        dead: list[tuple[Fields | None, str]] = []
        live: list[tuple[Fields | None, object]] = []
        heartbeats: list[tuple[Fields | None, object]] = []
        with transaction.atomic():
            for entry_id, fields in entries:
                event = json.loads((fields or {})[wire.EVENT_FIELD])
                if is_live_event(event) or is_heartbeat(event):
                    (live if is_live_event(event) else heartbeats).append((fields, event))
                    continue
                if not is_agent_event(event):  # it may change a run the live events write to
                    dead += self._store_together(record_live_events, live)
                    live = []
                refusal = event_refusal(event)
                if refusal is None:
                    record_event(event)
                else:
                    self._log_refusal(entry_id, refusal)
                    dead.append((fields, f"refused: {refusal}"))
            dead += self._store_together(record_live_events, live)
            dead += self._store_together(record_heartbeats, heartbeats)
        return dead

    def _store_together(
        self,
        store: Callable[[list[object]], list[str | None]],
        entries: list[tuple[Fields | None, object]],
    ) -> list[tuple[Fields | None, str]]:
        """Store events with `store`; the refused ones with the reason."""
        if not entries:
            return []
        refusals = store([event for _fields, event in entries])
        dead = []
        for (fields, _event), refusal in zip(entries, refusals, strict=True):
            if refusal is not None:
                self._log_refusal("in a batch", refusal)
                dead.append((fields, f"refused: {refusal}"))
        return dead

    def handle(self, entry_id: str, fields: Fields | None) -> None:
        """Store one entry and acknowledge it after the commit.

        Raises the database's error when it cannot be reached; the entry then
        stays pending and is retried.
        """
        try:
            event = json.loads((fields or {})[wire.EVENT_FIELD])
            refusal = _store_one(event)
            if refusal is not None:
                self._log_refusal(entry_id, refusal)
                self._keep_dead(fields, f"refused: {refusal}")
        except DATABASE_DOWN:
            raise
        except (KeyError, ValueError, TypeError, InvalidEvent) as exc:
            reason = scrubbed(f"invalid event: {exc!r}", fields)
            logger.error("event %s is not a valid event: %s", entry_id, reason)
            self._keep_dead(fields, reason)
        except Exception as exc:
            # The traceback goes through the handlers' RedactingFilter.
            logger.exception("event %s could not be stored", entry_id)
            self._keep_dead(fields, f"storing failed: {exc!r}")
        self._acknowledge(entry_id)

    def _log_refusal(self, entry_id: str, refusal: str) -> None:
        """Log a refusal, but the same one at most once per REFUSAL_LOG_INTERVAL_S: a
        pending agent's heartbeats are refused every 5 s for as long as it waits."""
        now = time.monotonic()
        if now < self._refusals_logged.get(refusal, 0.0):
            logger.debug("event %s refused: %s", entry_id, refusal)
            return
        if len(self._refusals_logged) >= REFUSALS_REMEMBERED:
            self._refusals_logged.clear()
        self._refusals_logged[refusal] = now + REFUSAL_LOG_INTERVAL_S
        logger.warning(
            "event %s refused: %s (logged once per %d s)", entry_id, refusal, REFUSAL_LOG_INTERVAL_S
        )

    @property
    def dead_letter_stream(self) -> str:
        return wire.dead_letter_stream(self.stream)

    def _keep_dead(self, fields: Fields | None, reason: str) -> None:
        """Keep an event that cannot be stored, with the reason, instead of losing it:
        without secret and signature, in a capped stream (an agent waiting for approval
        sends a refused heartbeat every 5 s)."""
        kept: dict[Any, Any] = dead_letter(fields, reason)
        self.client.xadd(
            self.dead_letter_stream, kept, maxlen=self.dead_letter_maxlen, approximate=True
        )

    def expire_dead_letters(self) -> int:
        """Trim dead letters older than `dead_letter_max_age_s` (by Redis' clock, which
        the entry ids are made of); return how many went."""
        seconds, microseconds = self.client.time()
        now_ms = seconds * 1000 + microseconds // 1000
        oldest_kept = max(0, now_ms - self.dead_letter_max_age_s * 1000)
        trimmed = int(
            self.client.xtrim(self.dead_letter_stream, minid=f"{oldest_kept}-0", approximate=False)
        )
        if trimmed:
            logger.info(
                "expired %d dead letters older than %d s", trimmed, self.dead_letter_max_age_s
            )
        return trimmed

    def _acknowledge(self, *entry_ids: str) -> None:
        pipe = self.client.pipeline()
        pipe.xack(self.stream, self.group, *entry_ids)
        pipe.xdel(self.stream, *entry_ids)
        pipe.execute()

    def run_forever(self, stop: threading.Event) -> None:
        """Consume until `stop` is set; a lost database or Redis is waited out, never fatal."""
        logger.info("consuming %s as %s/%s", self.stream, self.group, self.consumer)
        run_until_stopped("consumer", self.run_round, stop, prepare=self.ensure_group)
        logger.info("stopped consuming %s", self.stream)


def dead_letter(fields: Fields | None, reason: str) -> Fields:
    """What the dead-letter stream keeps of an entry: its event without the secret and
    the signature (agents.contract.redaction), and the reason, scrubbed alike."""
    kept: Fields = {}
    for key, value in (fields or {}).items():
        try:
            document = json.loads(value)
        except ValueError:
            kept[key] = redact_text(value)
            continue
        if isinstance(document, dict):
            kept[key] = json.dumps(redacted_event(document), separators=(",", ":"))
        else:
            kept[key] = redact_text(value)
    kept["error"] = scrubbed(reason, fields)
    return kept


def scrubbed(text: str, fields: Fields | None) -> str:
    """`text` (a reason, an exception's repr) without the secret the entry carried."""
    for secret in _carried_secrets(fields):
        text = text.replace(secret, MASK)
    return redact_text(text)


def _carried_secrets(fields: Fields | None) -> list[str]:
    secrets = []
    for value in (fields or {}).values():
        try:
            document = json.loads(value)
        except ValueError:
            continue
        data = document.get("data") if isinstance(document, dict) else None
        secret = data.get(SECRET_FIELD) if isinstance(data, dict) else None
        if isinstance(secret, str) and secret:
            secrets.append(secret)
        if isinstance(document, dict) and isinstance(document.get("sig"), str):
            secrets.append(document["sig"])
    return secrets
