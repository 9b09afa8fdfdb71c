"""The agent's side of the lab transport (docs/contracts.md, section 4).

Events go to a Redis Stream. When Redis cannot be reached they wait in a spool
file on disk and are sent, in order, once it is back: a benchmark never stops
because Redis is down. Claims and the cancel flag are plain keys. Agent-level
events (registration, heartbeats) have their own emitter, with sequence
numbers that keep growing across restarts of the agent.
"""

import fcntl
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry

from agents.contract.reports.events import LIVE_EVENT_TYPES
from agents.contract.reports.facts import Space
from agents.contract.signing import sign
from agents.contract.wire import (
    DISPATCH_KEY_TTL_S,
    EVENT_FIELD,
    EVENTS_STREAM,
    EVENTS_STREAM_MAXLEN,
    EVENTS_STREAM_MAXLEN_ENV,
    cancel_key,
    claim_key,
)
from agents.events import EventEmitter, Sink

logger = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 0.5
SOCKET_TIMEOUT_S = 1.0
RETRY_INTERVAL_S = 5.0
FLUSH_INTERVAL_S = 3.0
# How long the agent's live events (a point's progress and samples, two a second) wait to
# go with the next ones in one round trip to Redis: each round trip costs the agent CPU
# inside the measured window.
LIVE_HOLD_S = 2.0
CANCEL_CHECK_INTERVAL_S = 1.0
HEARTBEAT_INTERVAL_S = 5.0
# How often a heartbeat carries the free space of the storage targets at least; a beat
# carries it too when a target's free space moved by SPACE_CHANGE_BYTES since the last
# report (read every beat: a target freed is seen by the lab a beat later, not a minute).
SPACE_INTERVAL_S = 60.0
SPACE_CHANGE_BYTES = 8 * 1024**2
DRAIN_BATCH = 500


def redis_client(url: str) -> redis.Redis:
    """A client that fails fast: short timeouts and no retries (the spool takes over)."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=CONNECT_TIMEOUT_S,
        socket_timeout=SOCKET_TIMEOUT_S,
        retry=Retry(NoBackoff(), 0),
    )


def events_stream_maxlen() -> int:
    """The events stream's cap: `BENCHLAB_EVENTS_MAXLEN` (as on the lab), else the contract's."""
    value = os.environ.get(EVENTS_STREAM_MAXLEN_ENV, "").strip()
    if not value:
        return EVENTS_STREAM_MAXLEN
    if not value.isdigit() or int(value) < 1:
        raise ValueError(f"{EVENTS_STREAM_MAXLEN_ENV} must be a positive integer, not {value!r}")
    return int(value)


def claim_run(client: redis.Redis, dispatch: str, agent: str) -> bool:
    """Take the dispatch for `agent`; False when someone (or an earlier delivery) has it."""
    return bool(client.set(claim_key(dispatch), agent, nx=True, ex=DISPATCH_KEY_TTL_S))


def cancel_requested(client: redis.Redis, dispatch: str) -> bool:
    """Whether the web tier has asked to cancel the dispatch."""
    return bool(client.exists(cancel_key(dispatch)))


class CancelWatcher:
    """`should_cancel` for the job runner: cheap to call in a loop, never raises.

    Redis is asked at most once per `interval`; once the flag is seen the answer
    stays True. While Redis is unreachable the answer is False and Redis is not
    asked again before `retry_interval` has passed.
    """

    def __init__(
        self,
        client: redis.Redis,
        dispatch: str,
        interval: float = CANCEL_CHECK_INTERVAL_S,
        retry_interval: float = RETRY_INTERVAL_S,
    ):
        self.client = client
        self.dispatch = dispatch
        self.interval = interval
        self.retry_interval = retry_interval
        self._cancelled = False
        self._unreachable = False
        self._next_check = 0.0

    def __call__(self) -> bool:
        now = time.monotonic()
        if self._cancelled or now < self._next_check:
            return self._cancelled
        try:
            self._cancelled = cancel_requested(self.client, self.dispatch)
        except redis.RedisError as error:
            log = logger.debug if self._unreachable else logger.warning
            log("run %s: cannot check the cancel flag: %s", self.dispatch, error)
            self._unreachable = True
            self._next_check = now + self.retry_interval
            return False
        self._unreachable = False
        self._next_check = now + self.interval
        return self._cancelled


class RedisStreamSink:
    """An EventEmitter sink appending each event to a Redis Stream as `event=<json>`.

    While Redis is unreachable, events are appended to a spool file
    (`<spool_dir>/<stream>.jsonl`, one JSON line each, fsynced) and Redis is not
    tried again before `retry_interval` has passed, so a caller is held up by at
    most one connection timeout per interval. Every call first drains the spool,
    and so does a background flusher once `start` has run. A drain sends the
    spool in order and then removes it, or rewrites it atomically to what is
    left: nothing is lost or reordered; after a crash mid-drain some events may
    be sent twice, which the control side ignores (it dedupes by run and seq).
    Spool changes hold an flock on the spool directory, so agent processes
    sharing a state directory do not lose each other's events. The spool is
    readable by the agent's user only (a registration in it carries the
    agent's secret), and the stream is capped at `maxlen` entries (approximately).

    With `hold_s`, live events (LIVE_EVENT_TYPES) wait up to that long to be sent with
    the events after them: any other event, a live one once the first held has waited
    `hold_s`, or the flusher, sends everything held first, in order.
    """

    def __init__(
        self,
        redis_url: str,
        spool_dir: Path,
        stream: str = EVENTS_STREAM,
        retry_interval: float = RETRY_INTERVAL_S,
        flush_interval: float = FLUSH_INTERVAL_S,
        maxlen: int | None = None,
        expire_s: int | None = None,
        hold_s: float = 0.0,
    ):
        """`expire_s` sets the stream to expire that long after its last entry (a stream
        that lives with one run: the pair link's, agents/pair/link.py)."""
        self.stream = stream
        self.maxlen = maxlen or events_stream_maxlen()
        self.expire_s = expire_s
        self.spool_path = Path(spool_dir) / f"{stream}.jsonl"
        self.retry_interval = retry_interval
        self.flush_interval = flush_interval
        self._redis = redis_client(redis_url)
        self._lock = threading.Lock()
        self._retry_at = 0.0
        self._redis_down = False
        self._stopping = threading.Event()
        self._flusher: threading.Thread | None = None
        self.hold_s = hold_s
        self._held: list[tuple[Mapping[str, object], str]] = []
        self._held_since = 0.0

    def __call__(self, event: Mapping[str, object]) -> None:
        payload = json.dumps(event, separators=(",", ":"))
        with self._lock:
            if self.hold_s > 0 and event.get("type") in LIVE_EVENT_TYPES:
                now = time.monotonic()
                if not self._held:
                    self._held_since = now
                if now - self._held_since < self.hold_s:
                    self._held.append((event, payload))
                    return
            self._held.append((event, payload))
            self._send_held()

    def _send_held(self) -> None:
        """Send what is held, in order, or spool it (the lock held)."""
        held, self._held = self._held, []
        if not held or (self._drain() and self._send([payload for _, payload in held])):
            return
        try:
            self._append_to_spool([payload for _, payload in held])
        except OSError:
            # The payloads themselves are not logged: a registration carries the secret.
            lost = ", ".join(
                f"{event.get('type')} of {event.get('run_id') or event.get('agent')} "
                f"(seq {event.get('seq')})"
                for event, _ in held
            )
            logger.exception("events lost, Redis and the spool both unavailable: %s", lost)

    def start(self) -> None:
        """Send what a previous agent process left in the spool, then flush in the background."""
        self.flush()
        self._flusher = threading.Thread(target=self._flush_loop, name="spool-flusher", daemon=True)
        self._flusher.start()

    def close(self) -> None:
        """Stop the flusher, try a last drain and release the connection."""
        self._stopping.set()
        if self._flusher is not None:
            self._flusher.join()
        self.flush()
        self._redis.close()

    def discard_spool(self) -> int:
        """Remove what waits in the spool unsent; how many events that was. For a stream
        whose reader is gone (the other half of a finished run): sent later, they would only
        lie in Redis."""
        with self._lock, self._spool_locked():
            try:
                unsent = self.spool_path.read_bytes()
            except FileNotFoundError:
                return 0
            self.spool_path.unlink()
            _fsync_dir(self.spool_path.parent)
        return unsent.count(b"\n")

    def flush(self) -> bool:
        """Send whatever waits in the spool, then what is held; True when nothing is left
        waiting."""
        with self._lock:
            self._send_held()
            return self._drain()

    def _flush_loop(self) -> None:
        while not self._stopping.wait(self.flush_interval):
            try:
                self.flush()
            except OSError:
                logger.exception("cannot drain the spool %s", self.spool_path)

    def _send(self, payloads: list[str]) -> bool:
        if time.monotonic() < self._retry_at:
            return False
        try:
            pipeline = self._redis.pipeline(transaction=False)
            for payload in payloads:
                pipeline.xadd(
                    self.stream, {EVENT_FIELD: payload}, maxlen=self.maxlen, approximate=True
                )
            if self.expire_s is not None:
                pipeline.expire(self.stream, self.expire_s)
            pipeline.execute()
        except redis.RedisError as error:
            self._retry_at = time.monotonic() + self.retry_interval
            log = logger.debug if self._redis_down else logger.warning
            log("Redis unreachable (%s): events go to %s", error, self.spool_path)
            self._redis_down = True
            return False
        if self._redis_down:
            logger.info("Redis reachable again: sending events to %s", self.stream)
            self._redis_down = False
        return True

    def _drain(self) -> bool:
        if not self.spool_path.exists():
            return True
        if time.monotonic() < self._retry_at:
            return False
        with self._spool_locked():
            try:
                spool = self.spool_path.open("rb")
            except FileNotFoundError:
                return True  # another agent process sharing the directory sent it
            with spool:
                sent = 0
                while True:
                    offset = spool.tell()
                    batch = _read_batch(spool, DRAIN_BATCH)
                    if not batch:
                        break
                    if not self._send(batch):
                        self._keep_spool_from(spool, offset)
                        return False
                    sent += len(batch)
            self.spool_path.unlink()
            _fsync_dir(self.spool_path.parent)
        logger.info("sent %d spooled events to %s", sent, self.stream)
        return True

    @contextmanager
    def _spool_locked(self) -> Iterator[None]:
        """Hold an flock on the spool directory (no lock file left lying around)."""
        self.spool_path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.spool_path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            yield
        finally:
            os.close(fd)

    def _keep_spool_from(self, spool: BinaryIO, offset: int) -> None:
        """Atomically replace the spool with its part from `offset` on (what was not sent)."""
        spool.seek(offset)
        remainder = self.spool_path.with_name(self.spool_path.name + ".tmp")
        descriptor = os.open(remainder, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with open(descriptor, "wb") as out:
            while chunk := spool.read(1 << 20):
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        os.replace(remainder, self.spool_path)
        _fsync_dir(self.spool_path.parent)

    def _append_to_spool(self, payloads: list[str]) -> None:
        """Append the events in order, with one fsync for all of them."""
        with self._spool_locked():
            self._append_locked(payloads)

    def _append_locked(self, payloads: list[str]) -> None:
        created = not self.spool_path.exists()
        descriptor = os.open(self.spool_path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        os.fchmod(descriptor, 0o600)  # a spool left by an older agent may be 0644
        with open(descriptor, "a+b") as spool:
            # A crash can leave a torn last line; start on a fresh line so the
            # next event is not glued to it.
            torn = spool.tell() > 0 and os.pread(spool.fileno(), 1, spool.tell() - 1) != b"\n"
            lines = b"".join(payload.encode() + b"\n" for payload in payloads)
            spool.write((b"\n" if torn else b"") + lines)
            spool.flush()
            os.fsync(spool.fileno())
        if created:
            _fsync_dir(self.spool_path.parent)


def _read_batch(spool: BinaryIO, size: int) -> list[str]:
    """Up to `size` complete events from the spool; torn lines are logged and skipped."""
    batch: list[str] = []
    while len(batch) < size and (line := spool.readline()):
        text = line.decode(errors="replace").strip()
        if not text:
            continue
        try:
            json.loads(text)
        except ValueError:
            # Not the text: a torn registration would show the agent's secret.
            logger.warning("skipping a torn line of %d bytes in the spool", len(line))
            continue
        batch.append(text)
    return batch


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def signing_sink(sink: Sink, secret: str) -> Sink:
    """A sink that signs each event with the agent's secret, then hands it to `sink`."""

    def send(event: Mapping[str, object]) -> None:
        sink(sign("event", event, secret))

    return send


class AgentEventEmitter(EventEmitter):
    """The emitter of agent-level events: run_id null, `agent` set.

    Its seq starts at the process start time in milliseconds, so events of a
    restarted agent always number higher than those of the previous process
    and the control side's (agent, seq) idempotency never drops them.
    """

    def __init__(self, sinks: list[Sink], agent: str):
        super().__init__(sinks, agent=agent, first_seq=int(time.time() * 1000))


def _space_moved(reported: dict[str, Space], current: dict[str, Space]) -> bool:
    """Whether a target's free space is SPACE_CHANGE_BYTES away from its last report (or
    the targets changed)."""
    if reported.keys() != current.keys():
        return True
    for name, now in current.items():
        before, after = reported[name]["free_bytes"], now["free_bytes"]
        if (before is None) != (after is None):
            return True
        if before is not None and after is not None and abs(after - before) >= SPACE_CHANGE_BYTES:
            return True
    return False


class Heartbeat:
    """A daemon thread emitting `heartbeat` events: the run and job being executed, if any,
    and the finished jobs the lab has not confirmed (`finished`, from the agent's ledger).

    A beat reads what runs and emits under the lock `set_running` takes, so a heartbeat
    saying nothing runs was sent before the next job's first event (the lab relies on it).
    `instance` is the worker's token (agents.worker.exclusive): the lab sees two workers
    answering to one name by their two tokens.
    """

    def __init__(
        self,
        emitter: EventEmitter,
        interval: float = HEARTBEAT_INTERVAL_S,
        finished: Callable[[], list[str]] | None = None,
        space: Callable[[], dict[str, Space]] | None = None,
        instance: str | None = None,
    ):
        self.emitter = emitter
        self.instance = instance
        self.interval = interval
        self.finished = finished
        self.space = space
        self._space_due = 0.0  # monotonic time the next beat reports space (0: now)
        self._space_reported: dict[str, Space] = {}
        self.running: str | None = None
        self.job: str | None = None
        # A duet's other side's job id (agents/duet.py): two jobs run at once.
        self.duet_job: str | None = None
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def set_running(
        self, run_id: str | None, job_id: str | None = None, duet_job: str | None = None
    ) -> None:
        with self._lock:
            self.running, self.job, self.duet_job = run_id, job_id, duet_job
            self._space_due = 0.0  # a job starts or ends: the space it takes or frees

    def start(self) -> None:
        self._thread = threading.Thread(target=self._loop, name="heartbeat", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join()

    def beat(self) -> None:
        finished = {} if self.finished is None else {"finished": self.finished()}
        instance = {} if self.instance is None else {"instance": self.instance}
        with self._lock:
            extra = {**finished, **instance, **self._space()}
            if self.duet_job is not None:
                extra["duet_job"] = self.duet_job
            self.emitter.emit("heartbeat", {"running": self.running, "job": self.job, **extra})

    def _space(self) -> dict[str, dict[str, Space]]:
        """`space` for this beat when one is due (SPACE_INTERVAL_S, a job started or ended)
        or a target's free space moved, else nothing."""
        if self.space is None:
            return {}
        now, current = time.monotonic(), self.space()
        if now < self._space_due and not _space_moved(self._space_reported, current):
            return {}
        self._space_due, self._space_reported = now + SPACE_INTERVAL_S, current
        return {"space": current}

    def _loop(self) -> None:
        while True:
            try:
                self.beat()
            except Exception:
                # A dead heartbeat thread would get the agent declared offline
                # and its run failed: log whatever went wrong and keep beating.
                logger.exception("heartbeat failed")
            if self._stopping.wait(self.interval):
                return
