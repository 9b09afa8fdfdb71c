"""Reading a point's sampled transaction log while pgbench writes it: the live timeline.

pgbench writes its log through stdio, a few kilobytes at a time per thread
(at the lab's ~500 sampled lines a second, every half second or so). The
tail keeps each file open and reads its complete lines every POLL_S into
second bins (agents/pgbench/log_timeline.py) and emits a second once every
log file has passed it: a file's lines are in the order its thread completed
them, so such a second is complete and reads as the point's final timeline
will. A second some file has not passed MAX_LIVE_LAG_S after it ended (a
thread that logs rarely) is emitted as it stands; the point's final timeline,
read from the whole files once pgbench has ended, replaces it in the lab.

The tail only bins: percentiles are read after pgbench ends, so that work
stays out of the measured window. A chunk of plain lines is binned with array
operations (agents/pgbench/log_chunk.py), anything else line by line. A full
log is never tailed (that would take the CPU pgbench measures with).
"""

import logging
import os
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

from agents.contract.reports.results import ProgressLine
from agents.pgbench.log_chunk import add_columns_to_bins, plain_columns
from agents.pgbench.log_timeline import SecondBins
from agents.pgbench.txlog import TransactionLogError, add_to_bins, parse_line

logger = logging.getLogger(__name__)

# Each poll has a fixed cost (a directory listing, a read per file, a chunk's array
# operations) that a CPU busy with pgbench and the server makes several times dearer:
# polling every 2 s rather than every 0.5 s cut the tail's CPU by half (docs/benchmarks.md).
# The live timeline's seconds then arrive two or three seconds after they end.
POLL_S = 2.0
MAX_LIVE_LAG_S = 10.0


class LogTail:
    """Bins the per-transaction log files `log_dir/<prefix>*` of one point as they grow;
    `emit` gets each second once every file has passed it."""

    def __init__(
        self,
        log_dir: Path,
        prefix: str,
        start: float,
        sampling_rate: float,
        emit: Callable[[ProgressLine], None],
    ) -> None:
        self.log_dir = log_dir
        self.prefix = prefix
        self.bins = SecondBins(start=start)
        self.sampling_rate = sampling_rate
        self.emit = emit
        self.streams: dict[Path, BinaryIO] = {}
        self.partial: dict[Path, bytes] = {}
        self.lines_read: dict[Path, int] = {}
        # Per file, when the transaction of its last line completed (epoch seconds).
        self.last_completed: dict[Path, float] = {}
        self.emitted = 0
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="log-tail", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def stop(self) -> None:
        """Stop tailing (the point's timeline is then read from the whole files)."""
        self.stopping.set()
        self.thread.join()
        self.close()

    def close(self) -> None:
        """Close the log files the tail holds open."""
        for stream in self.streams.values():
            stream.close()
        self.streams.clear()

    def _run(self) -> None:
        while not self.stopping.wait(POLL_S):
            try:
                self.read_new_lines()
            except (TransactionLogError, OSError) as error:
                # Reading the whole files at the end meets it again, and the point
                # says why it has no percentiles or timeline (LogPlan.read).
                logger.warning("live timeline stopped at an unreadable log: %s", error)
                return
            self.emit_passed_seconds(time.time())

    def read_new_lines(self) -> None:
        """Bin the complete lines written since the last call."""
        names = sorted(name for name in os.listdir(self.log_dir) if name.startswith(self.prefix))
        for name in names:
            self._read_file(self.log_dir / name)

    def _read_file(self, path: Path) -> None:
        stream = self.streams.get(path)
        if stream is None:
            stream = self.streams[path] = open(path, "rb")
        chunk = stream.read()
        pending = self.partial.get(path, b"") + chunk
        cut = pending.rfind(b"\n") + 1
        complete_lines, self.partial[path] = pending[:cut], pending[cut:]
        columns = plain_columns(complete_lines) if complete_lines else None
        if columns is not None:
            add_columns_to_bins(self.bins, columns)
            self.lines_read[path] = self.lines_read.get(path, 0) + columns.lines
            self.last_completed[path] = columns.last_completed_at()
            return
        self._read_lines(path, complete_lines.split(b"\n")[:-1])

    def _read_lines(self, path: Path, complete: list[bytes]) -> None:
        """Bin lines one at a time: a chunk the fast path does not take (failures, skips,
        a line of another format: parse_line's rules and errors apply)."""
        # Counted in locals, stored once a chunk: a Path key costs more than a line.
        number, last = self.lines_read.get(path, 0), self.last_completed.get(path, 0.0)
        for line in complete:
            number += 1
            parsed = parse_line(path, number, line + b"\n")
            if parsed is not None:
                add_to_bins(self.bins, parsed)
                last = parsed.completed_at
        self.lines_read[path], self.last_completed[path] = number, last

    def emit_passed_seconds(self, now: float) -> None:
        """Emit the seconds every file has passed, or that ended MAX_LIVE_LAG_S before `now`."""
        all_passed = min(self.last_completed.values(), default=0.0)
        while True:
            end = self.bins.start + self.emitted + 1
            if end > now or (end > all_passed and end + MAX_LIVE_LAG_S > now):
                return
            self.emit(self.bins.line(self.emitted, self.sampling_rate))
            self.emitted += 1
