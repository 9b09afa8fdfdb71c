"""Scheduling an experiment from one form, the experiment list and page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_GET, require_POST

from agents.contract.errors import JobError
from runs import presets, selectors, services
from runs.analysis.compare import METRICS
from runs.estimates import GUESSED_TPS
from runs.forms.experiments import EstimateForm, ScheduleForm, form_field_for
from runs.models import Experiment, Run
from runs.models.catalogue import agent_hosts
from runs.services.access.permissions import check_can_change
from runs.services.errors import Conflict
from runs.services.progress import running_steps
from runs.views.content.context import experiment_context, export_urls
from runs.views.export import export_response


@login_required
def experiment_list(request: HttpRequest) -> HttpResponse:
    return render(
        request, "runs/experiment_list.html", {"experiments": selectors.experiment_list()[:200]}
    )


def _schedule_initial(request: HttpRequest) -> dict[str, object]:
    """The form's starting values: a preset's if one is picked, else the defaults."""
    preset = presets.find(request.GET.get("preset", ""))
    return presets.form_initial(preset) if preset else {}


@login_required
def schedule(request: HttpRequest) -> HttpResponse:
    """GET: the form (optionally from a preset). POST: create, then start or review."""
    form = ScheduleForm(request.POST or None, initial=_schedule_initial(request))
    if request.method == "POST" and form.is_valid():
        experiment = _schedule(request, form)
        if experiment is not None:
            return redirect("experiment-detail", pk=experiment.pk)
    context = {
        "form": form,
        "presets": presets.PRESETS,
        "hosts": selectors.host_list().filter(pk__in=agent_hosts()),
        "no_hosts": not agent_hosts().exists(),
    }
    return render(request, "runs/schedule.html", context)


@login_required
@require_GET
def schedule_estimate(request: HttpRequest) -> JsonResponse:
    """The schedule form's estimate as the server makes it (services.draft_estimate), the
    form's values as the query; nothing is saved. 400 with the errors, field by field,
    while the values do not make an experiment."""
    form = EstimateForm(request.GET)
    if not form.is_valid():
        errors = form.errors.get_json_data()
        by_field = {name: [error["message"] for error in found] for name, found in errors.items()}
        return JsonResponse({"errors": by_field}, status=400)
    try:
        return JsonResponse(services.draft_estimate(form.service_data()))
    except JobError as exc:
        field = form_field_for(exc.field) or "__all__"
        return JsonResponse({"errors": {field: [exc.message]}}, status=400)


def _schedule(request: HttpRequest, form: ScheduleForm) -> Experiment | None:
    """Create the experiment; start it unless the user asked to review first."""
    start = "review" not in request.POST
    try:
        scheduled = services.experiment_schedule(request.user, form.service_data(), start)
    except JobError as exc:
        form.add_job_error(exc)
        return None
    if start:
        messages.success(request, f"Started: {len(scheduled.runs)} run(s) queued.")
    for note in scheduled.notes:
        messages.info(request, note)
    return scheduled.experiment


@login_required
def experiment_detail(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_object_or_404(Experiment, pk=pk)
    metric = request.GET.get("metric", "tps")
    if metric not in METRICS:
        metric = "tps"
    urls = export_urls(lambda fmt: reverse("experiment-export", args=[pk, fmt]))
    urls["report"] = reverse("api:experiment-report", args=[pk])
    context = experiment_context(experiment, metric, read_only=False, urls=urls)
    context["share_links"] = services.share_links_of(request.user).filter(experiment=experiment)
    if experiment.runs.filter(status__in=Run.ACTIVE_STATES).exists():
        context["running"] = running_steps(experiment)
    if experiment.status == "draft":
        context["estimate"] = services.experiment_estimate(experiment)
        context["guessed_tps"] = GUESSED_TPS
        context["not_ready"] = _why_not_ready(experiment)
    return render(request, "runs/experiment_detail.html", context)


def _why_not_ready(experiment: Experiment) -> JobError | None:
    """What starting would refuse, checked as the start checks it (nothing is queued)."""
    try:
        services.experiment_check(experiment)
    except JobError as exc:
        return exc
    return None


@login_required
@require_POST
def experiment_start(request: HttpRequest, pk: int) -> HttpResponse:
    experiment = get_object_or_404(Experiment, pk=pk)
    check_can_change(request.user, experiment, "start")
    try:
        runs = services.experiment_start(experiment, request.user)
        messages.success(request, f"Started: {len(runs)} run(s) queued.")
    except (JobError, Conflict) as exc:
        messages.error(request, str(exc))
    return redirect("experiment-detail", pk=pk)


@login_required
def experiment_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    experiment = get_object_or_404(Experiment, pk=pk)
    return export_response(
        selectors.experiment_runs(experiment), fmt, f"experiment-{pk}", request.GET
    )
