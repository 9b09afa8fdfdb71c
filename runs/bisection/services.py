"""Bisections: start, advance, cancel (every write a bisection makes).

`bisection_advance` is the control worker's: after an adaptive experiment's step
(runs.tasks.adaptive_step_task) and on every reaper pass (a lost message only delays
it). It holds the bisection's row lock and acts only on a step whose experiment has
ended, so a second call changes nothing. A step decided good or bad narrows the range
(`good_index`, `bad_index`); a skipped one is left out of the midpoints, as
`git bisect skip`; when no commit is left between good and bad, the first bad one is
the culprit.
"""

import logging

from django.db import transaction
from django.utils import timezone

from agents.contract.builds.definition import CommitInfo, check_build_definition, is_git_ref
from agents.contract.errors import JobError
from runs.bisection.steps import (
    definition,
    next_commit,
    pooled_change,
    step_end,
    step_ended,
    step_queue,
)
from runs.models import Bisection, BisectionStep, Run
from runs.services.access.permissions import AnyUser, check_can_change
from runs.services.errors import Conflict
from runs.services.queueing import User, owner
from runs.services.runs import run_cancel

logger = logging.getLogger(__name__)


def bisection_start(user: User, data: dict[str, object]) -> Bisection:
    """Create a bisection and queue its step 0 (the bad ref against the good one).

    `data` holds Bisection fields (model instances for host, config_profile, workload).
    Raises JobError naming the field to fix; nothing is saved then.
    """
    for field in ("good_ref", "bad_ref"):
        if not is_git_ref(data.get(field)):
            message = "a branch, tag or commit: letters, digits, _ . / -, not starting with -"
            raise JobError("invalid_spec", message, field=field)
    with transaction.atomic():
        bisection = Bisection.objects.create(created_by=owner(user), **data)
        try:
            check_build_definition(definition(bisection, bisection.good_ref))
        except JobError as error:
            field = (error.field or "").removeprefix("postgres.build.")
            raise JobError(
                error.code, error.message, field=field.removeprefix("source.")
            ) from error
        step_queue(bisection, None)
    logger.info("bisection %s started by %s", bisection.pk, user)
    return bisection


def bisections_advance_due() -> int:
    """Advance every running bisection whose current step ended (the reaper's pass)."""
    running = Bisection.objects.filter(status=Bisection.Status.RUNNING)
    return sum(bisection_advance(pk) for pk in running.values_list("pk", flat=True))


def bisection_advance_for(experiment_pk: int) -> bool:
    """Advance the bisection whose step `experiment_pk` is, if it is one."""
    step = BisectionStep.objects.filter(experiment_id=experiment_pk).first()
    return step is not None and bisection_advance(step.bisection_id)


def bisection_advance(bisection_pk: int) -> bool:
    """Conclude the current step once its experiment ended and queue the next, or end.
    False (nothing changed) while the step still measures or the bisection is over."""
    with transaction.atomic():
        bisection = (
            Bisection.objects.select_for_update(no_key=True)
            .filter(pk=bisection_pk, status=Bisection.Status.RUNNING)
            .first()
        )
        if bisection is None:
            return False
        step = bisection.steps.filter(outcome=BisectionStep.Outcome.MEASURING).last()
        if step is None:
            return False
        if step.experiment is None:
            _fail(bisection, f"the experiment of step {step.number} was deleted")
        elif not step_ended(step):
            return False
        else:
            _conclude(bisection, step)
        if bisection.status == Bisection.Status.RUNNING:
            _next(bisection)
        bisection.save()
    logger.info("bisection %s: step %s %s", bisection_pk, step.number, step.outcome)
    return True


def _conclude(bisection: Bisection, step: BisectionStep) -> None:
    end = step_end(step, bisection)
    step.outcome, step.verdict, step.sentence = end.outcome, end.verdict, end.sentence
    step.note, step.build_seconds = end.note, end.build_seconds
    if end.commit is not None:
        step.sha = end.commit["sha"]
    step.save()
    if step.commit_index is None:
        _range_read(bisection, step, end.commits or [])
    elif end.outcome == BisectionStep.Outcome.BAD:
        bisection.bad_index = step.commit_index
        pooled = pooled_change(list(bisection.steps.filter(outcome=BisectionStep.Outcome.BAD)))
        bisection.change_pct = pooled[0] if pooled is not None else bisection.change_pct
    elif end.outcome == BisectionStep.Outcome.GOOD:
        bisection.good_index = step.commit_index


def _range_read(bisection: Bisection, step: BisectionStep, commits: list[CommitInfo]) -> None:
    """Step 0: the bad ref must measure bad, and the agent's range have commits."""
    if step.outcome != BisectionStep.Outcome.BAD:
        why = step.note if step.outcome == BisectionStep.Outcome.SKIPPED else step.sentence
        verdict = step.verdict or "no verdict"
        message = (
            f"the bad ref {bisection.bad_ref} does not measure {bisection.direction} than the "
            f"good ref {bisection.good_ref} ({verdict}): {why}"
        )
        _fail(bisection, message)
        return
    if not commits:
        _fail(bisection, "the agent listed no commit between the good and the bad ref")
        return
    pooled = pooled_change([step])
    if pooled is None:
        _fail(bisection, "step 0 measured no change, with a spread, to place commits against")
        return
    bisection.commits = commits
    bisection.bad_index = len(commits) - 1
    bisection.change_pct = pooled[0]


def _next(bisection: Bisection) -> None:
    skipped = set(
        bisection.steps.filter(outcome=BisectionStep.Outcome.SKIPPED).values_list(
            "commit_index", flat=True
        )
    )
    index = next_commit(bisection, {i for i in skipped if i is not None})
    if index is None:
        bisection.culprit_index = bisection.bad_index
        bisection.status, bisection.finished_at = Bisection.Status.SUCCEEDED, timezone.now()
        return
    try:
        step_queue(bisection, index)
    except JobError as error:
        _fail(bisection, f"step for commit {index} could not be queued: {error.message}")


def _fail(bisection: Bisection, message: str) -> None:
    bisection.status, bisection.error_message = Bisection.Status.FAILED, message
    bisection.finished_at = timezone.now()
    logger.warning("bisection %s failed: %s", bisection.pk, message)


def bisection_cancel(bisection: Bisection, user: AnyUser) -> Bisection:
    """Stop a running bisection: its open step ends cancelled, and so do its queued and
    running runs (what they measured is kept; the agent stops the one it runs).

    Raises PermissionDenied unless `user` owns it (or is staff), Conflict when it is over.
    """
    check_can_change(user, bisection, "cancel")
    with transaction.atomic():
        changed = Bisection.objects.filter(pk=bisection.pk, status=Bisection.Status.RUNNING).update(
            status=Bisection.Status.CANCELLED, finished_at=timezone.now()
        )
        if not changed:
            raise Conflict(f"bisection {bisection.pk} is already over")
        active = Run.objects.filter(
            experiment__bisection_step__bisection=bisection, status__in=Run.ACTIVE_STATES
        )
        for run in active.order_by("pk"):
            run_cancel(run, user)
        bisection.steps.filter(outcome=BisectionStep.Outcome.MEASURING).update(
            outcome=BisectionStep.Outcome.CANCELLED, note=f"cancelled by {user}"
        )
    logger.info("bisection %s: cancelled by %s", bisection.pk, user)
    bisection.refresh_from_db()
    return bisection
