"""What agents say they run against what the lab believes (exactly once, docs/decisions.md).

A heartbeat names the job its agent runs and the finished jobs its ledger
holds that the lab has not confirmed. A run the lab holds as running on that
host whose job is neither is no longer run by anyone (the agent was killed
and came back, within the grace the reaper waits for silent agents): it fails
at once as `agent_restarted`, keeping what it stored. A heartbeat counts
only when it was sent after the run's last stored event (both stamped by the
agent's clock): the agent sends a heartbeat and the next job's first event
in that order, so a heartbeat stored after that event never speaks for it.

Settling runs after the heartbeats' transaction commits, in transactions of
its own: the heartbeats lock host rows, run events lock runs first.
"""

import logging
from dataclasses import dataclass
from datetime import datetime

from django.db import transaction
from django.db.models import Max

from agents.contract.errors import JobError
from agents.contract.reports.events import HeartbeatData
from agents.contract.wire import dispatch_key
from runs.agentlink import transport
from runs.models import Host, Run, RunEvent
from runs.services.runs import run_finish

logger = logging.getLogger(__name__)


@dataclass(frozen=True)
class AgentReport:
    """What one heartbeat says: the job running (and its run), the finished jobs the
    agent's ledger holds unconfirmed, and when the agent said it (its own clock)."""

    host_pk: int
    running: str | None
    job: str | None
    finished: frozenset[str]
    # A duet's second side's job: the agent runs two jobs at once (agents/duet.py).
    duet_job: str | None
    said_at: datetime


def agent_report(host_pk: int, data: HeartbeatData, said_at: datetime | None) -> AgentReport | None:
    """The heartbeat's report; None for an agent without a ledger (no `finished`) or
    a heartbeat without a usable time: nothing is compared then."""
    finished = data.get("finished")
    if not isinstance(finished, list) or said_at is None:
        return None
    job, duet_job = data.get("job"), data.get("duet_job")
    return AgentReport(
        host_pk,
        data.get("running"),
        job if isinstance(job, str) else None,
        frozenset(str(job_id) for job_id in finished),
        duet_job if isinstance(duet_job, str) else None,
        said_at,
    )


def run_job_id(run: Run) -> str:
    """The run's job id as its agent knows it: the spec's, or (a run dispatched before
    job ids) its dispatch."""
    job_id = run.spec.get("job_id") if isinstance(run.spec, dict) else None
    return job_id if isinstance(job_id, str) and job_id else dispatch_key(run.run_id, run.token)


def reconcile_after_commit(report: AgentReport | None) -> None:
    """Settle what `report` contradicts once the caller's transaction commits."""
    if report is not None:
        transaction.on_commit(lambda: runs_settle_not_running(report))


def runs_settle_not_running(report: AgentReport) -> list[int]:
    """Fail as `agent_restarted` the running runs of the report's host that its agent
    runs no more; return their ids."""
    settled = []
    running = Run.objects.filter(host_id=report.host_pk, status=Run.Status.RUNNING)
    for run in running.select_related("host"):
        if _agent_has(run, report) or not _said_after_last_event(run, report.said_at):
            continue
        error = JobError("agent_restarted", _restarted_message(run, report))
        with transaction.atomic():
            if run_finish(
                run, Run.Status.FAILED, error.as_dict(), from_states=(Run.Status.RUNNING,)
            ):
                Host.objects.filter(pk=run.host_id, current_run=run).update(current_run=None)
                settled.append(run.pk)
    if settled:
        logger.warning("runs %s failed: their agent runs them no more", settled)
    return settled


def _agent_has(run: Run, report: AgentReport) -> bool:
    job = run_job_id(run)
    if report.job is None and report.running == run.run_id:
        return True
    return job in (report.job, report.duet_job) or job in report.finished


def _said_after_last_event(run: Run, said_at: datetime) -> bool:
    last = RunEvent.objects.filter(run=run).aggregate(last=Max("ts"))["last"]
    return last is None or said_at > last


def _restarted_message(run: Run, report: AgentReport) -> str:
    now = f"runs run {report.running}" if report.running else "runs nothing"
    return (
        f"agent {run.host.name} {now} and has not finished job {run_job_id(run)} "
        "(it was stopped mid-run and came back); the points stored are kept"
    )


def job_settled_after_commit(run: Run) -> None:
    """Tell the run's agent, once the caller commits, that the lab stored its job's result."""
    job_id = run_job_id(run)
    transaction.on_commit(lambda: transport.confirm_settled(job_id))
