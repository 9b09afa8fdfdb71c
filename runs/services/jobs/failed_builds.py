"""A source build that failed is not built again for its experiment's later rounds.

When a run fails with `build_failed` (the source does not build: a compiler error, a patch
that does not apply; agents/postgres/installs/build_steps.py), every run of the same
experiment, host and build still queued fails at once with that failure's reason and build
record (its log, the compiler's first errors first), and its job is dropped by the agent
(the cancel flag). A `build_interrupted` (the host stopped the build: killed, out of disk
or memory) and an agent that restarted mid-build are not shared: a later round builds again
(docs/decisions.md).
"""

import logging
from functools import partial

from runs.agentlink import transport
from runs.models import Run
from runs.services.runs import run_finish

logger = logging.getLogger(__name__)

BUILD_FAILED = "build_failed"


def build_failure_shared(failed: Run) -> list[Run]:
    """Fail the queued runs of `failed`'s experiment that would build what `failed` could
    not (same host and build), with its error and build record; returns them. Nothing when
    `failed` did not fail with build_failed. Read afresh, not refreshed in place: the
    caller's `failed` still says what the run was before this event (run_record_event
    tells a late event by it)."""
    failed = Run.objects.get(pk=failed.pk)
    if failed.status != Run.Status.FAILED or failed.error_code != BUILD_FAILED:
        return []
    same = Run.objects.filter(
        experiment_id=failed.experiment_id,
        host_id=failed.host_id,
        build_id=failed.build_id,
        status=Run.Status.QUEUED,
    ).exclude(pk=failed.pk)
    error = {
        "code": BUILD_FAILED,
        "category": failed.error_category,
        "field": failed.error_field,
        "message": (
            f"not built again: run {failed.pk} (round {failed.round}) failed to build it: "
            f"{failed.error_message}"
        ),
    }
    shared = []
    for run in same.order_by("pk"):
        snapshot = {"build_record": failed.build_record}
        queued = (Run.Status.QUEUED,)
        if run_finish(run, Run.Status.FAILED, error, from_states=queued, snapshot=snapshot):
            cancel = partial(transport.request_cancel, run.run_id, run.token)
            transport.send_after_commit(run.pk, "cancel flag", cancel)
            shared.append(run)
    if shared:
        logger.info(
            "run %s: build failed; %d queued runs of the same build failed with it",
            failed.pk,
            len(shared),
        )
    return shared
