"""Share links: create (the link shown once) and revoke (signed in), and the read-only
pages behind a token."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse, QueryDict
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from runs import selectors, services
from runs.analysis.compare import METRICS
from runs.models import Comparison, Experiment, Run, ShareLink
from runs.views.auth import AuthenticatedHttpRequest
from runs.views.content.comparing import baseline_from, saved_comparison_context
from runs.views.content.context import experiment_context, export_urls, run_context
from runs.views.export import export_response

TEMPLATES = {
    "run": "runs/run_detail.html",
    "experiment": "runs/experiment_detail.html",
    "comparison": "runs/comparison_detail.html",
}


@login_required
@require_POST
def share_create(request: AuthenticatedHttpRequest, kind: str, pk: int) -> HttpResponse:
    _link, token = services.share_link_create(request.user, _share_target(kind, pk))
    # The page's choices (a comparison's chart layout, baseline, ...) travel with the link.
    query = QueryDict(request.POST.get("query", "")).urlencode()
    suffix = f"?{query}" if query else ""
    # Shown this once (runs/base.html): the lab keeps only the token's digest.
    messages.success(request, reverse("shared", args=[token]) + suffix, extra_tags="share-link")
    return redirect(reverse(f"{kind}-detail", args=[pk]) + suffix)


def _share_target(kind: str, pk: int) -> Run | Experiment | Comparison:
    """What a new link shares (`kind` is run, experiment or comparison); 404 when it is gone."""
    if kind == "run":
        return get_object_or_404(Run, pk=pk)
    if kind == "experiment":
        return get_object_or_404(Experiment, pk=pk)
    return get_object_or_404(Comparison, pk=pk)


@login_required
@require_POST
def share_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    link = get_object_or_404(ShareLink, pk=pk)
    services.share_link_revoke(link, request.user)
    messages.success(request, "Share link revoked: it no longer opens anything.")
    return redirect(f"{link.target_kind}-detail", pk=link.target.pk)


def _active_link(request: HttpRequest, token: str) -> ShareLink | HttpResponse:
    """The active link, or the page that says why it opens nothing (410 or 404)."""
    link = services.share_link_resolve(token)
    if link is not None:
        return link
    revoked = services.share_link_was_revoked(token)
    context = {"revoked": revoked, "read_only": True}
    return render(request, "runs/share_refused.html", context, status=410 if revoked else 404)


def shared(request: HttpRequest, token: str) -> HttpResponse:
    """The read-only page of whatever the link shares; no sign-in needed."""
    link = _active_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    urls = export_urls(lambda fmt: reverse("shared-export", args=[token, fmt]))
    urls["zoom"] = reverse("shared-timeline", args=[token])
    target = link.target
    if isinstance(target, Run):
        urls["events"] = reverse("shared-events", args=[token])
        context = run_context(selectors.run_get(target.pk), read_only=True, urls=urls)
    elif isinstance(target, Experiment):
        metric = request.GET.get("metric", "tps")
        metric = metric if metric in METRICS else "tps"
        context = experiment_context(target, metric, read_only=True, urls=urls)
    else:
        context = saved_comparison_context(target, True, urls, query=request.GET)
    return render(request, TEMPLATES[link.target_kind], context)


def shared_export(request: HttpRequest, token: str, fmt: str) -> HttpResponse:
    link = _active_link(request, token)
    if isinstance(link, HttpResponse):
        return link
    target = link.target
    baseline = None
    if isinstance(target, Run):
        runs = [selectors.run_get(target.pk)]
    elif isinstance(target, Experiment):
        runs = selectors.experiment_runs(target)
    else:
        runs = selectors.comparison_runs(target)
        baseline, _error = baseline_from(
            runs, target.baseline or runs[0], request.GET.get("baseline")
        )
    return export_response(runs, fmt, f"shared-{link.target_kind}", request.GET, baseline)
