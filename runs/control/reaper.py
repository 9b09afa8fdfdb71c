"""The control worker's reaper: every REAPER_INTERVAL_S it settles the runs nothing will finish.

A running run whose agent went silent fails as `agent_lost` (its finished
points kept); a queued run whose job Redis lost is sent again or fails
(runs.services.hosts.liveness); event rows past their retention are deleted
(runs.services.jobs.events.events_purge); the timeline digests of running runs that
got events are rebuilt, at most once a minute each (runs.timelines.store), so
their pages only read; an adaptive experiment whose round ended without its step
being taken (the task's message lost) takes it (runs.services.adaptive), a
bisection whose step ended moves on (runs.bisection.services), and an alert whose
confirming A/B ended is concluded (runs.services.history.confirm).
"""

import logging
import threading

from django.conf import settings

from runs.bisection.services import bisections_advance_due
from runs.control.loop import run_until_stopped
from runs.services import events_purge, runs_fail_agent_lost, runs_recover_lost_jobs
from runs.services.adaptive import adaptive_steps_due
from runs.services.capacity import capacity_steps_due
from runs.services.history.confirm import alert_confirmations_due
from runs.timelines.store import digests_refresh_running

logger = logging.getLogger(__name__)


class Reaper:
    """One pass (`reap`) or a loop (`run_forever`) over the runs of silent agents and lost jobs."""

    def __init__(self, interval_s: float | None = None):
        self.interval_s = settings.REAPER_INTERVAL_S if interval_s is None else interval_s

    def reap(self) -> None:
        runs_fail_agent_lost()
        runs_recover_lost_jobs()
        events_purge()
        digests_refresh_running()
        adaptive_steps_due()
        capacity_steps_due()
        bisections_advance_due()
        alert_confirmations_due()

    def run_forever(self, stop: threading.Event) -> None:
        """Reap now and every `interval_s` until `stop` is set."""
        logger.info("reaping silent agents' runs and lost jobs every %s s", self.interval_s)
        run_until_stopped("reaper", self.reap, stop, pause_s=self.interval_s)
        logger.info("reaper stopped")
