"""Running one pgbench process: live stderr lines, cooperative stop, exact argv.

pgbench has no SIGINT handler (pgbench-notes section 6): SIGINT or SIGTERM
lose the summary. A `-T` run stopped with SIGALRM ends gracefully and prints
its summary, so a cancel sends SIGALRM to `-T` runs and SIGTERM to `-t` runs.
"""

import logging
import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from agents.postgres.osuser import SubprocessKwargs

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

    def as_fields(self) -> dict[str, object]:
        """The point result's command fields (agents/contract/results.py)."""
        return {
            "argv": self.argv,
            "exit_code": self.exit_code,
            "seconds": self.seconds,
            "stopped_early": self.stopped_early,
            "stdout": self.stdout,
            "stderr": self.stderr,
        }


def run_pgbench(
    argv: list[str],
    *,
    cwd: Path,
    process_kwargs: SubprocessKwargs,
    on_stderr_line: Callable[[str], None],
    should_stop: Callable[[], bool],
    timed: bool,
) -> Finished:
    """Run pgbench to completion, or until should_stop() says so (checked every second).

    `process_kwargs` carry the environment and the OS user (OsUser.subprocess_kwargs).
    """
    started = time.monotonic()
    process = subprocess.Popen(
        argv,
        cwd=cwd,
        **process_kwargs,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        bufsize=1,
        start_new_session=True,
    )
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
    stopped_early = _wait(process, should_stop, timed)
    for reader in readers:
        reader.join()
    return Finished(
        argv=argv,
        exit_code=process.returncode,
        stdout="".join(stdout_chunks),
        stderr="".join(stderr_lines),
        seconds=round(time.monotonic() - started, 3),
        stopped_early=stopped_early,
    )


def _wait(process: subprocess.Popen, should_stop: Callable[[], bool], timed: bool) -> bool:
    """Wait for the process; stop it when asked. Returns True when it was stopped early."""
    try:
        while True:
            try:
                process.wait(timeout=1.0)
                return False
            except subprocess.TimeoutExpired:
                if should_stop():
                    _stop(process, timed)
                    return True
    except BaseException:
        _stop(process, timed)
        raise


def _stop(process: subprocess.Popen, timed: bool) -> None:
    """SIGALRM for -T runs (summary kept), SIGTERM otherwise; SIGKILL if it lingers."""
    first = signal.SIGALRM if timed else signal.SIGTERM
    for sig, grace in ((first, STOP_GRACE_S), (signal.SIGKILL, STOP_GRACE_S)):
        if process.poll() is not None:
            return
        logger.info("sending %s to pgbench pid %s", sig.name, process.pid)
        os.kill(process.pid, sig)
        try:
            process.wait(timeout=grace)
            return
        except subprocess.TimeoutExpired:
            continue


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
