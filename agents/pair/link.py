"""How the two halves of a run with a client host talk: messages and liveness over Redis.

Each half pushes JSON messages onto the other's list (`pair_key(dispatch,
"to-server")`, `"to-client"`) and keeps its own `alive:<role>` key fresh (a
thread renews it every second with a short expiry). A half whose peer's key has
expired after the peer was seen treats the peer as lost. Redis is the lab's
trusted channel already (jobs and events travel on it); a message never makes
an agent run anything its own signed job does not say.
"""

import json
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis

from agents.contract.errors import Cancelled, JobError
from agents.contract.vocabulary import PairRole
from agents.contract.wire import DISPATCH_KEY_TTL_S, pair_key

logger = logging.getLogger(__name__)

ALIVE_EVERY_S = 1.0
ALIVE_TTL_S = 5
# Below the agent client's 1 s socket timeout (agents.worker.transport.redis_client).
RECEIVE_WAIT_S = 0.5

Message = dict[str, Any]


class PairLink:
    """One half's end of the pair: `send` to the peer, `receive` from it, liveness both ways."""

    def __init__(self, client: redis.Redis, dispatch: str, role: PairRole, peer_name: str):
        self.client = client
        self.dispatch = dispatch
        self.role = role
        self.peer_role: PairRole = "client" if role == "server" else "server"
        self.peer_name = peer_name
        self.peer_seen = False
        self._next_look = 0.0
        self._gone = False
        self._stop = threading.Event()
        self._alive = threading.Thread(target=self._keep_alive, daemon=True)

    def start(self) -> None:
        self._renew()
        self._alive.start()

    def close(self) -> None:
        """Stop the liveness key (the peer sees this half gone within ALIVE_TTL_S)."""
        self._stop.set()
        if self._alive.is_alive():
            self._alive.join()
        self.client.delete(pair_key(self.dispatch, f"alive:{self.role}"))

    def send(self, kind: str, **data: Any) -> None:
        key = pair_key(self.dispatch, f"to-{self.peer_role}")
        self.client.rpush(key, json.dumps({"kind": kind, **data}))
        self.client.expire(key, DISPATCH_KEY_TTL_S)

    def receive(self) -> Message | None:
        """The next message, waiting up to RECEIVE_WAIT_S; None when there was none."""
        popped = self.client.blpop([pair_key(self.dispatch, f"to-{self.role}")], RECEIVE_WAIT_S)
        if popped is None:
            return None
        message = json.loads(popped[1])
        if not isinstance(message, dict):
            raise JobError("internal_error", f"unreadable message from the {self.peer_role}")
        return message

    def peer_gone(self) -> bool:
        """Whether the peer, once seen, stopped renewing its key (asked at most once a second)."""
        now = time.monotonic()
        if now >= self._next_look:
            self._next_look = now + ALIVE_EVERY_S
            self._gone = not self.peer_alive() and self.peer_seen
        return self._gone

    def peer_alive(self) -> bool:
        alive = bool(self.client.exists(pair_key(self.dispatch, f"alive:{self.peer_role}")))
        self.peer_seen = self.peer_seen or alive
        return alive

    def wait_for(
        self,
        kinds: set[str],
        should_cancel: Callable[[], bool],
        timeout_s: float | None = None,
        on_other: Callable[[Message], None] | None = None,
    ) -> Message:
        """The next message of one of `kinds`, handing others to `on_other`.

        Raises Cancelled when the run is cancelled, JobError("peer_lost") when the
        peer stops (its liveness key expired, or it sent `failed`), and
        JobError("peer_absent") when no such message came within `timeout_s`.
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
            try:
                self._renew()
            except redis.RedisError:
                logger.exception(
                    "run %s: could not renew the %s's liveness", self.dispatch, self.role
                )

    def _renew(self) -> None:
        self.client.set(pair_key(self.dispatch, f"alive:{self.role}"), "1", ex=ALIVE_TTL_S)
