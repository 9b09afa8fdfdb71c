"""Bisections: the list, the form that starts one, its page, and cancel."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from agents.contract.errors import JobError
from runs.bisection.origins import initial_from
from runs.bisection.report import bisection_report
from runs.bisection.reproduce import NothingToReproduce, bisection_script
from runs.bisection.services import bisection_cancel, bisection_start
from runs.forms.bisections import BisectionForm
from runs.models import Bisection
from runs.services.errors import Conflict
from runs.views.auth import AuthenticatedHttpRequest


@login_required
def bisection_list(request: HttpRequest) -> HttpResponse:
    bisections = Bisection.objects.select_related("host")[:200]
    return render(request, "runs/bisection_list.html", {"bisections": bisections})


@login_required
def bisection_new(request: AuthenticatedHttpRequest) -> HttpResponse:
    """GET: the form, filled from `?experiment=&cell=` or `?alert=` when given. POST: start."""
    form = BisectionForm(request.POST or None, initial=initial_from(request.GET))
    if request.method == "POST" and form.is_valid():
        try:
            bisection = bisection_start(request.user, form.cleaned_data)
        except JobError as error:
            form.add_error(error.field if error.field in form.fields else None, error.message)
        else:
            messages.success(request, f"Bisection #{bisection.pk}: step 0 queued.")
            return redirect(bisection)
    return render(request, "runs/bisection_new.html", {"form": form})


@login_required
def bisection_detail(request: HttpRequest, pk: int) -> HttpResponse:
    bisection = get_object_or_404(Bisection.objects.select_related("host"), pk=pk)
    context = {"bisection": bisection, "report": bisection_report(bisection)}
    return render(request, "runs/bisection_detail.html", context)


@login_required
@require_POST
def bisection_cancel_view(request: HttpRequest, pk: int) -> HttpResponse:
    bisection = get_object_or_404(Bisection, pk=pk)
    try:
        bisection_cancel(bisection, request.user)
        messages.success(request, f"Bisection #{pk}: cancelled, with its step's runs.")
    except Conflict as exc:
        messages.error(request, exc.message)
    return redirect(bisection)


@login_required
def bisection_reproduce(request: HttpRequest, pk: int) -> HttpResponse:
    """The bash script that builds the culprit and its parent and runs the cell on both."""
    bisection = get_object_or_404(Bisection, pk=pk)
    try:
        script = bisection_script(bisection)
    except NothingToReproduce as exc:
        raise Http404(str(exc)) from exc
    response = HttpResponse(script, content_type="text/x-shellscript; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="reproduce-bisection-{pk}.sh"'
    return response
