"""One worker per agent: a lock on its state directory and a lease on its name in Redis.

A second worker started with the name of a running one would read the live
worker's ledger (and report its job in flight as cut short), register as the
same host and measure the queue's runs side by side with the first on one
machine. So a worker takes both before it reads its ledger, registers or
consumes its queue, and refuses to start, naming the process that holds
them, when either is taken:

- the lock: an flock (non-blocking) on `<state_dir>/locks/<name>.lock`, held
  for the life of the process and released by the kernel however the process
  ends. It is per name, because agents of different names may share one state
  directory (their identities and ledgers are per name).
- the lease: `wire.agent_lease_key(name)` set NX with a TTL (`lease_seconds`),
  holding a token drawn at start, the host (and its boot id), the pid and the
  state directory.
  A thread renews it every third of its TTL; a clean stop deletes it; a worker
  killed leaves it to expire. It catches a twin with another state directory,
  on this host or another. A worker of the same host and state directory takes
  a lease over at once: holding the directory's lock proves its holder gone.

The token is the worker's instance: heartbeats and registrations carry it, so
the lab can tell two workers answering to one name apart.
"""

import fcntl
import json
import logging
import os
import socket
import threading
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

import redis

from agents.contract.wire import AGENT_LEASE_ENV, AGENT_LEASE_S, agent_lease_key
from agents.worker.identity import check_agent_name

logger = logging.getLogger(__name__)

MIN_LEASE_S = 3
BOOT_ID = Path("/proc/sys/kernel/random/boot_id")
# Between attempts to take the lease while Redis cannot be reached (the worker
# could not fetch a job then anyway).
REDIS_RETRY_S = 2.0

# Renew when the lease is ours; take it again when it expired (Redis was out
# longer than the TTL); else answer who holds it now.
RENEW = """
local held = redis.call('GET', KEYS[1])
if held == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if not held then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return held
"""
# Replace a lease only if it still holds what was read.
TAKE_OVER = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[1], ARGV[2], 'PX', ARGV[3])
  return 1
end
return 0
"""
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('DEL', KEYS[1])
end
return 0
"""


class WorkerConflict(OSError):
    """Another worker serves this agent's name or state directory: this one must not start.

    An OSError, as the flock's own refusal is: the command line prints it and exits 2."""


@dataclass(frozen=True)
class Holder:
    """Who holds a lock or lease: the worker's instance token, host, pid and state directory,
    and the host's boot id (two machines may share a host name, never a boot)."""

    token: str
    host: str
    pid: int
    state_dir: str
    boot: str = ""

    def describe(self) -> str:
        return f"pid {self.pid} on host {self.host}"

    def value(self) -> str:
        return json.dumps(asdict(self))

    @classmethod
    def parse(cls, raw: bytes | str | None) -> "Holder | None":
        """The holder a lock file or lease names; None when it names none readable."""
        try:
            value = json.loads(raw or "")
            return cls(
                str(value["token"]),
                str(value["host"]),
                int(value["pid"]),
                str(value["state_dir"]),
                str(value.get("boot", "")),
            )
        except (ValueError, TypeError, KeyError):
            return None


def lease_seconds() -> int:
    """The lease's TTL: `BENCHLAB_AGENT_LEASE_S` (tests shorten it), else the contract's."""
    value = os.environ.get(AGENT_LEASE_ENV, "").strip()
    if not value:
        return AGENT_LEASE_S
    if not value.isdigit() or int(value) < MIN_LEASE_S:
        raise ValueError(f"{AGENT_LEASE_ENV} must be a whole number of seconds >= {MIN_LEASE_S}")
    return int(value)


def this_worker(state_dir: Path) -> Holder:
    """This process as a holder, with a new instance token."""
    holder = (uuid.uuid4().hex, socket.gethostname(), os.getpid(), str(state_dir.resolve()))
    return Holder(*holder, boot=boot_id())


def boot_id() -> str:
    """This boot of this machine (Linux's random boot id; empty where there is none)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


class StateDirLock:
    """The flock on `<state_dir>/locks/<name>.lock`; the file names its holder."""

    def __init__(self, state_dir: Path, name: str, holder: Holder):
        self.path = state_dir / "locks" / f"{name}.lock"
        self.name = name
        self.holder = holder
        self._fd: int | None = None

    def acquire(self) -> None:
        """Take the lock, or raise WorkerConflict naming the process holding it."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Holder.parse(os.pread(fd, 4096, 0))
            os.close(fd)
            who = holder.describe() if holder else "another process"
            raise WorkerConflict(
                f"agent {self.name}: its state directory {self.holder.state_dir} is in use by "
                f"the worker {who} (it holds {self.path}); stop that worker first, or start "
                "this one with another --name or --state-dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, self.holder.value().encode(), 0)
        self._fd = fd

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


class NameLease:
    """The lease on the agent's name in Redis, renewed by a thread of its own."""

    def __init__(self, client: redis.Redis, name: str, holder: Holder, seconds: int):
        self.client = client
        self.name = name
        self.key = agent_lease_key(name)
        self.holder = holder
        self.seconds = seconds
        self._stopping = threading.Event()
        self._renewer: threading.Thread | None = None
        self._lost = False

    def acquire(self) -> None:
        """Take the lease, waiting while Redis cannot be reached; raise WorkerConflict
        naming the worker that holds it."""
        log = logger.warning
        while True:
            try:
                if self._try_acquire():
                    return
            except redis.RedisError as error:
                log("agent %s: waiting for Redis to take the name's lease: %s", self.name, error)
                log = logger.debug
                self._stopping.wait(REDIS_RETRY_S)

    def _try_acquire(self) -> bool:
        """True once this worker holds the lease; False to try again (it just expired)."""
        milliseconds = self.seconds * 1000
        if self.client.set(self.key, self.holder.value(), nx=True, px=milliseconds):
            return True
        raw = self.client.get(self.key)
        if raw is None:
            return False
        held = Holder.parse(raw)
        if held is not None and self._left_by_this_directory(held):
            if self.client.eval(TAKE_OVER, 1, self.key, raw, self.holder.value(), milliseconds):
                logger.warning(
                    "agent %s: took over the name's lease from %s, gone (it left this state "
                    "directory's lock free)",
                    self.name,
                    held.describe(),
                )
                return True
            return False
        expires = max(0, int(self.client.pttl(self.key))) / 1000
        who = held.describe() if held else "an unknown worker"
        raise WorkerConflict(
            f"agent {self.name}: the name is served by the worker {who} (state directory "
            f"{held.state_dir if held else 'unknown'}); its lease in Redis expires in "
            f"{expires:.0f} s unless that worker renews it; stop that worker first, or start "
            "this one with another --name"
        )

    def _left_by_this_directory(self, held: Holder) -> bool:
        """Whether the lease was held by a worker of this host (and boot) and state directory,
        whose lock this worker now holds: that worker is gone."""
        mine = self.holder
        return (held.host, held.boot, held.state_dir) == (mine.host, mine.boot, mine.state_dir)

    def start_renewing(self) -> None:
        self._renewer = threading.Thread(target=self._renew_loop, name="name-lease", daemon=True)
        self._renewer.start()

    def renew(self) -> None:
        """Extend the lease; log (once) when another worker holds it now."""
        answer = self.client.eval(RENEW, 1, self.key, self.holder.value(), self.seconds * 1000)
        if answer == 1:
            self._lost = False
            return
        if not self._lost:
            held = Holder.parse(answer)
            logger.error(
                "agent %s: another worker (%s) holds the name's lease now: two workers serve "
                "one name; stop one of them",
                self.name,
                held.describe() if held else "unknown",
            )
        self._lost = True

    def release(self) -> None:
        """Stop renewing and delete the lease if it is still this worker's."""
        if self._stopping.is_set():
            return
        self._stopping.set()
        if self._renewer is not None:
            self._renewer.join()
        try:
            self.client.eval(RELEASE, 1, self.key, self.holder.value())
        except redis.RedisError as error:
            logger.warning(
                "agent %s: cannot release the name's lease (it expires in %d s): %s",
                self.name,
                self.seconds,
                error,
            )

    def _renew_loop(self) -> None:
        while not self._stopping.wait(self.seconds / 3):
            try:
                self.renew()
            except redis.RedisError as error:
                logger.warning("agent %s: cannot renew the name's lease: %s", self.name, error)


@dataclass
class ExclusiveClaim:
    """The lock and the lease one worker holds; `token` is its instance."""

    lock: StateDirLock
    lease: NameLease

    @property
    def token(self) -> str:
        return self.lease.holder.token

    def release(self) -> None:
        self.lease.release()
        self.lock.release()


def claim_agent(client: redis.Redis, state_dir: Path, name: str) -> ExclusiveClaim:
    """Take the state directory's lock, then the name's lease; raise WorkerConflict if either
    is held by another worker (the lock is let go again when the lease is refused)."""
    seconds = lease_seconds()
    holder = this_worker(state_dir)
    lock = StateDirLock(state_dir, check_agent_name(name), holder)
    lock.acquire()
    lease = NameLease(client, name, holder, seconds)
    try:
        lease.acquire()
        lease.start_renewing()
    except BaseException:
        # A refusal, or a stop (SIGTERM) while taking it: nothing of this worker is kept.
        lease.release()
        lock.release()
        raise
    return ExclusiveClaim(lock, lease)
