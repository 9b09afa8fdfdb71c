"""The run list (with checkboxes to compare) and the run page."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.paginator import Paginator
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs import selectors, services
from runs.models import Host, Run
from runs.services.access.permissions import check_can_change
from runs.services.errors import Conflict
from runs.views.auth import AuthenticatedHttpRequest
from runs.views.content.context import export_urls, run_context
from runs.views.export import export_response

RUNS_PER_PAGE = 50


def _run_or_404(pk: int) -> Run:
    try:
        return selectors.run_get(pk)
    except Run.DoesNotExist as exc:
        raise Http404(f"There is no run {pk}.") from exc


@login_required
def run_list(request: HttpRequest) -> HttpResponse:
    filters = {key: request.GET.get(key, "") for key in ("status", "host", "experiment")}
    page = Paginator(selectors.run_list(**filters), RUNS_PER_PAGE).get_page(request.GET.get("page"))
    return render(
        request,
        "runs/run_list.html",
        {
            "page": page,
            "filters": filters,
            "statuses": Run.Status.choices,
            "hosts": Host.objects.values_list("name", flat=True),
            "any_hosts": Host.objects.exists(),
        },
    )


@login_required
def run_detail(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(pk)
    urls = {
        "events": reverse("run-events", args=[pk]),
        "zoom": reverse("run-timeline"),
        **export_urls(lambda fmt: reverse("run-export", args=[pk, fmt])),
    }
    context = run_context(run, read_only=False, urls=urls)
    context["share_links"] = services.share_links_of(request.user).filter(run=run)
    return render(request, "runs/run_detail.html", context)


@login_required
@require_POST
def run_cancel(request: HttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(pk)
    check_can_change(request.user, run, "cancel")
    try:
        services.run_cancel(run, request.user)
        messages.success(request, f"Run #{pk}: cancel requested.")
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect("run-detail", pk=pk)


@login_required
@require_POST
def run_rerun(request: AuthenticatedHttpRequest, pk: int) -> HttpResponse:
    run = _run_or_404(pk)
    try:
        rerun = services.run_rerun(run, request.user)
    except Conflict as exc:
        messages.error(request, exc.message)
        return redirect("run-detail", pk=pk)
    messages.success(request, f"Re-run of #{pk} queued as #{rerun.pk}.")
    return redirect("run-detail", pk=rerun.pk)


@login_required
def run_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    return export_response([_run_or_404(pk)], fmt, f"run-{pk}", request.GET)


@login_required
def run_build_log(request: HttpRequest, pk: int) -> HttpResponse:
    """The whole log of the run's source build (configure, make, make install) as text."""
    run = _run_or_404(pk)
    log = (run.build_record or {}).get("log")
    if not log:
        raise Http404(f"Run {pk} has no source build log.")
    return HttpResponse(log, content_type="text/plain; charset=utf-8")


@login_required
def run_cpu_profile_folded(request: HttpRequest, pk: int, index: int) -> HttpResponse:
    """One point of the run's CPU-profile pass as folded stacks (`frames;... count` lines),
    what flamegraph.pl, speedscope and inferno read."""
    run = _run_or_404(pk)
    cpu_profile = run.cpu_profiles.filter(index=index).exclude(folded="").first()
    if cpu_profile is None:
        raise Http404(f"Run {pk} has no CPU profile {index}.")
    response = HttpResponse(cpu_profile.folded, content_type="text/plain; charset=utf-8")
    name = f"run-{pk}-cpu-profile-{cpu_profile.clients}-clients.folded"
    response["Content-Disposition"] = f'inline; filename="{name}"'
    return response
