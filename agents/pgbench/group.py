"""Several pgbench processes started together for one point, with a live summed timeline.

Each process runs in its own thread (agents/pgbench/process.py does the
waiting, stopping and reading); they are started back to back, so they
measure the same window. `LiveSum` turns their `-P` lines into one line per
second once every process has reported that second.
"""

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output
from agents.contract.reports.results import ProgressLine
from agents.pgbench.combine import sum_lines
from agents.pgbench.process import Finished

logger = logging.getLogger(__name__)

# --verbose-errors can print thousands of lines (notices), interleaved threads
# or a crashed server many unknown ones (messages); the full text stays in `stderr`.
MAX_NOTICES = 50


PROGRESS_PREFIX = "progress:"


def progress_lines(line: str) -> list[ProgressLine]:
    """The `-P` progress of one pgbench stderr line; none for other or unreadable lines."""
    if not line.startswith(PROGRESS_PREFIX):
        return []
    try:
        return parse_output(line)["progress"]
    except PgbenchParseError:
        logger.warning("unreadable progress line: %r", line)
        return []


def parsed_summary(finished: Finished) -> dict[str, Any]:
    """What pgbench printed, parsed; `parse_error` says why it could not be read."""
    try:
        return {"parse_error": None, **parse_output(finished.stdout + finished.stderr)}
    except PgbenchParseError as error:
        return {"parse_error": str(error)}


@dataclass(frozen=True)
class GroupMember:
    """One process of the group: its argv and what to do with each of its stderr lines."""

    argv: list[str]
    on_stderr_line: Callable[[str], None]


def run_together(
    members: Sequence[GroupMember], run_one: Callable[[list[str], Callable[[str], None]], Finished]
) -> list[Finished]:
    """Run every member at once with `run_one(argv, on_line)`; their Finished in member order.

    An exception in one member's thread is raised here after all have ended.
    """
    finished: list[Finished | None] = [None] * len(members)
    failures: list[BaseException] = []

    def target(number: int, member: GroupMember) -> None:
        try:
            finished[number] = run_one(member.argv, member.on_stderr_line)
        except BaseException as error:
            failures.append(error)

    threads = [
        threading.Thread(target=target, args=(number, member), daemon=True)
        for number, member in enumerate(members)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    if failures:
        raise failures[0]
    return [done for done in finished if done is not None]


class LiveSum:
    """Collects the processes' progress lines; emits each second's sum once all reported it."""

    def __init__(self, processes: int, emit: Callable[[ProgressLine], None]) -> None:
        self.processes = processes
        self.emit = emit
        self.pending: dict[int, dict[int, ProgressLine]] = {}
        self.lock = threading.Lock()

    def add(self, process: int, line: ProgressLine) -> None:
        second = round(line["t"])
        with self.lock:
            lines = self.pending.setdefault(second, {})
            lines[process] = line
            if len(lines) < self.processes:
                return
            del self.pending[second]
        self.emit(sum_lines(list(lines.values())))
