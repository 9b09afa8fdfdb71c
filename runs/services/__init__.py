"""Every write the product does. Views, viewsets and tasks call these.

Errors: `agents.contract.errors.JobError` for input the agent would refuse (with the
field to fix), `runs.services.errors.Conflict` for an action the object's
state does not allow.
"""

from runs.services.access.sharing import (
    comparison_create,
    share_link_create,
    share_link_resolve,
    share_link_revoke,
    share_link_was_revoked,
    share_links_of,
)
from runs.services.deletion import object_delete
from runs.services.experiments import (
    build_job_spec,
    draft_estimate,
    experiment_cells,
    experiment_check,
    experiment_estimate,
    experiment_schedule,
    experiment_start,
)
from runs.services.hosts.enrollment import event_refusal, host_approve, host_enroll, host_revoke
from runs.services.hosts.events import agent_record_event, record_event
from runs.services.hosts.liveness import runs_fail_agent_lost, runs_recover_lost_jobs
from runs.services.jobs.events import events_purge, run_record_event, store_point
from runs.services.runs import (
    experiment_cancel,
    run_cancel,
    run_finish,
    run_mark_running,
    run_rerun,
)
from runs.services.validation import (
    check_job_spec,
    check_settings,
    config_profile_check,
    workload_check,
)

__all__ = [
    "agent_record_event",
    "build_job_spec",
    "check_job_spec",
    "check_settings",
    "comparison_create",
    "config_profile_check",
    "draft_estimate",
    "experiment_cells",
    "experiment_check",
    "experiment_estimate",
    "experiment_schedule",
    "experiment_cancel",
    "experiment_start",
    "event_refusal",
    "events_purge",
    "host_approve",
    "host_enroll",
    "host_revoke",
    "runs_fail_agent_lost",
    "runs_recover_lost_jobs",
    "object_delete",
    "record_event",
    "workload_check",
    "run_cancel",
    "run_finish",
    "run_mark_running",
    "run_record_event",
    "run_rerun",
    "share_link_create",
    "share_link_resolve",
    "share_link_revoke",
    "share_link_was_revoked",
    "share_links_of",
    "store_point",
]
