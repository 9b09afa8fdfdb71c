"""One step of a bisection: the adaptive experiment that measures a commit against good,
and what its end decides.

A step is an ordinary adaptive experiment in rounds (runs/services/adaptive.py) of two
builds from the bisection's repository: the good ref (cell 0, the baseline; build names
sort so) and the step's commit (cell 1). The agent builds both in its kept tree
(agents/postgres/installs/kept_tree.py); step 0 measures the bad ref and has the agent
list the range (`source.list_from`). Each round runs both builds on the step's host, so
the step's looks compare the commit's round with good's round by round (paired:
runs/analysis/sequential.py), and so does what this module reads back from its rounds.
"""

import math
import statistics
from dataclasses import dataclass

from django.db.models import Q

from agents.contract.builds.definition import BuildDefinition, CommitInfo
from runs.agentlink.execution import ROUNDS
from runs.analysis.sequential import design_difference
from runs.analysis.verdicts import Question, Verdict
from runs.inference.equivalence import MIN_MARGIN_PCT
from runs.models import Bisection, BisectionStep, Experiment, PgBuild, Run
from runs.services.adaptive import adaptive_judge_between, adaptive_require_precision
from runs.services.adaptive_rounds import point_question, tps_by_round
from runs.services.experiments import experiment_schedule

BASELINE_CELL, CANDIDATE_CELL = 0, 1
# Step 0 measures on after its verdict until the change's standard error (log scale) is
# at most this share of it, within the budget: commits are placed against that change,
# and an imprecise one leaves good commits undecided (docs/decisions.md).
CHANGE_PRECISION = 0.25


def definition(bisection: Bisection, ref: str, list_from: str | None = None) -> BuildDefinition:
    """The source build of `ref` from the bisection's repository, with its build options."""
    built: BuildDefinition = {
        "source": {"kind": "git", "location": bisection.repository, "ref": ref},
        "configure_flags": list(bisection.configure_flags),
        "patches": [],
        "cflags": bisection.cflags or None,
    }
    if list_from is not None:
        built["source"]["list_from"] = list_from
    return built


def _build(bisection: Bisection, label: str, built: BuildDefinition) -> PgBuild:
    name = f"bisection {bisection.pk}: {label}"[:100]
    build, _created = PgBuild.objects.update_or_create(
        name=name,
        defaults={
            "version": bisection.version,
            "source": PgBuild.Source.BUILD,
            "definition": built,
            "created_by": bisection.created_by,
            "notes": f"built for bisection {bisection.pk} ({bisection.repository})",
        },
    )
    return build


def step_queue(bisection: Bisection, commit_index: int | None) -> BisectionStep:
    """Queue the next step: the bad ref (`commit_index` None, step 0) or a commit of the
    range; raises JobError naming the field when the experiment cannot be queued.

    Step 0 measures on after its verdict until the change is known to CHANGE_PRECISION
    of itself. A commit's looks place it at good's level or at the level of the change
    measured so far (`pooled_change`): at the change's level (the bisection's direction) it is
    bad, at good's ("same") good, by Wald's sequential likelihood ratio at 5 % each way
    (runs/inference/levels.py; the step's margin and minimum effect go unused)."""
    number = bisection.steps.count()
    good = _build(
        bisection, f"0 good {bisection.good_ref}", definition(bisection, bisection.good_ref)
    )
    between: tuple[float, float] | None = None
    margin, min_effect = bisection.margin_pct, bisection.min_effect_pct
    if commit_index is None:
        sha, label = "", f"bad ref {bisection.bad_ref}"
        built = definition(bisection, bisection.bad_ref, list_from=bisection.good_ref)
        candidate = _build(bisection, f"1 bad {bisection.bad_ref}", built)
    else:
        between = pooled_change(list(bisection.steps.filter(outcome=BisectionStep.Outcome.BAD)))
        if between is None:
            raise ValueError(f"bisection {bisection.pk} has no change measured by step 0")
        margin, min_effect = MIN_MARGIN_PCT, 0.0
        sha = bisection.commits[commit_index]["sha"]
        label = f"commit {sha[:12]}"
        candidate = _build(bisection, f"1 {sha}", definition(bisection, sha))
    scheduled = experiment_schedule(
        bisection.created_by,
        {
            "name": f"{bisection.name}: step {number} ({label})"[:200],
            "description": f"Bisection {bisection.pk}, step {number}: {label} against good.",
            "hosts": [bisection.host],
            "builds": [good, candidate],
            "config_profiles": [bisection.config_profile],
            "workloads": [bisection.workload],
            "storage_layouts": [{"data": bisection.storage_data, "wal": None}],
            "clients": [bisection.clients],
            "duration_s": bisection.duration_s,
            "repeats": bisection.repeats,
            "execution": ROUNDS,
            "adaptive": True,
            "max_rounds": bisection.max_rounds,
            "margin_pct": margin,
            "min_effect_pct": min_effect,
            "duet": bisection.duet,
        },
        start=True,
    )
    if between is None:
        adaptive_require_precision(scheduled.experiment, CHANGE_PRECISION)
    else:
        adaptive_judge_between(scheduled.experiment, *between)
    return BisectionStep.objects.create(
        bisection=bisection,
        number=number,
        commit_index=commit_index,
        sha=sha,
        experiment=scheduled.experiment,
    )


@dataclass(frozen=True)
class StepEnd:
    """What an ended step decided, and what the bisection keeps of it."""

    outcome: str
    verdict: str
    sentence: str
    note: str
    build_seconds: float | None
    commit: CommitInfo | None
    commits: list[CommitInfo] | None


def step_ended(step: BisectionStep) -> bool:
    experiment = step.experiment
    return experiment is not None and experiment.adaptive_state.get("ended", "") != ""


def step_end(step: BisectionStep, bisection: Bisection) -> StepEnd:
    """The outcome of an ended step; skipped when the commit did not build or start.

    Step 0: bad when the bad ref's adaptive verdict against good is the bisection's
    direction. A commit: by the level its looks placed it at (`step_queue`): the
    change's, bad; good's, good; undecided when its rounds were spent, skipped.
    """
    experiment = step.experiment
    if experiment is None:
        raise ValueError(f"step {step.pk} has no experiment")
    runs = experiment.runs.filter(cell=CANDIDATE_CELL).order_by("pk")
    built = runs.filter(~Q(build_record={})).first()
    record = built.build_record if built is not None else {}
    seconds, commit, commits = record.get("seconds"), record.get("commit"), record.get("commits")
    if not runs.filter(status=Run.Status.SUCCEEDED).exists():
        failed = runs.exclude(error_code="").first()
        why = f"{failed.error_code}: {failed.error_message}" if failed else "no run succeeded"
        return StepEnd(BisectionStep.Outcome.SKIPPED, "", "", why, seconds, commit, commits)
    point = _candidate_point(experiment)
    verdict = str(point["verdict"]) if point else ""
    sentence = _with_design(point) if point else ""
    ended = str(experiment.adaptive_state.get("ended", ""))
    bad = verdict == bisection.direction
    if step.commit_index is None:
        first = BisectionStep.Outcome.BAD if bad else BisectionStep.Outcome.GOOD
        return StepEnd(first, verdict, sentence, ended, seconds, commit, commits)
    if bad:
        outcome = BisectionStep.Outcome.BAD
    elif verdict == Verdict.SAME:
        outcome = BisectionStep.Outcome.GOOD
    else:
        outcome, ended = BisectionStep.Outcome.SKIPPED, f"undecided: {ended}"
    return StepEnd(outcome, verdict, sentence, ended, seconds, commit, commits)


def _with_design(point: dict[str, object]) -> str:
    """The point's answer with the design that gave it: "...; odds 24:1 (paired over 6
    rounds)"; a point looked at before answers named their design is as it was."""
    design = point.get("design")
    return f"{point['sentence']} ({design})" if design else str(point["sentence"])


def _candidate_point(experiment: Experiment) -> dict[str, object] | None:
    points = experiment.adaptive_state.get("points") or []
    return next((p for p in points if p.get("cell") == CANDIDATE_CELL), None)


def next_commit(bisection: Bisection, skipped: set[int]) -> int | None:
    """The commit nearest the middle of what is left, skipping the skipped; None when
    nothing is left between the last good and the first bad."""
    good, bad = bisection.good_index, bisection.bad_index
    if bad is None:
        return None
    left = [index for index in range(good + 1, bad) if index not in skipped]
    if not left:
        return None
    middle = (good + bad) / 2
    return min(left, key=lambda index: (abs(index - middle), index))


def _stored_question(step: BisectionStep) -> Question | None:
    """The commit's rounds against good's from the step's stored points, with their rounds
    (as the step's looks see them); None without an experiment."""
    if step.experiment is None:
        return None
    by_round = tps_by_round(step.experiment)
    key = next((key for key in sorted(by_round) if key[0] == CANDIDATE_CELL), None)
    if key is None:
        return None
    return point_question(by_round, key, step.experiment.duet)


def measured_change_pct(step: BisectionStep) -> float | None:
    """The commit's tps against good in %: as the step's last look estimated it (the
    estimator that answered: Hodges-Lehmann where an outlier round made it rank-based),
    else from the step's clean points by the design its looks use (the mean log ratio of
    its paired rounds, else the ratio of geometric means; None without a point on each
    side). The level commits are placed at is drawn from it, so one odd round must not
    move it."""
    point = _candidate_point(step.experiment) if step.experiment is not None else None
    estimated = point.get("pct") if point is not None else None
    if isinstance(estimated, int | float):
        return float(estimated)
    question = _stored_question(step)
    if question is None or not question.values or not question.baseline:
        return None
    pairing = question.pairing
    if pairing is not None and pairing.is_paired:
        return 100.0 * math.expm1(float(pairing.log_ratios().mean()))
    logs = {side: [math.log(v) for v in values] for side, values in (
        ("commit", question.values), ("good", question.baseline)
    )}  # fmt: skip
    ratio = statistics.fmean(logs["commit"]) - statistics.fmean(logs["good"])
    return 100.0 * math.expm1(ratio)


def pooled_change(steps: list[BisectionStep]) -> tuple[float, float] | None:
    """The change the bad steps measured together: (in %, its standard error on the log
    scale). Each step's estimate (`measured_change_pct`) is weighted by the inverse of
    its variance, as its last look recorded them, so the level later commits are placed
    at sharpens as bad commits add their rounds. None when no step has an estimate with
    a spread."""
    weighted: list[tuple[float, float]] = []
    for step in steps:
        change, log_se = measured_change_pct(step), _recorded_log_se(step)
        if change is not None and log_se:
            weighted.append((math.log1p(change / 100.0), log_se**-2))
    if not weighted:
        return None
    total = sum(weight for _log, weight in weighted)
    pooled = sum(log * weight for log, weight in weighted) / total
    return 100.0 * math.expm1(pooled), math.sqrt(1.0 / total)


def _recorded_log_se(step: BisectionStep) -> float | None:
    """The standard error of the step's change (log scale) its last look recorded; from
    its stored rounds, by the design its looks use (paired where the rounds pair), for a
    step looked at before looks recorded it."""
    point = _candidate_point(step.experiment) if step.experiment is not None else None
    recorded = point.get("log_se") if point is not None else None
    if isinstance(recorded, int | float):
        return float(recorded)
    question = _stored_question(step)
    difference = design_difference(question)[0] if question is not None else None
    return difference.se if difference is not None else None
