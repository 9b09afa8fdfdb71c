"""History pages: importing pgbench outputs, series with their charts and alerts, notes."""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.contrib.auth.models import User
from django.core.exceptions import PermissionDenied
from django.http import HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from agents.contract.errors import JobError
from runs.charts.figures import figure_json
from runs.charts.history import series_figures
from runs.forms.history import AcknowledgeForm, ImportForm, NoteForm, SeriesForm
from runs.models import Alert, Host, Run, Series
from runs.reproduce.script import reproduce_script, run_manifest
from runs.selectors import alert_groups
from runs.services.access.permissions import check_can_change
from runs.services.errors import Conflict
from runs.services.history import alerts as alerts_service
from runs.services.history import series as series_service
from runs.services.history.import_reading import UploadedOutput
from runs.services.history.imports import ImportDetails, pgbench_import
from runs.views.auth import AuthenticatedHttpRequest


@login_required
def import_outputs(request: AuthenticatedHttpRequest) -> HttpResponse:
    """GET: the upload form. POST: import every readable file, report each refused one."""
    form = ImportForm(request.POST or None, request.FILES or None)
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        uploads = [UploadedOutput(f.name, f.read()) for f in data["outputs"]]
        details = ImportDetails(
            data["command_line"],
            data["pg_version"],
            data["notes"],
            data["host_name"],
            data["describe"],
        )
        outcome = pgbench_import(request.user, uploads, details)
        for error in outcome.errors:
            messages.error(request, f"Not imported: {error}")
        for duplicate in outcome.duplicates:
            messages.warning(request, f"Imported again: {duplicate}")
        for unmatched in outcome.unmatched:
            messages.warning(request, f"Description: {unmatched}")
        if outcome.experiment is not None:
            messages.success(request, f"Imported {len(outcome.runs)} of {len(uploads)} files.")
            return redirect("experiment-detail", pk=outcome.experiment.pk)
    return render(request, "runs/import.html", {"form": form})


@login_required
def series_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = SeriesForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        series = form.save(commit=False)
        series.created_by = request.user
        series_service.series_save(series)
        return redirect("series-detail", pk=series.pk)
    context = {"series_list": Series.objects.select_related("template"), "form": form}
    return render(request, "runs/series_list.html", context)


@login_required
def series_detail(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    series = get_object_or_404(Series, pk=pk)
    occurrences = series.occurrences.select_related("experiment").order_by("-fired_at")
    context = {
        "series": series,
        "occurrences": occurrences,
        "alerts": series.alerts.select_related(
            "occurrence", "acknowledged_by", "change_point", "confirmation_experiment"
        ).prefetch_related("notes__created_by"),
        "figures": [
            {
                "id": f"fig-series-{metric}",
                "figure": figure_json(figure["data"], figure["layout"], f"series-{pk}-{metric}"),
            }
            for metric, figure in series_figures(series).items()
        ],
    }
    return render(request, "runs/series_detail.html", context)


@login_required
@require_POST
def series_fire_now(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    series = get_object_or_404(Series, pk=pk)
    check_can_change(request.user, series, "start an occurrence of")
    try:
        occurrence = series_service.series_fire(series)
    except (JobError, Conflict) as error:
        messages.error(request, f"The occurrence was created but could not start: {error}")
        return redirect("series-detail", pk=pk)
    return redirect("experiment-detail", pk=occurrence.experiment_id)


@login_required
@require_POST
def series_toggle(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """Pause or resume the series' schedule."""
    series = get_object_or_404(Series, pk=pk)
    check_can_change(request.user, series, "pause or resume")
    series.enabled = not series.enabled
    series_service.series_save(series)
    return redirect("series-detail", pk=pk)


@login_required
def alert_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Alerts grouped by series, newest first in each, with their states and notes."""
    context = {"groups": alert_groups(), "ack_form": AcknowledgeForm(), "states": Alert.State}
    return render(request, "runs/alert_list.html", context)


@login_required
@require_POST
def alert_acknowledge(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    return _alert_write(request, pk, "acknowledge", alerts_service.alert_acknowledge)


@login_required
@require_POST
def alert_fix(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    return _alert_write(request, pk, "mark fixed", alerts_service.alert_fixed)


@login_required
@require_POST
def alert_note_add(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    def add(alert: Alert, user: User, text: str) -> None:
        series_service.note_add(user, text, alert=alert)

    return _alert_write(request, pk, "add notes to", add)


def _alert_write(
    request: AuthenticatedHttpRequest,
    pk: int,
    action: str,
    write: Callable[[Alert, User, str], object],
) -> HttpResponse:
    """A write on an alert with the posted note, by its series' owner or staff."""
    alert = get_object_or_404(Alert.objects.select_related("series"), pk=pk)
    check_can_change(request.user, alert.series, f"{action} alerts of")
    form = AcknowledgeForm(request.POST)
    if not form.is_valid():
        messages.error(request, f"To {action} an alert, give a note: what you found or did.")
    else:
        write(alert, request.user, form.cleaned_data["note"])
    back = request.POST.get("next", "")
    safe = url_has_allowed_host_and_scheme(back, {request.get_host()}, request.is_secure())
    return redirect(back if back and safe else "alert-list")


@login_required
@require_POST
def run_note_add(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    run = get_object_or_404(Run, pk=pk)
    text = _note_text(request)
    if text:
        series_service.note_add(request.user, text, run=run)
    return redirect("run-detail", pk=pk)


@login_required
@require_POST
def host_note_add(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    host = get_object_or_404(Host, pk=pk)
    if not request.user.is_staff:
        raise PermissionDenied("Only staff add notes to hosts.")
    text = _note_text(request)
    if text:
        series_service.note_add(request.user, text, host_id=host.pk)
    return redirect("host-detail", pk=pk)


def _note_text(request: AuthenticatedHttpRequest) -> str:
    """The posted note's text, or "" after telling the user what a note needs."""
    form = NoteForm(request.POST)
    if form.is_valid():
        return form.cleaned_data["text"]
    messages.error(request, "A note needs text (up to 2000 characters).")
    return ""


@login_required
def run_manifest_json(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The run's manifest, as a download (`python -m agents run --manifest FILE`)."""
    manifest = run_manifest(get_object_or_404(Run, pk=pk))
    response = JsonResponse(manifest, json_dumps_params={"indent": 2})
    response["Content-Disposition"] = f'attachment; filename="run-{pk}-manifest.json"'
    return response


@login_required
def run_reproduce_script(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    """The bash script that reproduces the run without the lab."""
    script = reproduce_script(run_manifest(get_object_or_404(Run, pk=pk)))
    response = HttpResponse(script, content_type="text/x-shellscript; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="reproduce-run-{pk}.sh"'
    return response
