"""Runs nothing will finish: silent agents and jobs Redis lost.

- A running run whose agent went silent fails as `agent_lost`, finished points kept.
- A queued run whose job Redis no longer holds (`runs_recover_lost_jobs`) is
  sent once more, then fails as `job_lost`.
"""

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents.contract.errors import JobError
from runs.agentlink import transport
from runs.models import Host, Run
from runs.services.jobs.dispatch import run_redispatch
from runs.services.runs import run_finish

logger = logging.getLogger(__name__)

# The consumer stores events within milliseconds; an older one waiting means it is behind.
EVENTS_LAG_TOLERANCE_S = 5.0


def runs_fail_agent_lost(now: datetime | None = None) -> list[int]:
    """Fail the running runs of hosts silent for longer than AGENT_LOST_GRACE_S.

    A run counts as silent when neither its host's heartbeat nor its own
    events arrived within the grace period. Its cancel flag is set too: a client
    host's half of the run, still measuring against a server that is gone, stops on
    it, and the silent agent drops the job if it comes back. Returns the ids of the
    runs failed.
    Queued runs stay queued: their jobs wait in the agent's queue. Nothing is
    judged while the event consumer is behind (`events_caught_up`): the events
    that would show the agent alive may be waiting in the stream.
    """
    if not events_caught_up():
        return []
    now = now or timezone.now()
    grace = settings.AGENT_LOST_GRACE_S
    cutoff = now - timedelta(seconds=grace)
    silent = Run.objects.filter(status=Run.Status.RUNNING).filter(
        Q(host__last_seen__lt=cutoff) | Q(host__last_seen__isnull=True),
        Q(last_event_at__lt=cutoff) | Q(last_event_at__isnull=True),
    )
    failed = []
    for run in silent.select_related("host"):
        message = f"agent {run.host.name} sent nothing for more than {grace} s"
        error = JobError("agent_lost", message).as_dict()
        with transaction.atomic():
            if run_finish(
                run, Run.Status.FAILED, error, when=now, from_states=(Run.Status.RUNNING,)
            ):
                Host.objects.filter(pk=run.host_id, current_run=run).update(current_run=None)
                run_id, token = run.run_id, run.token
                transport.send_after_commit(
                    run.pk, "cancel flag", partial(transport.request_cancel, run_id, token)
                )
                failed.append(run.pk)
    if failed:
        logger.warning("runs %s failed: their agents went silent", failed)
    return failed


def events_caught_up() -> bool:
    """Whether the event consumer has stored what agents sent up to a few seconds ago.

    After the control worker was down, the reaper would otherwise find every
    running run silent before the consumer has stored the backlog of its events.
    """
    waited = transport.events_backlog_age_s(settings.BENCHLAB_EVENTS_STREAM)
    if waited > EVENTS_LAG_TOLERANCE_S:
        logger.info("events have waited %.0f s in the stream: silence is judged later", waited)
        return False
    return True


# A job is sent at most this often: once, and once more after Redis lost it.
MAX_DISPATCHES = 2
# An agent takes a job off its queue and claims it within milliseconds; a job
# missing twice this far apart is gone, not in flight.
LOST_JOB_RECHECK_S = 2.0


@dataclass
class JobRecovery:
    """What `runs_recover_lost_jobs` did, by run id."""

    redispatched: list[int] = field(default_factory=list)
    failed: list[int] = field(default_factory=list)


def runs_recover_lost_jobs(
    now: datetime | None = None, recheck_after_s: float = LOST_JOB_RECHECK_S
) -> JobRecovery:
    """Send again, or fail, the queued runs whose jobs are gone from Redis.

    A run whose job was sent (`dispatched_at`) over JOB_LOST_AFTER_S ago has its job
    waiting in its agent's queue or claimed by the agent. Neither means the job is lost:
    Redis lost its data (a restart without persistence, FLUSHALL), or an agent
    took the job off its queue and died before claiming it. Such a run is sent
    again with a new token, the old dispatch cancelled so that a copy turning
    up later is dropped by the agent; lost again, it fails as `job_lost`. A
    claimed run still queued whose agent went silent fails as `agent_lost`.
    """
    now = now or timezone.now()
    cutoff = now - timedelta(seconds=settings.JOB_LOST_AFTER_S)
    queued = Run.objects.filter(status=Run.Status.QUEUED, dispatched_at__lt=cutoff)
    runs = list(queued.select_related("host"))
    recovery = JobRecovery()
    missing = []
    waiting = _waiting_task_ids(runs)
    for run in runs:
        if transport.dispatch_claimed(run.run_id, run.token):
            _fail_if_agent_silent(run, now, recovery)
        elif run.celery_task_id not in waiting[run.host.name]:
            missing.append(run)
    if missing:
        time.sleep(recheck_after_s)
        waiting = _waiting_task_ids(missing)
    for run in missing:
        claimed = transport.dispatch_claimed(run.run_id, run.token)
        if not claimed and run.celery_task_id not in waiting[run.host.name]:
            _recover(run, recovery)
    return recovery


def _waiting_task_ids(runs: list[Run]) -> dict[str, set[str]]:
    """The jobs waiting in the queues of these runs' hosts: each queue read once a pass."""
    return {name: transport.waiting_task_ids(name) for name in {run.host.name for run in runs}}


def _recover(run: Run, recovery: JobRecovery) -> None:
    if run.dispatches < MAX_DISPATCHES:
        if run_redispatch(run):
            recovery.redispatched.append(run.pk)
        return
    message = (
        f"the job of run {run.pk} was lost {run.dispatches} times: it is neither waiting in "
        f"queue {transport.agent_queue(run.host.name)} nor claimed by agent {run.host.name} "
        "(Redis lost its data, or the agent stopped before it claimed the job)"
    )
    if _fail_queued(run, JobError("job_lost", message)):
        recovery.failed.append(run.pk)


def _fail_if_agent_silent(run: Run, now: datetime, recovery: JobRecovery) -> None:
    grace = settings.AGENT_LOST_GRACE_S
    last_seen = run.host.last_seen
    if last_seen is not None and now - last_seen <= timedelta(seconds=grace):
        return
    if not events_caught_up():
        return
    message = f"agent {run.host.name} claimed the job, then sent nothing for more than {grace} s"
    if _fail_queued(run, JobError("agent_lost", message)):
        recovery.failed.append(run.pk)


def _fail_queued(run: Run, error: JobError) -> bool:
    """queued (still this dispatch) -> failed with `error`."""
    with transaction.atomic():
        locked = Run.objects.select_for_update(no_key=True)
        if not locked.filter(pk=run.pk, token=run.token).exists():
            logger.info("run %s: sent again meanwhile, not failed", run.pk)
            return False
        failed = run_finish(
            run, Run.Status.FAILED, error.as_dict(), from_states=(Run.Status.QUEUED,)
        )
    if failed:
        logger.warning("run %s failed: %s", run.pk, error.message)
    return failed
