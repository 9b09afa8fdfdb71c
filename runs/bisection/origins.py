"""Where a bisection's form starts from: an experiment's cell, or a series alert.

From a cell (`?experiment=<pk>&cell=<n>`): its host, config profile, workload, storage,
first client count and duration, and, when its build is from a git repository, the
repository, build options and ref (as the bad ref). From an alert (`?alert=<pk>`): the
cell of the alert's occurrence (the first after the change point) and the commits the
agent built for the occurrence before it (good) and the alert's (bad), when both were
source builds of one git repository; `alert_commits` says why not otherwise.
"""

from collections.abc import Mapping

from runs.models import Alert, Occurrence, Run


def initial_from(query: Mapping[str, str]) -> dict[str, object]:
    """The form's starting values for the query string's `experiment`+`cell` or `alert`."""
    if query.get("alert", "").isdigit():
        alert = Alert.objects.filter(pk=int(query["alert"])).first()
        return alert_initial(alert) if alert else {}
    if query.get("experiment", "").isdigit():
        cell = int(query["cell"]) if query.get("cell", "").isdigit() else 0
        run = _first_run(int(query["experiment"]), cell)
        return cell_initial(run) if run else {}
    return {}


def _first_run(experiment_pk: int, cell: int) -> Run | None:
    runs = Run.objects.filter(experiment_id=experiment_pk, cell=cell)
    return runs.select_related("experiment", "build").order_by("pk").first()


def cell_initial(run: Run) -> dict[str, object]:
    """A run's cell as the form's values (and its git build's source, if it has one)."""
    experiment = run.experiment
    initial: dict[str, object] = {
        "name": f"{experiment.name}: find the commit",
        "host": run.host_id,
        "config_profile": run.config_profile_id,
        "workload": run.workload_id,
        "storage_data": run.storage_data,
        "clients": (experiment.clients or [1])[0],
        "duration_s": experiment.duration_s or 10,
        "version": run.build.version,
    }
    definition = run.build.definition or {}
    source = definition.get("source") or {}
    if source.get("kind") == "git":
        initial.update(
            repository=source.get("location", ""),
            bad_ref=source.get("ref") or "",
            configure_flags=definition.get("configure_flags") or [],
            cflags=definition.get("cflags") or "",
        )
    return initial


def alert_commits(alert: Alert) -> tuple[str, str, str] | str:
    """(repository, good commit, bad commit) around the alert's change point, or a sentence
    saying why there is none to bisect."""
    if alert.change_point_id is None:
        return "it marks no change point (an occurrence the host slowed): nothing to bisect"
    after = alert.occurrence
    before = (
        Occurrence.objects.filter(series=alert.series, fired_at__lt=after.fired_at)
        .order_by("-fired_at")
        .first()
    )
    if before is None:
        return "the series has no occurrence before the change point"
    found = [_git_build(occurrence) for occurrence in (before, after)]
    if found[0] is None or found[1] is None:
        return "the occurrences around it were not both built from a git repository"
    (repository, good), (other, bad) = found[0], found[1]
    if repository != other:
        return "the occurrences around it were built from different repositories"
    if good == bad:
        return "both occurrences built the same commit: the change is not in the code"
    return repository, good, bad


def _git_build(occurrence: Occurrence) -> tuple[str, str] | None:
    """(repository, commit) the occurrence's first run was built from, if from git."""
    run = occurrence.experiment.runs.filter(status=Run.Status.SUCCEEDED).order_by("pk").first()
    record = run.build_record if run else {}
    source = (record.get("definition") or {}).get("source") or {}
    digest = str(record.get("source_digest") or "")
    if source.get("kind") != "git" or not digest.startswith("git:"):
        return None
    return str(source.get("location")), digest.removeprefix("git:")


def alert_initial(alert: Alert) -> dict[str, object]:
    run = alert.occurrence.experiment.runs.select_related("experiment", "build").first()
    found = alert_commits(alert)
    if run is None or isinstance(found, str):
        return {}
    repository, good, bad = found
    initial = cell_initial(run)
    initial.update(repository=repository, good_ref=good, bad_ref=bad)
    initial["name"] = f"{alert.series.name}: {alert.metric} {alert.change_percent:+.1f} %"
    return initial
