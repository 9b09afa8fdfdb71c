"""Silent agents: their running runs fail as `agent_lost`, finished points kept."""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from agents.contract.errors import JobError
from runs.models import Host, Run
from runs.services.runs import run_finish

logger = logging.getLogger(__name__)


def hosts_mark_offline_and_fail_runs(now: datetime | None = None) -> list[int]:
    """Fail the running runs of hosts silent for longer than AGENT_LOST_GRACE_S.

    A run counts as silent when neither its host's heartbeat nor its own
    events arrived within the grace period. Returns the ids of the runs failed.
    Queued runs stay queued: their jobs wait in the agent's queue.
    """
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
                failed.append(run.pk)
    if failed:
        logger.warning("runs %s failed: their agents went silent", failed)
    return failed
