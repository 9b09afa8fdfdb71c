"""Adaptive experiments: rounds added only where a cell is still undecided.

An adaptive experiment in rounds queues its first `repeats` rounds like any other
(runs.services.experiments), with its looks planned (`adaptive_plan`). When every
run of its latest round is final, the control worker takes a step (`adaptive_step`,
task runs.tasks.adaptive_step: sent when a run of it ends, and from the reaper's
pass, so a lost message only delays a step):

- at a planned look (runs/analysis/sequential.py), each compared point still
  undecided (a cell against the first cell at one client count, on tps) is judged
  at the look's levels, its rounds paired with the first cell's (each round's log
  ratio; unpaired below three complete rounds); a decided point keeps its answer;
- the experiment ends when every point is decided, at the last planned look (its
  budget of rounds), when a next round would end past `max_hours` from the first
  run's start, or when one of its runs was cancelled (a person stopped it); when the
  hours (or the owner's queue) end it between planned looks, the rounds measured by
  then get a last look that spends what the plan's looks left (`_last_look`);
- otherwise the next round is queued: the first cell and every cell with a point
  still undecided, in an order drawn from the experiment's seed and the round;
- at a look, when the experiment's spread says longer points narrow the intervals
  faster than more rounds (second-to-second noise dominates, runs/inference/variance.py),
  every later round runs its points twice as long (once; `AdaptiveState.lengthened`).

`Experiment.adaptive_state` records the plan, each look and each point's answer.
"""

import copy
import logging
import random
from datetime import timedelta
from functools import partial
from typing import cast

from django.conf import settings
from django.db import transaction
from django.db.models import Max, Min
from django.utils import timezone

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec, StorageSpec
from agents.contract.spec.fields import SWEEP
from benchlab.celery import app
from runs.agentlink import transport
from runs.agentlink.execution import ROUNDS, Slot, derived_seed
from runs.agentlink.transport import CONTROL_QUEUE
from runs.analysis import sequential
from runs.analysis.verdicts import Verdict
from runs.inference.equivalence import MAX_MARGIN_PCT, MIN_MARGIN_PCT
from runs.inference.spending import LookLevel, last_look_level
from runs.inference.stats import ALPHA, MAX_MIN_EFFECT_PCT, MIN_REPEATS
from runs.models import Experiment, Run
from runs.services.adaptive_rounds import (
    BASELINE_CELL,
    PointRounds,
    experiment_split,
    point_question,
    tps_by_round,
)
from runs.services.adaptive_state import (
    AdaptiveState,
    Lengthened,
    LookRecord,
    PointState,
    ShownAnswer,
    still_open,
)
from runs.services.duet import queue_duet_round
from runs.services.errors import LimitReached
from runs.services.limits import require_queue_room
from runs.services.queueing import Cell, CheckedCell, queue_slot

logger = logging.getLogger(__name__)

ADAPTIVE_TASK = "runs.tasks.adaptive_step"
# What a stored spec holds of its dispatch, not of its cell (runs.services.jobs.dispatch).
DISPATCH_KEYS = ("run_id", "token", "job_id")
# Why an adaptive experiment queued no more rounds (AdaptiveState.ended).
ENDED_DECIDED = "every cell decided"
ENDED_BUDGET = "budget of rounds spent"
ENDED_HOURS = "budget of hours spent"
ENDED_CANCELLED = "a run was cancelled"
ENDED_LIMIT = "the owner's queue is full (fair use)"
ENDED_NO_RUNS = "no run of the first cell succeeded"
# How much longer points run once the spread says longer points pay (once per experiment).
LONGER_POINTS_FACTOR = 2
# The longest -T and -t a sweep field allows: a lengthened point stops there.
LONGEST: dict[str, int] = {
    field.name: field.maximum
    for field in SWEEP
    if field.name in ("duration_s", "transactions") and field.maximum is not None
}


ADAPTIVE_FIELDS = ("adaptive", "max_rounds", "max_hours", "margin_pct", "min_effect_pct")


def require_adaptive_design(experiment: Experiment, cells: int) -> None:
    """Raise JobError naming the field to fix when an adaptive experiment cannot run as one
    (a question about the experiment, asked before any cell is checked)."""
    if not experiment.adaptive:
        return
    if experiment.execution != ROUNDS:
        raise JobError(
            "invalid_spec", "an adaptive experiment runs in rounds: choose rounds", "execution"
        )
    if cells < 2:
        message = (
            "an adaptive experiment compares each cell with the first: pick at least two "
            "builds, config profiles, storage layouts or workloads"
        )
        raise JobError("invalid_spec", message, "adaptive")
    if experiment.repeats < MIN_REPEATS:
        message = f"an adaptive experiment measures at least {MIN_REPEATS} rounds before it looks"
        raise JobError("invalid_spec", message, "repeats")
    limit = settings.BENCHLAB_MAX_REPEATS
    if not experiment.max_rounds or not experiment.repeats <= experiment.max_rounds <= limit:
        message = f"give the most rounds a cell may get, from {experiment.repeats} to {limit}"
        raise JobError("invalid_spec", message, "max_rounds")
    if experiment.max_hours is not None and not experiment.max_hours > 0:
        raise JobError("invalid_spec", "give a budget in hours above 0, or none", "max_hours")
    if not MIN_MARGIN_PCT <= experiment.margin_pct <= MAX_MARGIN_PCT:
        message = f"the margin is between {MIN_MARGIN_PCT:g} and {MAX_MARGIN_PCT:g} (percent)"
        raise JobError("invalid_spec", message, "margin_pct")
    if not 0 <= experiment.min_effect_pct <= MAX_MIN_EFFECT_PCT:
        message = f"the minimum effect is between 0 and {MAX_MIN_EFFECT_PCT:g} (percent)"
        raise JobError("invalid_spec", message, "min_effect_pct")


def adaptive_plan(experiment: Experiment) -> AdaptiveState:
    """The state an adaptive experiment starts with: its looks, up to `max_rounds`."""
    looks = sequential.look_rounds(experiment.repeats, experiment.max_rounds or experiment.repeats)
    return {"looks": list(looks), "points": [], "looked": [], "ended": ""}


def adaptive_judge_between(experiment: Experiment, change_pct: float, change_se: float) -> None:
    """Have every look place each cell at the first cell's level (SAME) or at that level
    moved by `change_pct` (measured with standard error `change_se` on the log scale; the
    change's direction), rather than judge it against the first cell: a bisection step
    asks whether a commit is as good or as bad (runs/inference/levels.py). Set before
    the first look."""
    if not change_pct > -100.0 or change_pct == 0.0:
        raise ValueError(f"a change of {change_pct} % gives no second level to place cells at")
    _before_first_look(experiment, {"between_pct": change_pct, "between_se": change_se})


def adaptive_require_precision(experiment: Experiment, share: float) -> None:
    """Keep measuring each decided cell until its change against the first cell is known
    to `share` of itself (standard error on the log scale), within the budget; its
    verdict stays, its estimate sharpens. Set before the first look."""
    if not 0 < share < 1:
        raise ValueError(f"a precision of {share} of the change is not a share")
    _before_first_look(experiment, {"precise_to": share})


def adaptive_share_alpha(experiment: Experiment, experiments: int) -> None:
    """Have the experiment's looks spend ALPHA / `experiments`: it is one of that many
    whose answers are read as one (a patch try's battery, whose exit code says "slower"
    when any of them does), so that together they call a difference falsely at most at
    ALPHA. Set before the first look."""
    if experiments < 1:
        raise ValueError(f"{experiments} experiments cannot share an error rate")
    _before_first_look(experiment, {"shared_by": experiments})


def plan_alpha(state: AdaptiveState) -> float:
    """The error rate an experiment's looks spend: ALPHA, or its share of ALPHA."""
    return ALPHA / state.get("shared_by", 1)


def _before_first_look(experiment: Experiment, question: AdaptiveState) -> None:
    """Add `question` to the experiment's plan: the plan's errors hold for one question
    from the first look on, so it cannot change after one. Read under the experiment's
    row lock, as a step reads it: the caller's copy may predate the plan."""
    with transaction.atomic():
        locked = Experiment.objects.select_for_update(no_key=True).get(pk=experiment.pk)
        state: AdaptiveState = locked.adaptive_state
        if state.get("looked"):
            raise ValueError(f"experiment {experiment.pk} has looked already")
        state.update(question)
        locked.adaptive_state = state
        locked.save(update_fields=["adaptive_state"])
    experiment.adaptive_state = state


def adaptive_step_after_commit(run: Run) -> None:
    """When the run's experiment is adaptive, have the control worker take its next step
    once the caller commits (the run that ended may have been its round's last)."""
    if not run.experiment.adaptive:
        return
    step = partial(adaptive_step_send, run.experiment_id)
    transport.send_after_commit(run.pk, "adaptive step", step)


def adaptive_step_send(experiment_pk: int) -> None:
    """Send the control worker the task that takes the experiment's next step."""
    app.send_task(ADAPTIVE_TASK, args=[experiment_pk], queue=CONTROL_QUEUE)


def adaptive_steps_due() -> int:
    """Take the step of every adaptive experiment not ended whose runs are all final (the
    reaper's pass: a step whose message was lost). Returns how many stepped."""
    waiting = (
        Experiment.objects.filter(adaptive=True, adaptive_state__ended="", runs__isnull=False)
        .exclude(runs__status__in=Run.ACTIVE_STATES)
        .distinct()
    )
    return sum(adaptive_step(pk) for pk in waiting.values_list("pk", flat=True))


def adaptive_step(experiment_pk: int) -> bool:
    """Look and queue the next round, or end, once the latest round's runs are all final.

    Idempotent: a step whose round still runs, or was already taken, changes nothing
    (False). Holds the experiment's row lock, so two steps never queue a round twice.
    """
    with transaction.atomic():
        experiment = (
            Experiment.objects.select_for_update(no_key=True)
            .filter(pk=experiment_pk, adaptive=True)
            .first()
        )
        if experiment is None or experiment.adaptive_state.get("ended", "") != "":
            return False
        runs = experiment.runs.filter(round__isnull=False)
        if not runs.exists() or runs.filter(status__in=Run.ACTIVE_STATES).exists():
            return False
        latest = runs.aggregate(latest=Max("round"))["latest"]
        state: AdaptiveState = experiment.adaptive_state
        ended = _take_step(experiment, state, latest)
        if ended:
            state["ended"], state["ended_at"] = ended, timezone.now().isoformat()
        experiment.adaptive_state = state
        experiment.save(update_fields=["adaptive_state"])
    logger.info(
        "experiment %s: adaptive step after round %s: %s",
        experiment_pk,
        latest,
        ended or f"round {latest + 1} queued",
    )
    return True


def _take_step(experiment: Experiment, state: AdaptiveState, latest: int) -> str:
    """Look if `latest` is a planned look; return why the experiment ends, or "" after
    queueing the next round."""
    if experiment.runs.filter(status=Run.Status.CANCELLED).exists():
        return ENDED_CANCELLED
    if latest in state["looks"]:
        by_round = tps_by_round(experiment, latest)
        _look(experiment, state, latest, by_round)
        _consider_longer_points(experiment, state, latest, by_round)
    points = state["points"]
    if state["looked"] and not points:
        return ENDED_NO_RUNS
    share = state.get("precise_to")
    open_cells = sorted({p["cell"] for p in points if still_open(p, share)})
    if state["looked"] and not open_cells:
        return ENDED_DECIDED
    if latest >= max(state["looks"]):
        return ENDED_BUDGET
    if _past_hours(experiment, latest):
        return _last_look(experiment, state, latest, ENDED_HOURS)
    cells = open_cells or _all_cells(experiment)
    try:
        _queue_round(experiment, sorted({BASELINE_CELL, *cells}), latest + 1, _factor(state))
    except LimitReached as exc:
        logger.warning("experiment %s: no next round: %s", experiment.pk, exc.message)
        return _last_look(experiment, state, latest, ENDED_LIMIT)
    return ""


def _last_look(experiment: Experiment, state: AdaptiveState, latest: int, ended: str) -> str:
    """Judge the rounds measured since the last planned look once more, at the level that
    spends what the plan's looks left (`last_look_level`), when `ended` stops the plan
    before its next look; return `ended`."""
    if latest not in state["looks"]:
        level = last_look_level(tuple(state["looks"]), latest, plan_alpha(state))
        _look(experiment, state, latest, tps_by_round(experiment, latest), level, ended)
    return ended


def _all_cells(experiment: Experiment) -> list[int]:
    return sorted(set(experiment.runs.values_list("cell", flat=True)))


def _look(
    experiment: Experiment,
    state: AdaptiveState,
    rounds: int,
    by_round: PointRounds,
    last: LookLevel | None = None,
    ended: str = "",
) -> None:
    """Judge every point still undecided at this look (a planned one, or the `last` look
    when `ended` stops the plan before its next: its answers say so); record the look."""
    levels = sequential.look_levels(tuple(state["looks"]), plan_alpha(state))
    level = last or next(level for level in levels if level.rounds == rounds)
    known = {(p["cell"], p["clients"]): p for p in state["points"]}
    for cell, clients in sorted(by_round):
        if cell != BASELINE_CELL and (cell, clients) not in known:
            known[(cell, clients)] = PointState(
                cell=cell, clients=clients, verdict=Verdict.UNDECIDED, sentence="", rounds=0
            )
    share = state.get("precise_to")
    open_points = [key for key, p in known.items() if still_open(p, share)]
    questions = [point_question(by_round, key, experiment.duet) for key in open_points]
    between = state.get("between_pct")
    if between is not None:
        answers = sequential.judge_between(questions, between, state.get("between_se", 0.0))
    else:
        min_effect, margin = experiment.min_effect_pct, experiment.margin_pct
        answers = sequential.judge_look(questions, level, min_effect, margin)
    decided = 0
    for key, answer, question in zip(open_points, answers, questions, strict=True):
        point = known[key]
        was_decided = point["verdict"] != Verdict.UNDECIDED
        if not was_decided or answer.verdict == point["verdict"]:
            point["verdict"], point["sentence"] = str(answer.verdict), answer.sentence
            if ended:
                point["sentence"] += f"; last look after round {rounds}: {ended}"
            point["ci_level"] = answer.shown_level_pct
            shown = _shown(answer)
            if shown is not None:
                point["shown"] = shown
            else:
                point.pop("shown", None)
        point["pct"], point["log_se"], point["design"] = answer.pct, answer.log_se, answer.design
        point["rounds"] = min(len(question.values), len(question.baseline))
        decided += not was_decided and answer.verdict is not Verdict.UNDECIDED
    state["points"] = [known[key] for key in sorted(known)]
    record = LookRecord(
        rounds=rounds,
        alpha=level.alpha,
        alpha_same=level.alpha_same,
        decided=decided,
        at=timezone.now().isoformat(),
    )
    if ended:
        record["ended"] = ended
    state["looked"] = [*state["looked"], record]


def _shown(answer: sequential.PointAnswer) -> ShownAnswer | None:
    """The change and interval an answer's sentence shows (None: it shows none)."""
    interval, level = answer.shown_interval_pct, answer.shown_level_pct
    if answer.between_pct or answer.pct is None or interval is None or level is None:
        return None
    return ShownAnswer(pct=answer.pct, low=interval[0], high=interval[1], level=level)


def _past_hours(experiment: Experiment, latest: int) -> bool:
    """A next round, as long as the last one took, would end past `max_hours`."""
    if experiment.max_hours is None:
        return False
    runs = experiment.runs.filter(round__isnull=False)
    first_start = runs.aggregate(first=Min("started_at"))["first"]
    round_times = runs.filter(round=latest).aggregate(
        start=Min("started_at"), end=Max("finished_at")
    )
    if first_start is None or round_times["start"] is None or round_times["end"] is None:
        return False
    last_round = round_times["end"] - round_times["start"]
    deadline = first_start + timedelta(hours=experiment.max_hours)
    return timezone.now() + last_round > deadline


def _consider_longer_points(
    experiment: Experiment, state: AdaptiveState, latest: int, by_round: PointRounds
) -> None:
    """Lengthen every later round's points when the spread measured so far says longer
    points narrow the intervals faster than more rounds (a decision on the variances
    alone, never on the differences, so it leaves the tests' error rates as they are)."""
    if "lengthened" in state:
        return
    split = experiment_split(
        experiment, [[tps for _r, tps in found] for found in by_round.values()]
    )
    if split is None or split.more_rounds_pay:
        return
    state["lengthened"] = Lengthened(
        from_round=latest + 1, factor=LONGER_POINTS_FACTOR, advice=split.advice
    )
    logger.info("experiment %s: points run longer from round %s", experiment.pk, latest + 1)


def _factor(state: AdaptiveState) -> int:
    lengthened = state.get("lengthened")
    return lengthened["factor"] if lengthened else 1


def _queue_round(
    experiment: Experiment, cells: list[int], round_number: int, factor: int
) -> list[Run]:
    """Queue one run of each of `cells` for `round_number`, in an order drawn from the
    experiment's seed and the round; each copies its cell's first run's spec, with
    points `factor` times as long."""
    require_queue_room(experiment.created_by, len(cells))
    rng = random.Random(derived_seed(experiment.seed, -round_number))
    order = rng.sample(cells, len(cells))
    position = (experiment.runs.aggregate(last=Max("position"))["last"] or 0) + 1
    firsts = experiment.runs.filter(round=1, cell__in=cells).order_by("pk")
    checked = {run.cell: _checked_cell(run, factor) for run in firsts}
    if experiment.duet:
        pair = [
            (checked[cell], Slot(position + n, cell, round_number)) for n, cell in enumerate(order)
        ]
        return queue_duet_round(experiment, pair, experiment.created_by)
    return [
        queue_slot(
            experiment, checked[cell], Slot(position + n, cell, round_number), experiment.created_by
        )
        for n, cell in enumerate(order)
    ]


def _checked_cell(run: Run, factor: int) -> CheckedCell:
    """The cell a run of the first round measured, with the spec it was checked with
    (its points `factor` times as long: -T, or -t for a sweep by transactions, at most
    what the field allows)."""
    spec = cast(JobSpec, {k: v for k, v in run.spec.items() if k not in DISPATCH_KEYS})
    sweep = spec["sweep"] = copy.deepcopy(spec["sweep"])
    if sweep["duration_s"] is not None:
        sweep["duration_s"] = min(sweep["duration_s"] * factor, LONGEST["duration_s"])
    if sweep["transactions"] is not None:
        sweep["transactions"] = min(sweep["transactions"] * factor, LONGEST["transactions"])
    storage: StorageSpec = {"data": run.storage_data, "wal": run.storage_wal or None}
    cell = Cell(run.cell, run.host, run.build, run.config_profile, storage, run.workload)
    return CheckedCell(cell, spec, [])
