"""Fair use: how much one user may put in the agents' queues.

An agent runs one job at a time, oldest first, so one user's thousand runs
make everyone else wait behind them. Two limits, both settings:

- `BENCHLAB_MAX_REPEATS`: the repeats of one experiment, for everyone. In
  rounds every repeat is a run of every cell; in blocks the repeats run in
  one cluster. (The job spec allows up to 1,000 repeats per run; a request
  over this limit is a typo or a flood, not statistics: see runs/inference/stats.py.)
- `BENCHLAB_MAX_QUEUED_RUNS_PER_USER`: one user's runs that are not final yet
  (queued or running), counted when runs are queued: experiments started,
  re-runs, series occurrences (their owner's). Staff are exempt: they run
  the lab, and may cancel anyone's runs anyway (docs/decisions.md). Runs
  queued with no user (management commands) are the operator's, exempt too.

Each raises `LimitReached` (a JobError, so the API answers 400 and the form
shows it) naming the limit, the current count and the setting.
"""

from django.conf import settings
from django.contrib.auth.models import User

from runs.models import Run
from runs.services.errors import LimitReached

REPEATS_SETTING = "BENCHLAB_MAX_REPEATS"
QUEUED_SETTING = "BENCHLAB_MAX_QUEUED_RUNS_PER_USER"


def require_repeats_within_limit(repeats: int) -> None:
    """Raise LimitReached (field `repeats`) when one experiment asks for too many repeats."""
    limit = settings.BENCHLAB_MAX_REPEATS
    if repeats <= limit:
        return
    raise LimitReached(
        f"{repeats} repeats is over the limit of {limit} per experiment ({REPEATS_SETTING}); "
        f"ask for at most {limit}, or schedule another experiment for more",
        limit=limit,
        current=repeats,
        setting=REPEATS_SETTING,
        field="repeats",
    )


def require_queue_room(user: object, adding: int) -> None:
    """Raise LimitReached when `user` would have more runs not yet final than the limit.

    Call it inside the transaction that creates the runs: it locks the user's
    row, so two requests of one user cannot both take the last places.
    """
    if not isinstance(user, User) or user.is_staff:
        return
    limit = settings.BENCHLAB_MAX_QUEUED_RUNS_PER_USER
    list(User.objects.select_for_update().filter(pk=user.pk).values_list("pk"))
    current = Run.objects.filter(created_by=user).exclude(status__in=Run.FINAL_STATES).count()
    if current + adding <= limit:
        return
    raise LimitReached(
        f"{user.username} has {current} runs queued or running and this would queue {adding} "
        f"more, over the limit of {limit} per user ({QUEUED_SETTING}); wait for runs to "
        "finish or cancel some, then start again",
        limit=limit,
        current=current,
        setting=QUEUED_SETTING,
    )
