"""One beat scheduler per lab database, however the control worker ends.

`celery -A benchlab worker --beat` runs beat in a child process. A `kill -9`
of the worker used to leave that child running (its parent then pid 1), and a
restarted worker started a second one: every series schedule fired twice.
Two guards make sure exactly one beat fires:

- `die_with_worker` (on `beat_embedded_init`, in the child) asks Linux to
  send the child SIGTERM when the worker dies (PR_SET_PDEATHSIG), and makes
  SIGTERM a clean exit that releases the lock.
- `LockedDatabaseScheduler` (CELERY_BEAT_SCHEDULER) holds a Redis lock per
  lab database (`beat_lock_key`) with a TTL of BENCHLAB_BEAT_LOCK_TTL_S,
  refreshed on every tick. A beat that finds the lock held waits one TTL
  (a killed beat's lock expires by then), then refuses to start: it logs
  which beat holds the lock and exits without firing. A beat that loses its
  lock (another one took it while Redis or this process stalled) stops.
  While Redis cannot be reached, nothing is fired (the broker is that Redis).

Neither guard covers a beat started again after a crash: its schedule's last
fire time is stored only every few minutes, so it finds the schedule due and
fires at once. The scheduler therefore names each series fire's slot
(runs.control.fire_slots) in the task's `slot` argument, and a series fires
once per slot (runs.services.history.series).
"""

import ctypes
import logging
import os
import signal
import socket
import sys
import time
import uuid
from datetime import datetime
from types import FrameType
from typing import Any

import redis
from celery.beat import ScheduleEntry
from celery.signals import beat_embedded_init
from django.conf import settings
from django.db import connection
from django_celery_beat.schedulers import DatabaseScheduler

from runs.agentlink.transport import redis_connection
from runs.control.fire_slots import fire_slot
from runs.services.history.series import FIRE_TASK, SLOT_ARGUMENT

logger = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
# The worker that forks the embedded beat imported this module (runs.control.worker, at
# Django's start); its beat child inherits the value. Billiard, which forks the beat, does
# not tell multiprocessing.parent_process() who the parent is.
WORKER_PID = os.getpid()
# Seconds between attempts while another beat holds the lock or Redis is away.
LOCK_POLL_S = 1.0

# Refresh the lock if it is ours; take it if it is free. 1 when held after the call.
KEEP_SCRIPT = """
local holder = redis.call('GET', KEYS[1])
if holder == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not holder then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0
"""
RELEASE_SCRIPT = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


def beat_lock_key() -> str:
    """The lock's key: one beat per lab database (labs may share a Redis)."""
    db = connection.settings_dict
    where = f"{db.get('HOST') or ''}:{db.get('PORT') or ''}/{db.get('NAME')}"
    return f"benchlab:beat-lock:{connection.vendor}:{where}"


class BeatLock:
    """A Redis lock with a TTL, held by one beat process (its token says which)."""

    def __init__(self, client: redis.Redis, key: str, ttl_s: float):
        self.client = client
        self.key = key
        self.ttl_ms = int(ttl_s * 1000)
        self.token = f"{socket.gethostname()} pid {os.getpid()} ({uuid.uuid4().hex[:8]})"

    def keep(self) -> bool:
        """Refresh the lock when this beat holds it, take it when it is free; held now?"""
        return bool(self.client.eval(KEEP_SCRIPT, 1, self.key, self.token, self.ttl_ms))

    def release(self) -> None:
        self.client.eval(RELEASE_SCRIPT, 1, self.key, self.token)

    def holder(self) -> str:
        value: Any = self.client.get(self.key)
        return value.decode() if isinstance(value, bytes) else str(value or "nobody")


class LockedDatabaseScheduler(DatabaseScheduler):
    """django-celery-beat's scheduler that fires only while it holds the beat lock."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        ttl_s = settings.BENCHLAB_BEAT_LOCK_TTL_S
        self.lock = BeatLock(redis_connection(), beat_lock_key(), ttl_s)
        self._take_lock_or_refuse(ttl_s)
        super().__init__(*args, **kwargs)
        # Ticks come often enough to refresh the lock well before it expires.
        interval: float = self.max_interval  # type: ignore[has-type]  # set by super()
        self.max_interval = min(interval, ttl_s / 3)

    def _take_lock_or_refuse(self, ttl_s: float) -> None:
        deadline = time.monotonic() + ttl_s + LOCK_POLL_S
        while not self._held():
            if time.monotonic() > deadline:
                logger.error(
                    "beat: refusing to start: another beat scheduler (%s) holds %s; this "
                    "one fires nothing and exits",
                    self.lock.holder(),
                    self.lock.key,
                )
                raise SystemExit(1)
            time.sleep(LOCK_POLL_S)
        logger.info("beat: holding %s as %s", self.lock.key, self.lock.token)

    def _held(self) -> bool:
        try:
            return self.lock.keep()
        except redis.RedisError as exc:
            logger.warning("beat: redis unavailable, cannot take the beat lock: %s", exc)
            return False

    def tick(self, *args: Any, **kwargs: Any) -> float:
        """Keep the lock, then fire what is due; fire nothing without the lock."""
        try:
            held = self.lock.keep()
        except redis.RedisError as exc:
            logger.warning("beat: redis unavailable, firing nothing: %s", exc)
            return LOCK_POLL_S
        if not held:
            logger.error(
                "beat: lost %s to %s; this beat stops firing", self.lock.key, self.lock.holder()
            )
            raise SystemExit(1)
        return super().tick(*args, **kwargs)

    def apply_async(
        self, entry: ScheduleEntry, producer: Any = None, advance: bool = True, **kwargs: Any
    ) -> Any:
        """Send the entry's task; a series fire carries the slot it is for (ISO time)."""
        if entry.task != FIRE_TASK:
            return super().apply_async(entry, producer, advance, **kwargs)
        if advance:
            entry = self.reserve(entry)
        due = entry.schedule.now()
        slot = fire_slot(entry.schedule, due)
        logger.info("beat: %s due at %s fires slot %s", entry.name, due.isoformat(), slot)
        return super().apply_async(_with_slot(entry, slot), producer, False, **kwargs)

    def close(self) -> None:
        try:
            super().close()
        finally:
            self._release()

    def _release(self) -> None:
        try:
            self.lock.release()
        except redis.RedisError as exc:  # the lock then expires after its TTL
            logger.warning("beat: could not release %s: %s", self.lock.key, exc)


def _with_slot(entry: ScheduleEntry, slot: datetime) -> ScheduleEntry:
    """A copy of `entry` whose task is called with `slot`; the schedule keeps its own entry.
    (copy.copy would call ModelEntry's constructor with the fields of a plain entry.)"""
    stamped = object.__new__(type(entry))
    vars(stamped).update(vars(entry))
    stamped.kwargs = {**entry.kwargs, SLOT_ARGUMENT: slot.isoformat()}
    return stamped


@beat_embedded_init.connect
def die_with_worker(**_signal: object) -> None:
    """In the worker's beat child: end with the worker (PR_SET_PDEATHSIG, Linux), and
    make SIGTERM a clean exit, so the scheduler closes and releases its lock."""
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    if not sys.platform.startswith("linux"):
        return
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0) != 0:
        error = ctypes.get_errno()
        raise OSError(error, f"prctl(PR_SET_PDEATHSIG): {os.strerror(error)}")
    # Beat builds its scheduler, which takes the lock, before this signal: a worker killed
    # in between is gone before prctl could ask for its death to be signalled.
    if os.getppid() != WORKER_PID:
        logger.error("beat: the worker that started this beat is gone; exiting")
        raise SystemExit(1)


def _exit_on_sigterm(signum: int, _frame: FrameType | None) -> None:
    raise SystemExit(f"beat: signal {signum}")
