"""Reads the pages need, kept out of the views: querysets with their joins,
results grouped per run, and the run-page payloads the live stream shares."""

from typing import NamedTuple, NotRequired, TypedDict

from django.db.models import Count, Max, QuerySet

from runs.models import (
    Alert,
    Comparison,
    ConfigProfile,
    Experiment,
    Host,
    HostSample,
    ProgressSample,
    Result,
    Run,
    RunEvent,
    Series,
    ServerSample,
)

# provenance: an imported run is labelled by its file (runs.views.content.context.run_label).
RUN_JOINS = ("host", "build", "config_profile", "workload", "experiment", "provenance")


class LiveCursor(TypedDict):
    """The highest row ids a live page has: progress samples, host samples, results,
    (a run with a client host) client host samples, and server samples (none are sent
    after a cursor without `s`)."""

    p: int
    h: int
    r: int
    c: NotRequired[int]
    s: NotRequired[int]


class RunState(TypedDict):
    """The run fields the live stream sends when they change."""

    status: str
    step: str
    error_message: str


class LiveRows(TypedDict):
    """What the live stream sends next: rows stored after a cursor, and the run's state
    (None once the run is deleted)."""

    run: RunState | None
    progress: list[ProgressSample]
    host: list[HostSample]
    results: list[Result]
    client_host: list[HostSample]
    server: list[ServerSample]


def run_list(status: str = "", host: str = "", experiment: str = "") -> QuerySet[Run]:
    """Runs newest first with their best tps and number of finished points."""
    runs = Run.objects.select_related(*RUN_JOINS).annotate(
        best_tps=Max("results__tps"), points_done=Count("results", distinct=True)
    )
    if status:
        runs = runs.filter(status=status)
    if host:
        runs = runs.filter(host__name=host)
    if experiment:
        runs = runs.filter(experiment_id=experiment)
    return runs.order_by("-queued_at", "-pk")


def run_get(pk: int) -> Run:
    """A run with its definition loaded (raises Run.DoesNotExist)."""
    return Run.objects.select_related(*RUN_JOINS).get(pk=pk)


def runs_in_order(pks: list[int]) -> list[Run]:
    """The runs with these ids, in the order given, unknown ids skipped."""
    found = Run.objects.select_related(*RUN_JOINS).in_bulk(pks)
    return [found[pk] for pk in pks if pk in found]


def results_by_run(runs: list[Run]) -> dict[int, list[Result]]:
    """Run id -> its results in point order."""
    grouped: dict[int, list[Result]] = {run.pk: [] for run in runs}
    for result in Result.objects.filter(run__in=runs).order_by("run_id", "index"):
        grouped[result.run_id].append(result)
    return grouped


class RunTimelines(NamedTuple):
    """Each run id -> its rows in point and time order, per kind of sample."""

    progress: dict[int, list[ProgressSample]]
    host: dict[int, list[HostSample]]
    server: dict[int, list[ServerSample]]
    # Runs with a client host: that host's samples (the others have none).
    client: dict[int, list[HostSample]]


def timelines_by_run(run_ids: set[int]) -> RunTimelines:
    """Every sample of these runs, one query per model."""
    found = RunTimelines({}, {}, {}, {})
    for grouped in found:
        grouped.update({pk: [] for pk in run_ids})
    order = ("run_id", "point", "t", "pk")
    for progress in ProgressSample.objects.filter(run_id__in=run_ids).order_by(*order):
        found.progress[progress.run_id].append(progress)
    for server in ServerSample.objects.filter(run_id__in=run_ids).order_by(*order):
        found.server[server.run_id].append(server)
    by_role = {HostSample.Role.SERVER: found.host, HostSample.Role.CLIENT: found.client}
    for host in HostSample.objects.filter(run_id__in=run_ids).order_by(*order):
        by_role[HostSample.Role(host.role)][host.run_id].append(host)
    return found


def run_logs(run: Run) -> list[RunEvent]:
    """The agent's log, status and step events of a run in order."""
    return list(run.events.filter(type__in=("log", "status", "step")).order_by("seq"))


def live_cursor(run: Run) -> LiveCursor:
    """The highest stored row ids the page was rendered with; the stream starts after them."""
    hosts = run.host_samples.all()
    cursor: LiveCursor = {
        "p": _last_pk(run.progress.all()),
        "h": _last_pk(hosts.filter(role=HostSample.Role.SERVER)),
        "r": _last_pk(run.results.all()),
    }
    if run.client_host_id:
        cursor["c"] = _last_pk(hosts.filter(role=HostSample.Role.CLIENT))
    cursor["s"] = _last_pk(run.server_samples.all())
    return cursor


def _last_pk(
    rows: QuerySet[ProgressSample]
    | QuerySet[HostSample]
    | QuerySet[Result]
    | QuerySet[ServerSample],
) -> int:
    return rows.aggregate(m=Max("pk"))["m"] or 0


def rows_after(run_id: int, cursor: LiveCursor) -> LiveRows:
    """Rows stored after `cursor` for the live stream, oldest first, and the run's state."""
    run = Run.objects.filter(pk=run_id).values("status", "step", "error_message").first()
    return {
        "run": run,
        "progress": list(
            ProgressSample.objects.filter(run_id=run_id, pk__gt=cursor["p"]).order_by("pk")[:500]
        ),
        "host": _host_rows_after(run_id, HostSample.Role.SERVER, cursor["h"]),
        "results": list(Result.objects.filter(run_id=run_id, pk__gt=cursor["r"]).order_by("pk")),
        "client_host": _client_rows_after(run_id, cursor),
        "server": _server_rows_after(run_id, cursor),
    }


def _server_rows_after(run_id: int, cursor: LiveCursor) -> list[ServerSample]:
    """Server samples after the cursor; none asked for when it has no `s`."""
    if "s" not in cursor:
        return []
    rows = ServerSample.objects.filter(run_id=run_id, pk__gt=cursor["s"]).order_by("pk")
    return list(rows[:500])


def last_point_server_samples(run_id: int, up_to: int) -> list[ServerSample]:
    """The server samples of the latest point stored up to row `up_to`, in order: those
    a live page was drawn with, whose checkpoints it already shows."""
    stored = ServerSample.objects.filter(run_id=run_id, pk__lte=up_to)
    last = stored.order_by("-pk").values_list("point", flat=True).first()
    if last is None:
        return []
    return list(stored.filter(point=last).order_by("pk"))


def _host_rows_after(run_id: int, role: HostSample.Role, after: int) -> list[HostSample]:
    rows = HostSample.objects.filter(run_id=run_id, role=role, pk__gt=after).order_by("pk")
    return list(rows[:500])


def _client_rows_after(run_id: int, cursor: LiveCursor) -> list[HostSample]:
    """Client host samples after the cursor; none asked for when it has no `c` (no client)."""
    if "c" not in cursor:
        return []
    return _host_rows_after(run_id, HostSample.Role.CLIENT, cursor["c"])


def experiment_list() -> QuerySet[Experiment]:
    return Experiment.objects.annotate(run_count=Count("runs")).select_related("created_by")


def experiment_runs(experiment: Experiment) -> list[Run]:
    return list(experiment.runs.select_related(*RUN_JOINS).order_by("position", "pk"))


def in_cell_order(runs: list[Run]) -> list[Run]:
    """Runs in their experiments' cell order (the order the cells were given in), then
    round: in rounds the ids follow the random queue order, so the first id is any cell."""
    return sorted(runs, key=lambda run: (run.experiment_id, run.cell, run.round or 0, run.pk))


def comparison_runs(comparison: Comparison) -> list[Run]:
    """The compared runs, the baseline first, then in their experiments' cell order."""
    runs = in_cell_order(list(comparison.runs.select_related(*RUN_JOINS)))
    return sorted(runs, key=lambda run: run.pk != comparison.baseline_id)


def host_list() -> QuerySet[Host]:
    return Host.objects.prefetch_related("storage_targets").select_related("current_run")


def config_profiles() -> QuerySet[ConfigProfile]:
    return ConfigProfile.objects.select_related("parent").annotate(run_count=Count("runs"))


ALERTS_SHOWN = 200


def alert_groups() -> list[tuple[Series, list[Alert]]]:
    """The latest ALERTS_SHOWN alerts by series (the series with the newest alert first),
    newest first in each, with their change points, confirmations and notes."""
    alerts = (
        Alert.objects.select_related(
            "series",
            "occurrence__experiment",
            "acknowledged_by",
            "change_point__before_occurrence__experiment",
            "confirmation_experiment",
        )
        .prefetch_related("notes__created_by")
        .order_by("-created_at", "-pk")[:ALERTS_SHOWN]
    )
    groups: dict[int, tuple[Series, list[Alert]]] = {}
    for alert in alerts:
        groups.setdefault(alert.series_id, (alert.series, []))[1].append(alert)
    return list(groups.values())
