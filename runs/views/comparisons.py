"""Comparisons: made from runs ticked in the run list, saved, shown against a baseline."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from agents.contract.errors import JobError
from runs import selectors, services
from runs.forms.experiments import CompareForm
from runs.models import Comparison
from runs.views.auth import AuthenticatedHttpRequest
from runs.views.content.comparing import baseline_from, saved_comparison_context
from runs.views.content.context import export_urls
from runs.views.export import export_response


@login_required
def comparison_list(request: HttpRequest) -> HttpResponse:
    comparisons = Comparison.objects.prefetch_related("runs").select_related("created_by")[:200]
    return render(request, "runs/comparison_list.html", {"comparisons": comparisons})


@login_required
@require_POST
def comparison_create(request: AuthenticatedHttpRequest) -> HttpResponse:
    """Save the ticked runs as a comparison and open it."""
    form = CompareForm(request.POST)
    if not form.is_valid():
        for errors in form.errors.values():
            messages.error(request, " ".join(str(error) for error in errors))
        return redirect("run-list")
    # Unless one is chosen, the baseline is the first cell in its experiment's order.
    runs = selectors.in_cell_order(list(form.cleaned_data["runs"]))
    baseline = form.cleaned_data["baseline"] or runs[0]
    name = form.cleaned_data["name"] or "Runs " + ", ".join(f"#{run.pk}" for run in runs)
    try:
        comparison = services.comparison_create(request.user, name, runs, baseline)
    except JobError as exc:
        messages.error(request, exc.message)
        return redirect("run-list")
    return redirect("comparison-detail", pk=comparison.pk)


@login_required
def comparison_detail(request: HttpRequest, pk: int) -> HttpResponse:
    comparison = get_object_or_404(Comparison, pk=pk)
    urls = export_urls(lambda fmt: reverse("comparison-export", args=[pk, fmt]))
    urls["zoom"] = reverse("run-timeline")
    urls["report"] = reverse("api:comparison-report", args=[pk])
    context = saved_comparison_context(comparison, read_only=False, urls=urls, query=request.GET)
    context["share_links"] = services.share_links_of(request.user).filter(comparison=comparison)
    return render(request, "runs/comparison_detail.html", context)


@login_required
def comparison_export(request: HttpRequest, pk: int, fmt: str) -> HttpResponse:
    comparison = get_object_or_404(Comparison, pk=pk)
    runs = selectors.comparison_runs(comparison)
    baseline, _error = baseline_from(
        runs, comparison.baseline or runs[0], request.GET.get("baseline")
    )
    return export_response(runs, fmt, f"comparison-{pk}", request.GET, baseline)
