"""One step of a bisection: the adaptive experiment that measures a commit against good,
and what its end decides.

A step is an ordinary adaptive experiment in rounds (runs/services/adaptive.py) of two
builds from the bisection's repository: the good ref (cell 0, the baseline; build names
sort so) and the step's commit (cell 1). The agent builds both in its kept tree
(agents/postgres/installs/kept_tree.py); step 0 measures the bad ref and has the agent
list the range (`source.list_from`).
"""

from dataclasses import dataclass

from django.db.models import Q

from agents.contract.builds.definition import BuildDefinition, CommitInfo
from runs.analysis.verdicts import Verdict
from runs.contract.execution import ROUNDS
from runs.models import Bisection, BisectionStep, Experiment, PgBuild, Run
from runs.services.experiments import experiment_schedule

BASELINE_CELL, CANDIDATE_CELL = 0, 1


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
    range; raises JobError naming the field when the experiment cannot be queued."""
    number = bisection.steps.count()
    good = _build(
        bisection, f"0 good {bisection.good_ref}", definition(bisection, bisection.good_ref)
    )
    if commit_index is None:
        sha, label = "", f"bad ref {bisection.bad_ref}"
        built = definition(bisection, bisection.bad_ref, list_from=bisection.good_ref)
        candidate = _build(bisection, f"1 bad {bisection.bad_ref}", built)
    else:
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
            "margin_pct": bisection.margin_pct,
            "min_effect_pct": bisection.min_effect_pct,
        },
        start=True,
    )
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


def step_end(step: BisectionStep, direction: str) -> StepEnd:
    """The outcome of an ended step: bad when the commit differs from good in `direction`,
    good when it is the same (or differs the other way), skipped when it did not build or
    start, or stayed undecided."""
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
    sentence = str(point["sentence"]) if point else ""
    if verdict == direction:
        outcome = BisectionStep.Outcome.BAD
    elif verdict in (Verdict.SAME, Verdict.FASTER, Verdict.SLOWER):
        outcome = BisectionStep.Outcome.GOOD
    else:
        outcome = BisectionStep.Outcome.SKIPPED
    ended = str(experiment.adaptive_state.get("ended", ""))
    note = f"undecided: {ended}" if outcome == BisectionStep.Outcome.SKIPPED else ended
    return StepEnd(outcome, verdict, sentence, note, seconds, commit, commits)


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
