"""Reads that are more than a one-line queryset."""

from runs.models import Experiment, Run, RunEvent


def run_results(run: Run, point: int | None = None) -> dict:
    """A run's points with their progress timelines and host/server samples.

    `point` narrows the timelines to one point (results always list every point).
    """
    timelines = {"point": point} if point is not None else {}
    return {
        "results": list(run.results.order_by("index")),
        "progress": list(run.progress.filter(**timelines).order_by("point", "t")),
        "host_samples": list(run.host_samples.filter(**timelines).order_by("point", "t")),
        "server_samples": list(run.server_samples.filter(**timelines).order_by("point", "t")),
    }


def run_logs(run: Run, after_seq: int = 0) -> list[RunEvent]:
    """The run's log events after `after_seq`, in order."""
    return list(run.events.filter(type="log", seq__gt=after_seq).order_by("seq"))


def run_events_after(run: Run, after_seq: int = 0) -> list[RunEvent]:
    """Every stored event of the run after `after_seq` (for live pages)."""
    return list(run.events.filter(seq__gt=after_seq).order_by("seq"))


def runs_for_listing():
    """Runs with what a list shows, newest first."""
    return Run.objects.select_related("experiment", "host", "build", "config_profile", "workload")


def experiment_runs(experiment: Experiment):
    """The runs of an experiment in matrix order (re-runs after their originals)."""
    return runs_for_listing().filter(experiment=experiment).order_by("position", "queued_at")
