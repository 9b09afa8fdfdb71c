"""The zoom endpoint: one timeline of a run between two x positions, at full resolution.

`GET ...timeline.json?run=ID&trace=NAME&x0=SECONDS&x1=SECONDS` answers
`{"run", "trace", "x0", "x1", "x", "y", "samples", "reduced"}`: every stored
sample of the trace in the range, exactly as stored (x on the run's shared time axis, None
between points), unless the range holds more than
runs.timelines.store.ZOOM_MAX_SAMPLES (then reduced as the page's charts are, and
`reduced` is true). The charts call it when the user zooms (frontend/zoom.js). A page
loaded before the trace had its name asks with `series=NAME`, which is read the same.
"""

import math

from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_GET

from runs import selectors, services
from runs.models import Run, ShareLink
from runs.timelines import store


def _invalid(field: str, message: str) -> JsonResponse:
    error = {"code": "invalid", "message": message, "fields": {field: [message]}}
    return JsonResponse({"error": error}, status=400)


def _not_found(message: str) -> JsonResponse:
    return JsonResponse({"error": {"code": "not_found", "message": message}}, status=404)


def _number(request: HttpRequest, field: str) -> float | None:
    try:
        value = float(request.GET.get(field, ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _window_response(request: HttpRequest, allowed: set[int] | None) -> JsonResponse:
    """The window asked for, of a run among `allowed` (any run when None)."""
    raw_run = request.GET.get("run", "")
    if not raw_run.isdigit():
        return _invalid("run", "Give the run's id: run=<integer>.")
    x0, x1 = _number(request, "x0"), _number(request, "x1")
    if x0 is None:
        return _invalid("x0", "Give where the range starts in seconds: x0=<number>.")
    if x1 is None or x1 < x0:
        return _invalid("x1", "Give where the range ends in seconds, not before x0: x1=<number>.")
    name = request.GET.get("trace", request.GET.get("series", ""))
    if store.source_of(name) is None:
        return _invalid("trace", f"Unknown timeline {name!r}: use a name the chart's trace has.")
    run_id = int(raw_run)
    if allowed is not None and run_id not in allowed:
        return _not_found("This link does not share that run.")
    try:
        run = selectors.run_get(run_id)
    except Run.DoesNotExist:
        return _not_found(f"There is no run {run_id}.")
    found = store.window(run, name, x0, x1)
    xs, ys = found.trace.gapped()
    body = {"run": run.pk, "trace": name, "x0": x0, "x1": x1, "x": xs, "y": ys}
    counts = found.trace.gapped_counts()
    if counts is not None:
        body["counts"] = counts
    return JsonResponse({**body, "samples": found.samples, "reduced": found.reduced})


@login_required
@require_GET
def run_timeline(request: HttpRequest) -> JsonResponse:
    return _window_response(request, None)


def _shared_run_ids(link: ShareLink) -> set[int]:
    """The runs a link shares: its run, or its experiment's or comparison's runs."""
    if link.run_id is not None:
        return {link.run_id}
    if link.experiment_id is not None:
        runs = Run.objects.filter(experiment_id=link.experiment_id)
    else:
        runs = Run.objects.filter(comparisons=link.comparison_id)
    return set(runs.values_list("pk", flat=True))


@require_GET
def shared_timeline(request: HttpRequest, token: str) -> JsonResponse:
    """The zoom of a run an active link shares; 404 for any other run or a revoked link."""
    link = services.share_link_resolve(token)
    if link is None:
        return _not_found("This share link does not exist or was revoked.")
    return _window_response(request, _shared_run_ids(link))
