"""One measured point's transaction log, from pgbench's launch to its percentiles and timeline.

`start()` is called right before pgbench is launched: the timeline's seconds
count from then, and a sampled log is tailed for the live timeline
(agents/pgbench/log_tail.py). `finish(elapsed_s)` reads the whole files once
pgbench has ended and gives the point's percentiles and, unless the timeline
comes from `-P` (`workload.progress`), its per-second timeline.
"""

import time
from collections.abc import Callable
from pathlib import Path

from agents.contract.reports.latency import LatencyPercentiles
from agents.contract.reports.results import ProgressLine
from agents.pgbench.latency_log import LOG_FILE_PREFIX, LogPlan, log_files
from agents.pgbench.log_tail import LogTail
from agents.pgbench.log_timeline import whole_seconds


class PointLog:
    """The log `plan` asks for, written to `log_dir`; `emit_progress` gets its live
    seconds, or is None when the point's timeline comes from `-P`."""

    def __init__(
        self,
        plan: LogPlan,
        log_dir: Path,
        emit_progress: Callable[[ProgressLine], None] | None,
    ) -> None:
        self.plan = plan
        self.log_dir = log_dir
        self.emit_progress = emit_progress
        self.started_at = 0.0
        self.tail: LogTail | None = None

    @property
    def gives_timeline(self) -> bool:
        return self.emit_progress is not None and self.plan.mode != "none"

    def start(self) -> None:
        """pgbench is about to be launched: count seconds from now, tail a sampled log."""
        self.started_at = time.time()
        if self.emit_progress is not None and self.plan.tails_live:
            self.tail = LogTail(
                self.log_dir,
                LOG_FILE_PREFIX,
                self.started_at,
                self.plan.timeline_rate,
                self.emit_progress,
            )
            self.tail.start()

    def stop(self) -> None:
        """pgbench has ended (or failed to start): stop tailing."""
        if self.tail is not None:
            self.tail.stop()

    def finish(
        self, elapsed_s: float
    ) -> tuple[LatencyPercentiles | None, list[ProgressLine] | None]:
        """The point's percentiles (None without a log) and its timeline from the log
        (None when it comes from `-P`), over the `elapsed_s` pgbench ran."""
        self.stop()
        if self.plan.mode == "none":
            return None, None
        read = self.plan.read(log_files(self.log_dir), self.started_at, whole_seconds(elapsed_s))
        return read.percentiles, read.timeline if self.gives_timeline else None
