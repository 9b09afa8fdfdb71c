"""Dispatching a run: its job leaves for the agent's queue once the transaction commits.

Each dispatch has a fresh token: the agent's claim and the lab's cancel flag
name the dispatch (run id and token), and events carrying another token are
dropped. The transport (runs.agentlink.transport) puts the job on the wire.
"""

import logging
import secrets
import uuid
from functools import partial
from typing import cast

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from agents.contract.duet import DUET_VERSION, DuetDocument
from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec
from agents.contract.wire import agent_queue, job_id_of
from runs.agentlink import transport
from runs.models import Run
from runs.services.uploads import source_upload_ready

logger = logging.getLogger(__name__)


def new_dispatch() -> tuple[str, str]:
    """A fresh dispatch token and Celery task id."""
    return secrets.token_urlsafe(24), str(uuid.uuid4())


def run_dispatch(run: Run, spec: JobSpec) -> None:
    """Give the run its spec, token, job id and task id, and send the job once the
    transaction commits. The job id stays the same when the job is sent again
    (`run_redispatch`): the agent's ledger answers a job it already ran."""
    source_upload_ready(spec)
    run.token, run.celery_task_id = new_dispatch()
    job_id = job_id_of(run.run_id, secrets.token_urlsafe(12))
    run.spec = {**spec, "run_id": run.run_id, "token": run.token, "job_id": job_id}
    run.queued_at = run.dispatched_at = timezone.now()
    run.save(update_fields=["token", "celery_task_id", "spec", "queued_at", "dispatched_at"])
    _send_halves(run, run.spec, run.celery_task_id)


def duet_dispatch(runs: list[Run], specs: list[JobSpec], key: str, swapped: bool) -> None:
    """Give each side's run its spec, token and job id as `run_dispatch` does, and send the
    two as one duet job (agents/duet.py) to their host once the transaction commits. Both
    runs carry the duet's task id: the job waits in the queue for both, and each side is
    claimed and cancelled by its own dispatch. `swapped` gives the first side the second
    half of the host's CPUs."""
    task_id = str(uuid.uuid4())
    now = timezone.now()
    for run, spec in zip(runs, specs, strict=True):
        source_upload_ready(spec)
        run.token, run.celery_task_id = secrets.token_urlsafe(24), task_id
        job_id = job_id_of(run.run_id, secrets.token_urlsafe(12))
        run.spec = {**spec, "run_id": run.run_id, "token": run.token, "job_id": job_id}
        run.queued_at = run.dispatched_at = now
        run.save(update_fields=["token", "celery_task_id", "spec", "queued_at", "dispatched_at"])
    _send_duet(runs, key, swapped, task_id)


def _send_duet(runs: list[Run], key: str, swapped: bool, task_id: str) -> None:
    """After the commit: the duet document carrying `runs`' specs to their host."""
    first = runs[0]
    document: DuetDocument = {
        "duet": DUET_VERSION,
        "key": key,
        "run_id": first.run_id,
        "token": first.token,
        "swapped": swapped,
        "sides": [cast(JobSpec, run.spec) for run in runs],
    }
    host_name, secret = first.host.name, first.host.secret
    transport.send_after_commit(
        first.pk, "duet's job", lambda: transport.send_duet(document, host_name, task_id, secret)
    )


def _duet_partner(run: Run) -> Run | None:
    """The other side of the duet job `run` was sent in, still queued; None for a run of no
    duet (or whose other side left the queue)."""
    if run.round is None or not run.experiment.duet or not run.celery_task_id:
        return None
    others = Run.objects.filter(
        experiment_id=run.experiment_id,
        round=run.round,
        status=Run.Status.QUEUED,
        celery_task_id=run.celery_task_id,
    )
    return others.exclude(pk=run.pk).select_related("host").first()


def _duet_redispatch(runs: list[Run]) -> bool:
    """Both sides of a lost duet sent again as one, each with a new token, its old dispatch
    cancelled; False (nothing changed) when either side changed meanwhile."""
    task_id = str(uuid.uuid4())
    old_tokens = [run.token for run in runs]
    with transaction.atomic():
        for run, old_token in zip(runs, old_tokens, strict=True):
            run.token = secrets.token_urlsafe(24)
            run.spec = {**run.spec, "token": run.token}
            changed = Run.objects.filter(
                pk=run.pk, status=Run.Status.QUEUED, token=old_token
            ).update(
                token=run.token,
                celery_task_id=task_id,
                spec=run.spec,
                dispatched_at=timezone.now(),
                dispatches=F("dispatches") + 1,
            )
            if not changed:
                transaction.set_rollback(True)
                return False
        for run, old_token in zip(runs, old_tokens, strict=True):
            transport.send_after_commit(
                run.pk,
                "old dispatch's cancel flag",
                partial(transport.request_cancel, run.run_id, old_token),
            )
        round_number = runs[0].round or 1
        key = f"experiment-{runs[0].experiment_id}-round-{round_number}-run-{runs[0].pk}-again"
        _send_duet(runs, key, round_number % 2 == 0, task_id)
    logger.warning("runs %s: their duet's job was lost; sent again", [run.pk for run in runs])
    return True


def _send_halves(run: Run, spec: JobSpec, task_id: str) -> None:
    """After the commit: the job to the run's host, and with a client host, the same job as
    its client half to the client host (one token, so one cancel flag stops both)."""
    host_name, secret = run.host.name, run.host.secret
    transport.send_after_commit(
        run.pk, "job", lambda: transport.send_job(spec, host_name, task_id, secret)
    )
    client = run.client_host
    if client is None:
        return
    client_spec: JobSpec = {**spec, "network": {**spec["network"], "role": "client"}}
    client_spec["network"]["peer"] = host_name
    client_name, client_secret = client.name, client.secret
    transport.send_after_commit(
        run.pk,
        "client half's job",
        lambda: transport.send_job(client_spec, client_name, f"{task_id}-client", client_secret),
    )


def run_redispatch(run: Run) -> bool:
    """Send a queued run's job again with a new token; False when the run changed meanwhile.

    The old dispatch is cancelled, so a copy of its job turning up later is
    dropped by the agent. `queued_at` stays when the run was queued; `dispatched_at`
    says when the job was sent again. A side of a duet whose other side is queued in
    the same lost job is sent again with it, as one duet.
    """
    partner = _duet_partner(run)
    if partner is not None:
        return _duet_redispatch(sorted([run, partner], key=lambda side: side.cell))
    old_token, (token, task_id) = run.token, new_dispatch()
    dispatched: JobSpec = run.spec  # run_dispatch stored the checked spec
    spec: JobSpec = {**dispatched, "token": token}
    try:
        source_upload_ready(spec)
    except JobError as error:  # its build keeps it while runs exist: only removed by hand
        logger.error("run %s: %s; the agent will fail the build at fetch", run.pk, error)
    with transaction.atomic():
        changed = Run.objects.filter(pk=run.pk, status=Run.Status.QUEUED, token=old_token).update(
            token=token,
            celery_task_id=task_id,
            spec=spec,
            dispatched_at=timezone.now(),
            dispatches=F("dispatches") + 1,
        )
        if changed:
            transport.send_after_commit(
                run.pk,
                "old dispatch's cancel flag",
                lambda: transport.request_cancel(run.run_id, old_token),
            )
            _send_halves(run, spec, task_id)
    if changed:
        logger.warning(
            "run %s: its job is neither waiting in queue %s nor claimed; sent again",
            run.pk,
            agent_queue(run.host.name),
        )
    return bool(changed)
