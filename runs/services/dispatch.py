"""Dispatching a run: its job leaves for the agent's queue once the transaction commits.

Each dispatch has a fresh token: the agent's claim and the lab's cancel flag
name the dispatch (run id and token), and events carrying another token are
dropped. The transport (runs.transport) puts the job on the wire.
"""

import secrets
import uuid

from django.db import transaction
from django.utils import timezone

from agents.contract.spec import JobSpec
from runs import transport
from runs.models import Run


def run_dispatch(run: Run, spec: JobSpec) -> None:
    """Give the run its spec, token and task id, and send the job once the transaction commits."""
    run.token = secrets.token_urlsafe(24)
    run.celery_task_id = str(uuid.uuid4())
    run.spec = {**spec, "run_id": run.run_id, "token": run.token}
    run.queued_at = timezone.now()
    run.save(update_fields=["token", "celery_task_id", "spec", "queued_at"])
    job, host_name, task_id, secret = run.spec, run.host.name, run.celery_task_id, run.host.secret
    transaction.on_commit(lambda: transport.send_job(job, host_name, task_id, secret))
