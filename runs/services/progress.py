"""Where a started experiment stands, as `benchlab status` shows it while it waits: its
runs by status, what the running ones are doing, the rounds of an adaptive experiment
or a capacity search (a round a probe of each cell) and a rough estimate of the time
left."""

from typing import TypedDict

from django.db.models import Count, Max

from runs.models import Experiment, Run
from runs.services.experiments import experiment_estimate

OPEN = (Run.Status.QUEUED, Run.Status.RUNNING)


class RunStep(TypedDict):
    """A running run and the step its agent last reported."""

    id: int
    host: str
    build: str
    workload: str
    round: int | None
    step: str


class Progress(TypedDict):
    """`status` as Experiment.status; `runs` counts by run status (and `total`); `rounds`
    and `max_rounds` the latest round queued and the budget (null outside rounds; a
    capacity search's probes a cell);
    `remaining_seconds` the estimate's time for the runs still open (null when the
    estimate has none: a sweep by transactions)."""

    id: int
    status: str
    runs: dict[str, int]
    running: list[RunStep]
    rounds: int | None
    max_rounds: int | None
    ended: str
    remaining_seconds: int | None


def experiment_progress(experiment: Experiment) -> Progress:
    """The experiment's progress, from its runs (one query each for counts and steps)."""
    by_status = dict(experiment.runs.values_list("status").annotate(count=Count("pk")).order_by())
    counts = {status: by_status.get(status, 0) for status in Run.Status.values}
    total = sum(counts.values())
    open_runs = counts[Run.Status.QUEUED] + counts[Run.Status.RUNNING]
    latest = experiment.runs.aggregate(latest=Max("round"))["latest"]
    if experiment.capacity:
        max_rounds: int | None = experiment.capacity_probes
        ended = (experiment.capacity_state or {}).get("ended") or ""
        remaining = _capacity_remaining(experiment, open_runs, latest or 0)
    else:
        max_rounds = experiment.max_rounds if experiment.adaptive else experiment.repeats
        ended = (experiment.adaptive_state or {}).get("ended") or ""
        remaining = _remaining(experiment, open_runs)
    return {
        "id": experiment.pk,
        "status": experiment.status,
        "runs": {**counts, "total": total},
        "running": running_steps(experiment),
        "rounds": latest,
        "max_rounds": max_rounds,
        "ended": ended,
        "remaining_seconds": remaining,
    }


def running_steps(experiment: Experiment) -> list[RunStep]:
    """The experiment's running runs, in their order, each with the step its agent last
    reported (a build's progress, `pgbench -i`'s, the point measured)."""
    running = experiment.runs.filter(status=Run.Status.RUNNING).select_related(
        "host", "build", "workload"
    )
    return [
        {
            "id": run.pk,
            "host": run.host.name,
            "build": run.build.name,
            "workload": run.workload.name,
            "round": run.round,
            "step": run.step,
        }
        for run in running.order_by("position")
    ]


def _capacity_remaining(experiment: Experiment, open_runs: int, latest: int) -> int | None:
    """A capacity search's rounds each take the estimate's seconds, and it is expected to
    take about the estimate's expected rounds, of which `latest` began (the open one
    counted whole; at least that one while it runs)."""
    if not open_runs:
        return 0
    estimate = experiment_estimate(experiment)
    per_round, expected = estimate["estimated_seconds"], estimate["expected_seconds"]
    if not per_round or expected is None:
        return None
    rounds_left = max(1.0, expected / per_round - latest + 1)
    return round(per_round * rounds_left)


def _remaining(experiment: Experiment, open_runs: int) -> int | None:
    """The estimate's seconds per run times the runs still open."""
    if not open_runs:
        return 0
    estimate = experiment_estimate(experiment)
    if estimate["estimated_seconds"] is None or not estimate["runs"]:
        return None
    return round(estimate["estimated_seconds"] / estimate["runs"] * open_runs)
