"""Running one pgbench process: live stderr lines, cooperative stop, exact argv, its CPU time.

pgbench has no SIGINT handler (docs/pgbench.md#exit-codes-aborts-and-signals): SIGINT
or SIGTERM lose the summary. A `-T` run stopped with SIGALRM ends gracefully and prints
its summary, so a cancel sends SIGALRM to `-T` runs and SIGKILL to `-t` runs:
pgbench is its sandbox namespace's init (agents/sandbox.py), which gets only the
signals it handles, and SIGKILL, from outside; SIGTERM ended it the same way.

The process is reaped with wait4 by one waiter thread (never by Popen), so its
own CPU time (user + system, all its threads) is known exactly: that is what
tells a saturated load generator from a busy host.
"""

import contextlib
import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import IO, Any, Protocol

from agents.sandbox import Started

logger = logging.getLogger(__name__)

STOP_GRACE_S = 10.0


@dataclass
class Finished:
    """What a pgbench process left behind."""

    argv: list[str]
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    stopped_early: bool
    cpu_s: float | None
    # Context switches of pgbench (and its threads) from the same rusage: (voluntary, involuntary).
    switches: tuple[int, int] | None = None
    # When pgbench was launched and when it was reaped, in seconds since the epoch on this
    # host's clock: its window lies within them (a duet's two sides compare theirs).
    started_epoch: float | None = None
    ended_epoch: float | None = None

    def as_fields(self) -> dict[str, object]:
        """The point result's command fields (agents/contract/reports/results.py)."""
        return {
            "argv": self.argv,
            "exit_code": self.exit_code,
            "seconds": self.seconds,
            "stopped_early": self.stopped_early,
            "pgbench_cpu_s": self.cpu_s,
            "pgbench_voluntary_switches": self.switches[0] if self.switches else None,
            "pgbench_involuntary_switches": self.switches[1] if self.switches else None,
            "started_epoch": self.started_epoch,
            "ended_epoch": self.ended_epoch,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


class Launcher(Protocol):
    """Starts pgbench (as the job's OS user, in its sandbox) with Popen's keyword arguments."""

    def __call__(self, argv: list[str], **popen_kwargs: Any) -> Started: ...


class _Reaper:
    """Waits for one child with wait4 and keeps its exit code and CPU seconds."""

    def __init__(self, process: "subprocess.Popen[Any]") -> None:
        self.process = process
        self.cpu_s: float | None = None
        self.switches: tuple[int, int] | None = None
        self.done = threading.Event()
        self._thread = threading.Thread(target=self._reap, daemon=True)
        self._thread.start()

    def _reap(self) -> None:
        try:
            _, status, usage = os.wait4(self.process.pid, 0)
        except ChildProcessError:
            logger.exception("pgbench pid %s was reaped elsewhere", self.process.pid)
            self.process.returncode = -1
        else:
            self.cpu_s = round(usage.ru_utime + usage.ru_stime, 4)
            self.switches = (usage.ru_nvcsw, usage.ru_nivcsw)
            self.process.returncode = os.waitstatus_to_exitcode(status)
        finally:
            self.done.set()

    def wait(self, timeout: float | None) -> bool:
        """True once the process has ended and was reaped."""
        return self.done.wait(timeout)


def run_pgbench(
    argv: list[str],
    *,
    launch: Launcher,
    on_stderr_line: Callable[[str], None],
    should_stop: Callable[[], bool],
    timed: bool,
) -> Finished:
    """Run pgbench to completion, or until should_stop() says so (checked every second).

    `launch` starts it where it runs (PointContext.start_pgbench: the job's OS user, its
    sandbox, the workload's connection variables). The process waited for may be
    the sandbox around pgbench: its CPU time includes pgbench's, which it reaps,
    and signals go to pgbench's own pid.
    """
    started = time.monotonic()
    started_epoch = time.time()
    launched = launch(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
    process = launched.process
    stdout_chunks: list[str] = []
    stderr_lines: list[str] = []
    readers = [
        threading.Thread(target=_collect, args=(process.stdout, stdout_chunks.append), daemon=True),
        threading.Thread(
            target=_collect,
            args=(process.stderr, _tee(stderr_lines.append, on_stderr_line)),
            daemon=True,
        ),
    ]
    for reader in readers:
        reader.start()
    reaper = _Reaper(process)
    stopped_early = _wait(launched.pid, reaper, should_stop, timed)
    for reader in readers:
        reader.join()
    return Finished(
        argv=argv,
        exit_code=process.returncode,
        stdout="".join(stdout_chunks),
        stderr="".join(stderr_lines),
        seconds=round(time.monotonic() - started, 3),
        stopped_early=stopped_early,
        cpu_s=reaper.cpu_s,
        switches=reaper.switches,
        started_epoch=round(started_epoch, 3),
        ended_epoch=round(time.time(), 3),
    )


def _wait(pid: int, reaper: _Reaper, should_stop: Callable[[], bool], timed: bool) -> bool:
    """Wait for pgbench (`pid`); stop it when asked. Returns True when it was stopped early."""
    try:
        while not reaper.wait(timeout=1.0):
            if should_stop():
                _stop(pid, reaper, timed)
                return True
        return False
    except BaseException:
        _stop(pid, reaper, timed)
        raise


def _stop(pid: int, reaper: _Reaper, timed: bool) -> None:
    """SIGALRM for -T runs (summary kept), SIGKILL otherwise or if it lingers."""
    first = signal.SIGALRM if timed else signal.SIGKILL
    for sig in (first, signal.SIGKILL):
        if reaper.done.is_set():
            return
        logger.info("sending %s to pgbench pid %s", sig.name, pid)
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)
        if reaper.wait(timeout=STOP_GRACE_S):
            return


def _collect(stream: IO[str], sink: Callable[[str], None]) -> None:
    for line in stream:
        sink(line)
    stream.close()


def _tee(*sinks: Callable[[str], None]) -> Callable[[str], None]:
    def deliver(line: str) -> None:
        for sink in sinks:
            try:
                sink(line)
            except Exception:
                logger.exception("handling a pgbench stderr line failed: %r", line)

    return deliver
