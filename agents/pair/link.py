"""How the two halves of a run with a client host talk: messages and liveness over Redis.

Each half appends JSON messages to the other's stream (`pair_key(dispatch,
"to-server")`, `"to-client"`) and keeps its own `alive:<role>` key fresh (a
thread renews it every second with a short expiry). A half whose peer's key has
expired after the peer was seen treats the peer as lost. Redis is the lab's
trusted channel already (jobs and events travel on it); a message never makes
an agent run anything its own signed job does not say.

A Redis outage is ridden out as the run's events ride it out (docs/decisions.md):
messages go out through the event path's `RedisStreamSink`, which spools them on
disk while Redis is unreachable and sends them in order once it answers; the
receiving half reads its stream from the last entry it took (a read whose answer
was lost is read again, never lost) and drops a message numbered no higher than
the last it kept (one the spool sent again after a lost reply). Meanwhile each
half retries with backoff, and takes the peer's missing liveness key for lost
only ALIVE_TTL_S after Redis answers again (the peer renews it within a second).
An outage longer than the agent's `redis_grace_s` fails the run as `redis_lost`.
"""

import json
import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import redis

from agents.config import AgentConfig
from agents.contract.errors import Cancelled, JobError
from agents.contract.vocabulary import PairRole
from agents.contract.wire import DISPATCH_KEY_TTL_S, EVENT_FIELD, pair_key
from agents.transport import RedisStreamSink, redis_client

logger = logging.getLogger(__name__)

ALIVE_EVERY_S = 1.0
ALIVE_TTL_S = 5
# Below the agent client's 1 s socket timeout (agents.transport.redis_client).
RECEIVE_WAIT_S = 0.5
# Messages taken from the stream per read; the rest of a batch waits in memory.
READ_BATCH = 100
# Backoff between attempts while Redis does not answer: doubling from the first to the last.
RETRY_FIRST_S = 0.25
RETRY_MAX_S = 5.0

Message = dict[str, Any]
T = TypeVar("T")
# One entry of a stream as redis-py answers XREAD: its id and its fields.
StreamEntry = tuple[bytes, dict[bytes, bytes]]


class RedisOutage:
    """Since when this half has been without Redis; past `grace_s` the run fails.

    The job's thread and the liveness thread both report to it. Once Redis answers
    again the peer is not judged by its liveness key before ALIVE_TTL_S has passed:
    its key expired during the outage and the peer's next renewal puts it back.
    """

    def __init__(self, dispatch: str, grace_s: float) -> None:
        self.dispatch = dispatch
        self.grace_s = grace_s
        self.since: float | None = None
        self.failures = 0
        self.judge_peer_from = 0.0
        self._lock = threading.Lock()

    def failed(self, error: redis.RedisError) -> float:
        """Note a failed Redis call; the seconds to wait before the next attempt."""
        now = time.monotonic()
        with self._lock:
            if self.since is None:
                self.since, self.failures = now, 0
                logger.warning(
                    "run %s: Redis unreachable (%s): waiting up to %g s for it",
                    self.dispatch,
                    error,
                    self.grace_s,
                )
            self.failures += 1
            return float(min(RETRY_FIRST_S * 2 ** min(self.failures - 1, 8), RETRY_MAX_S))

    def answered(self) -> None:
        """Redis answered: the outage, if any, is over."""
        with self._lock:
            if self.since is None:
                return
            logger.warning(
                "run %s: Redis reachable again after %.1f s",
                self.dispatch,
                time.monotonic() - self.since,
            )
            self.since = None
            self.judge_peer_from = time.monotonic() + ALIVE_TTL_S

    def check(self) -> None:
        """Raise JobError("redis_lost") once the outage has lasted longer than the grace."""
        since = self.since
        if since is None:
            return
        lasted = time.monotonic() - since
        if lasted > self.grace_s:
            raise JobError(
                "redis_lost",
                f"lost Redis for {lasted:.0f} s, longer than the {self.grace_s:g} s this agent "
                "waits for it (--redis-grace): the two halves of the run could not reach each "
                "other",
            )

    def may_judge_peer(self) -> bool:
        """Whether a missing liveness key of the peer means the peer is gone."""
        return self.since is None and time.monotonic() >= self.judge_peer_from


class PairLink:
    """One half's end of the pair: `send` to the peer, `receive` from it, liveness both ways."""

    def __init__(
        self,
        client: redis.Redis,
        outbox: RedisStreamSink,
        dispatch: str,
        role: PairRole,
        peer_name: str,
        grace_s: float,
    ):
        """`outbox` appends to the peer's stream, `pair_key(dispatch, "to-<peer role>")`."""
        self.client = client
        self.outbox = outbox
        self.dispatch = dispatch
        self.role = role
        self.peer_role: PairRole = "client" if role == "server" else "server"
        self.peer_name = peer_name
        self.peer_seen = False
        self.outage = RedisOutage(dispatch, grace_s)
        self._next_look = 0.0
        self._gone = False
        self._sent = 0
        self._send_lock = threading.Lock()
        self._read_from = "0-0"
        self._received = 0
        self._inbox: deque[Message] = deque()
        self._started = False
        self._closed = False
        self._stop = threading.Event()
        self._alive = threading.Thread(target=self._keep_alive, daemon=True)

    @classmethod
    def open(cls, config: AgentConfig, dispatch: str, role: PairRole, peer_name: str) -> "PairLink":
        """The link of this agent's half: its Redis, its spool, its grace."""
        peer_role = "client" if role == "server" else "server"
        outbox = RedisStreamSink(
            config.redis_url,
            config.spool_dir,
            stream=pair_key(dispatch, f"to-{peer_role}"),
            expire_s=DISPATCH_KEY_TTL_S,
        )
        client = redis_client(config.redis_url)
        return cls(client, outbox, dispatch, role, peer_name, config.redis_grace_s)

    def start(self) -> None:
        self._started = True
        self.outbox.start()
        self._renew()
        self._alive.start()

    def close(self) -> None:
        """Stop the liveness key (the peer sees this half gone within ALIVE_TTL_S), remove
        this half's stream, and send what waits in the spool; what Redis still does not
        take is dropped: its reader's run is over. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        self._stop.set()
        if self._alive.is_alive():
            self._alive.join()
        if self._started:
            # This half's stream goes too: nothing reads it any more.
            inbox = pair_key(self.dispatch, f"to-{self.role}")
            self._redis_call(lambda: self.client.delete(self._alive_key(self.role), inbox))
        self.outbox.close()
        unsent = self.outbox.discard_spool()
        if unsent:
            logger.warning(
                "run %s: messages to the %s dropped unsent (Redis did not answer before the "
                "run ended): %d",
                self.dispatch,
                self.peer_role,
                unsent,
            )
        self.client.close()

    def send(self, kind: str, **data: Any) -> None:
        """Hand a message to the outbox (sent now, or spooled until Redis answers)."""
        with self._send_lock:
            self._sent += 1
            self.outbox({"kind": kind, "n": self._sent, **data})

    def receive(self) -> Message | None:
        """The next message, waiting up to RECEIVE_WAIT_S (longer while Redis does not
        answer: the backoff); None when there was none. Raises JobError("redis_lost")
        once Redis has been unreachable for longer than the grace."""
        if not self._inbox:
            self._read()
        return self._inbox.popleft() if self._inbox else None

    def _read(self) -> None:
        key = pair_key(self.dispatch, f"to-{self.role}")
        try:
            answer = self.client.xread(
                {key: self._read_from}, count=READ_BATCH, block=int(RECEIVE_WAIT_S * 1000)
            )
        except redis.RedisError as error:
            delay = self.outage.failed(error)
            self.outage.check()
            time.sleep(delay)
            return
        self.outage.answered()
        for _stream, entries in cast(list[tuple[bytes, list[StreamEntry]]], answer or []):
            for entry_id, fields in entries:
                self._read_from = entry_id.decode()
                message = json.loads(fields[EVENT_FIELD.encode()])
                if not isinstance(message, dict) or not isinstance(message.get("n"), int):
                    raise JobError(
                        "internal_error", f"unreadable message from the {self.peer_role}"
                    )
                if message["n"] > self._received:
                    self._received = message["n"]
                    self._inbox.append(message)
        if answer:
            # What was read is never read again: the stream keeps only the last entry taken.
            self._redis_call(
                lambda: self.client.xtrim(key, minid=self._read_from, approximate=False)
            )

    def peer_gone(self) -> bool:
        """Whether the peer, once seen, stopped renewing its key (asked at most once a second)."""
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + ALIVE_EVERY_S
            self._gone = not self.peer_alive() and self.peer_seen
        return self._gone

    def peer_alive(self) -> bool:
        """Whether the peer's liveness key is there; True while this half cannot tell
        (Redis unreachable, or back for less than ALIVE_TTL_S)."""
        alive = self._redis_call(lambda: bool(self.client.exists(self._alive_key(self.peer_role))))
        if alive is None:
            return True
        self.peer_seen = self.peer_seen or alive
        return alive or not self.outage.may_judge_peer()

    def wait_for(
        self,
        kinds: set[str],
        should_cancel: Callable[[], bool],
        timeout_s: float | None = None,
        on_other: Callable[[Message], None] | None = None,
    ) -> Message:
        """The next message of one of `kinds`, handing others to `on_other`.

        Raises Cancelled when the run is cancelled, JobError("peer_lost") when the
        peer stops (its liveness key expired, or it sent `failed`), JobError("redis_lost")
        when Redis did not answer within the grace, and JobError("peer_absent") when no
        such message came within `timeout_s`.
        """
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while True:
            if should_cancel():
                raise Cancelled()
            message = self.receive()
            if message is not None and message["kind"] in kinds:
                self.peer_seen = True
                return message
            if message is not None and message["kind"] in ("failed", "stop"):
                raise self.peer_failed(message)
            if message is not None and on_other is not None:
                on_other(message)
            if message is None and not self.peer_alive() and self.peer_seen:
                raise self.lost()
            if deadline is not None and time.monotonic() > deadline:
                raise JobError(
                    "peer_absent",
                    f"the {self.peer_role} host {self.peer_name} did not take its half of the "
                    f"run within {timeout_s:g} s (busy with another job, offline, or lost its job)",
                )

    def lost(self) -> JobError:
        return JobError(
            "peer_lost",
            f"lost the {self.peer_role} host {self.peer_name}: its agent stopped answering",
        )

    def peer_failed(self, message: Message) -> JobError:
        error = message.get("error") or {}
        return JobError(
            "peer_lost",
            f"the {self.peer_role} host {self.peer_name} ended its half: "
            f"{error.get('message') or 'it stopped the run'}",
        )

    def _keep_alive(self) -> None:
        while not self._stop.wait(ALIVE_EVERY_S):
            self._renew()

    def _renew(self) -> None:
        self._redis_call(lambda: self.client.set(self._alive_key(self.role), "1", ex=ALIVE_TTL_S))

    def _alive_key(self, role: PairRole) -> str:
        return pair_key(self.dispatch, f"alive:{role}")

    def _redis_call(self, call: Callable[[], T]) -> T | None:
        """`call`'s answer, or None when Redis did not answer (the outage notes it: the
        job's thread fails the run once it outlasts the grace)."""
        try:
            answer = call()
        except redis.RedisError as error:
            self.outage.failed(error)
            return None
        self.outage.answered()
        return answer


def discard_left_spools(spool_dir: Path) -> int:
    """Remove the spools of pair links an agent killed mid-run left, and say how many
    messages they held; the worker calls this when it starts. Their runs ended with that
    agent (the peer lost it, or the lab reports it restarted): nobody reads them any more."""
    unsent = 0
    for spool in sorted(Path(spool_dir).glob(f"{pair_key('*', '*')}.jsonl")):
        unsent += spool.read_bytes().count(b"\n")
        spool.unlink()
    return unsent
