"""What a bisection found, as plain data for its page and the API: the range left, each
step, and once it ended the first bad commit with the measurements around it.

The culprit's parent is the last commit measured good (or the good ref); the counters
that moved are those of the culprit's step against the parent's (runs/counters/), from
the runs of the two cells at the bisection's client count.
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

from agents.contract.builds.definition import CommitInfo
from runs.bisection.steps import BASELINE_CELL, CANDIDATE_CELL
from runs.counters.movers import Mover, top_movers
from runs.counters.points import repeat_counters
from runs.models import Bisection, BisectionStep, Result, Run
from runs.services.progress import RunStep, running_steps


@dataclass(frozen=True)
class StepRow:
    step: BisectionStep
    commit: CommitInfo | None


@dataclass(frozen=True)
class Culprit:
    """The first bad commit, its parent, and what was measured of each."""

    commit: CommitInfo
    parent_label: str
    change_at_bad_ref: str
    culprit_sentence: str
    parent_sentence: str
    skipped_between: list[CommitInfo]
    movers: list[Mover]


@dataclass(frozen=True)
class Report:
    """`now`: what the open step's running runs do (a build's progress, the point
    measured), as its experiment's progress gives it; `good_build_seconds`: how long the
    good ref took to build, the yardstick for a build under way."""

    steps: list[StepRow]
    left: list[CommitInfo]
    steps_left: int
    culprit: Culprit | None
    now: list[RunStep]
    good_build_seconds: float | None


def bisection_report(bisection: Bisection) -> Report:
    commits: list[CommitInfo] = bisection.commits
    steps = list(bisection.steps.select_related("experiment"))
    rows = [StepRow(s, _commit_of(commits, s.commit_index)) for s in steps]
    left = _left(bisection, commits)
    steps_left = math.ceil(math.log2(len(left))) if left else 0
    open_step = next((s for s in steps if s.outcome == BisectionStep.Outcome.MEASURING), None)
    now = running_steps(open_step.experiment) if open_step and open_step.experiment else []
    culprit = _culprit(bisection, commits, steps)
    return Report(rows, left, steps_left, culprit, now, _good_build_seconds(bisection))


def _good_build_seconds(bisection: Bisection) -> float | None:
    built = (
        Run.objects.filter(experiment__bisection_step__bisection=bisection, cell=BASELINE_CELL)
        .exclude(build_record={})
        .values_list("build_record", flat=True)
        .first()
    )
    seconds = built.get("seconds") if isinstance(built, dict) else None
    return float(seconds) if isinstance(seconds, int | float) else None


def _commit_of(commits: Sequence[CommitInfo], index: int | None) -> CommitInfo | None:
    return commits[index] if index is not None and 0 <= index < len(commits) else None


def _left(bisection: Bisection, commits: Sequence[CommitInfo]) -> list[CommitInfo]:
    """The commits that may still be the first bad one (the first bad so far included)."""
    if bisection.bad_index is None or bisection.status != Bisection.Status.RUNNING:
        return []
    return list(commits[bisection.good_index + 1 : bisection.bad_index + 1])


def _culprit(
    bisection: Bisection, commits: Sequence[CommitInfo], steps: Sequence[BisectionStep]
) -> Culprit | None:
    index = bisection.culprit_index
    if index is None:
        return None
    by_index = {s.commit_index: s for s in steps}
    first, culprit_step = steps[0], by_index.get(index)
    parent_step = by_index.get(bisection.good_index) if bisection.good_index >= 0 else None
    skipped = [
        commits[i]
        for i, s in by_index.items()
        if i is not None and bisection.good_index < i < index
        if s.outcome == BisectionStep.Outcome.SKIPPED
    ]
    return Culprit(
        commit=commits[index],
        parent_label=_parent_label(bisection.good_index, commits, index),
        change_at_bad_ref=first.sentence,
        culprit_sentence=(culprit_step or first).sentence,
        parent_sentence=parent_step.sentence if parent_step else "the good ref itself",
        skipped_between=skipped,
        movers=_movers(bisection, culprit_step or first, parent_step),
    )


def _parent_label(good_index: int, commits: Sequence[CommitInfo], index: int) -> str:
    """The culprit's parent, or the last good commit when skipped commits lie between."""
    parent = commits[index]["parent"][:12]
    last_good = commits[good_index]["sha"][:12] if good_index >= 0 else "the good ref"
    if good_index == index - 1:
        return parent if good_index >= 0 else f"{parent} (the good ref)"
    return f"{last_good}, the last good commit (skipped between it and the culprit)"


def _movers(
    bisection: Bisection, culprit: BisectionStep, parent: BisectionStep | None
) -> list[Mover]:
    """The counters that moved most from the parent's build to the culprit's."""
    bad = _results(culprit, CANDIDATE_CELL)
    good = _results(parent, CANDIDATE_CELL) if parent else _results(culprit, BASELINE_CELL)
    return top_movers(
        repeat_counters(bad, bisection.clients),
        repeat_counters(good, bisection.clients),
        bisection.min_effect_pct,
    )


def _results(step: BisectionStep, cell: int) -> list[Result]:
    if step.experiment_id is None:
        return []
    return list(
        Result.objects.filter(
            run__experiment_id=step.experiment_id,
            run__cell=cell,
            run__status=Run.Status.SUCCEEDED,
        ).order_by("run_id", "index")
    )
