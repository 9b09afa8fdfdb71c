"""Runs: cancel, re-run, and the compare-and-set state changes everything else uses."""

import logging
from collections.abc import Mapping
from datetime import datetime
from functools import partial
from typing import Any

from django.contrib.auth.models import User
from django.db import transaction
from django.utils import timezone

from agents.contract.errors import Cancelled
from benchlab.celery import app
from runs.agentlink import transport
from runs.agentlink.transport import CONTROL_QUEUE
from runs.models import Experiment, Host, Run, imported_file
from runs.services.access.permissions import AnyUser
from runs.services.adaptive import adaptive_step_after_commit
from runs.services.capacity import capacity_step_after_commit
from runs.services.errors import Conflict
from runs.services.history.series import occurrence_run_finished
from runs.services.jobs.dispatch import run_dispatch
from runs.services.limits import require_queue_room
from runs.services.retry import retry_on_conflict
from runs.services.validation import check_job_spec

logger = logging.getLogger(__name__)

DIGEST_TASK = "runs.tasks.digest_build"
# What the experiment of another user's re-run does not take from the original's.
NOT_COPIED = {"id", "name", "description", "created_by", "created_at", "storage_layouts"}
NOT_COPIED |= {"repeats", "adaptive", "adaptive_state"}


def run_mark_running(run: Run, when: datetime | None = None) -> bool:
    """queued -> running; False (and nothing changed) when the run was not queued."""
    changed = Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED).update(
        status=Run.Status.RUNNING, started_at=when or timezone.now()
    )
    if not changed:
        logger.info("run %s: not queued any more, stays %s", run.pk, _status_of(run))
    return bool(changed)


def run_finish(
    run: Run,
    status: str,
    error: Mapping[str, Any] | None = None,
    when: datetime | None = None,
    from_states: tuple[str, ...] = Run.ACTIVE_STATES,
    snapshot: Mapping[str, object] | None = None,
) -> bool:
    """`from_states` (queued or running) -> a final state with its error and `snapshot` fields.

    False, and nothing changed, when the run is in none of `from_states`:
    final states never change.
    """
    error = error or {}
    changed = Run.objects.filter(pk=run.pk, status__in=from_states).update(
        status=status,
        finished_at=when or timezone.now(),
        error_code=error.get("code") or "",
        error_category=error.get("category") or "",
        error_field=error.get("field") or "",
        error_message=error.get("message") or "",
        **(snapshot or {}),
    )
    if changed:
        logger.info("run %s: %s %s", run.pk, status, error.get("code") or "")
        occurrence_run_finished(run)
        adaptive_step_after_commit(run)
        capacity_step_after_commit(run)
        digest_build_after_commit(run)
    else:
        logger.info("run %s: is %s, not made %s", run.pk, _status_of(run), status)
    return bool(changed)


def digest_build_after_commit(run: Run) -> None:
    """Have the control worker build the final run's timeline digest once the caller
    commits (runs.tasks.digest_build): when the run ends, and again when an event
    arrives for it later, so that page views only read it (docs/decisions.md). Not sent
    while Redis does not answer: the run's first page view builds it then."""
    transport.send_after_commit(run.pk, "digest task", partial(digest_build_send, run.pk))


def digest_build_send(run_pk: int) -> None:
    """Send the control worker the task that builds the run's digest."""
    app.send_task(DIGEST_TASK, args=[run_pk], queue=CONTROL_QUEUE)


def _status_of(run: Run) -> str:
    return Run.objects.filter(pk=run.pk).values_list("status", flat=True).first() or "gone"


@retry_on_conflict
def run_cancel(run: Run, user: AnyUser) -> Run:
    """Cancel a queued or running run at once, whether or not its agent answers.

    The flag the agent polls is set too (after the commit): an agent running the
    job stops pgbench and removes its cluster, one that holds the job drops it,
    and one that is gone cleans up when it starts again. What the agent measured
    and sends afterwards is kept (a late result, runs.services.jobs.events). Raises
    Conflict for a final run.
    """
    with transaction.atomic():
        cancelled = run_finish(
            run, Run.Status.CANCELLED, Cancelled(f"cancelled by {user}").as_dict()
        )
        if not cancelled:
            raise Conflict(f"run {run.pk} is already {_status_of(run)}")
        Host.objects.filter(current_run=run).update(current_run=None)
        run_id, token = run.run_id, run.token
        transport.send_after_commit(
            run.pk, "cancel flag", lambda: transport.request_cancel(run_id, token)
        )
    logger.info("run %s: cancelled by %s", run.pk, user)
    run.refresh_from_db()
    return run


def experiment_cancel(experiment: Experiment, user: AnyUser) -> list[Run]:
    """Cancel every queued or running run of the experiment (`run_cancel`); an adaptive
    experiment then queues no more rounds. Runs that end meanwhile are left as they ended.
    Returns the runs cancelled."""
    cancelled = []
    for run in experiment.runs.filter(status__in=(Run.Status.QUEUED, Run.Status.RUNNING)):
        try:
            cancelled.append(run_cancel(run, user))
        except Conflict:
            logger.info("run %s: ended before the experiment's cancel reached it", run.pk)
    logger.info("experiment %s: %d runs cancelled by %s", experiment.pk, len(cancelled), user)
    return cancelled


@retry_on_conflict
def run_rerun(run: Run, user: User | None) -> Run:
    """Queue a new run with the same definition (the original's spec), linked by `rerun_of`.

    It goes into the run's experiment when `user` owns that experiment (or is None,
    the lab itself), else into a new experiment of `user`'s (`_experiment_of_rerun`).

    Raises Conflict for an imported run (there is no job to send again) and when
    the run's host is not approved (any more): only an approved agent shares a
    secret with the lab.
    """
    file_name = imported_file(run)
    if file_name is not None:
        raise Conflict(
            f"run {run.pk} was imported from {file_name}: there is no job to run again; "
            "schedule an experiment to measure it in the lab"
        )
    if not run.host.is_approved:
        raise Conflict(f"host {run.host.name} is {run.host.enrollment}; approve it to run again")
    definition = {k: v for k, v in run.spec.items() if k not in ("run_id", "token", "job_id")}
    spec, _notes = check_job_spec(definition)
    with transaction.atomic():
        require_queue_room(user, 1)
        experiment = run.experiment
        if user is not None and user.pk != experiment.created_by_id:
            experiment = _experiment_of_rerun(run, user)
        in_place = experiment.pk == run.experiment_id
        rerun = Run.objects.create(
            experiment=experiment,
            host=run.host,
            build=run.build,
            config_profile=run.config_profile,
            workload=run.workload,
            storage_data=run.storage_data,
            storage_wal=run.storage_wal,
            position=run.position if in_place else 0,
            cell=run.cell if in_place else 0,
            round=run.round if in_place or run.round is None else 1,
            rerun_of=run,
            created_by=user,
            client_host=run.client_host,
        )
        run_dispatch(rerun, spec)
    logger.info(
        "run %s: re-run of %s queued by %s in experiment %s",
        rerun.pk,
        run.pk,
        user,
        rerun.experiment_id,
    )
    return rerun


def _experiment_of_rerun(run: Run, user: User) -> Experiment:
    """A new experiment of `user`'s holding only the re-run of `run`, with its definition.

    A re-run goes into its experiment for that experiment's owner only: in rounds a
    re-run replaces the round it repeats in its cell's statistics (runs/analysis/cells.py),
    which nobody else may change. It is one cell of one round (a run in rounds), or
    every repeat (in blocks); never adaptive.
    """
    original = run.experiment
    copied = {
        field.attname: getattr(original, field.attname)
        for field in Experiment._meta.concrete_fields
        if field.name not in NOT_COPIED
    }
    experiment = Experiment.objects.create(
        **copied,
        name=f"Re-run of run #{run.pk}",
        description=f"Run #{run.pk} of experiment #{original.pk} ({original.name}) again.",
        created_by=user,
        storage_layouts=[{"data": run.storage_data, "wal": run.storage_wal or None}],
        repeats=1 if run.round is not None else original.repeats,
    )
    experiment.hosts.set([run.host])
    experiment.builds.set([run.build])
    experiment.config_profiles.set([run.config_profile])
    experiment.workloads.set([run.workload])
    return experiment
