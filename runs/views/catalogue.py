"""Catalogue pages: hosts, builds, config profiles and workloads."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render

from runs import selectors
from runs.forms.catalogue import ConfigProfileForm, HostNotesForm, PgBuildForm, WorkloadForm
from runs.models import ConfigProfile, Host, PgBuild, PgCatalogue, Workload
from runs.queues import host_queues
from runs.services.access.permissions import can_change, check_can_change
from runs.views.auth import AuthenticatedHttpRequest
from runs.views.noise import host_noise_context

AGENT_COMMAND = "python -m agents worker --name NAME"


@login_required
def host_list(request: HttpRequest) -> HttpResponse:
    hosts = list(selectors.host_list())
    queues = host_queues(hosts)
    return render(
        request,
        "runs/host_list.html",
        {
            "hosts": [(host, queues[host.pk]) for host in hosts],
            "agent_command": AGENT_COMMAND,
        },
    )


@login_required
def host_queue(request: HttpRequest, pk: int) -> HttpResponse:
    """The host's run in progress and its waiting runs in order, each with an estimated start."""
    host = get_object_or_404(Host, pk=pk)
    queue = host_queues([host])[host.pk]
    return render(request, "runs/host_queue.html", {"host": host, "queue": queue})


@login_required
def host_detail(request: HttpRequest, pk: int) -> HttpResponse:
    host = get_object_or_404(selectors.host_list(), pk=pk)
    form = HostNotesForm(request.POST or None, instance=host)
    if request.method == "POST" and form.is_valid():
        form.save()
        messages.success(request, "Notes saved.")
        return redirect("host-detail", pk=pk)
    recent = selectors.run_list(host=host.name)[:20]
    context = {"host": host, "form": form, "recent_runs": recent, **host_noise_context(host)}
    return render(request, "runs/host_detail.html", context)


@login_required
def build_list(request: AuthenticatedHttpRequest) -> HttpResponse:
    form = PgBuildForm(
        request.POST or None, request.FILES or None, instance=PgBuild(created_by=request.user)
    )
    if request.method == "POST" and form.is_valid():
        build = form.save()
        messages.success(request, f"Build {build.name} added.")
        return redirect("build-list")
    return render(
        request,
        "runs/build_list.html",
        {
            "builds": PgBuild.objects.all(),
            "catalogues": PgCatalogue.objects.values_list("version", flat=True),
            "form": form,
        },
    )


@login_required
def config_list(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/config_list.html", {"profiles": selectors.config_profiles()})


@login_required
def config_edit(request: AuthenticatedHttpRequest, pk: int | None = None) -> HttpResponse:
    """Create (no pk) or edit a profile; the page shows the diff against its parent."""
    profile = get_object_or_404(ConfigProfile, pk=pk) if pk else None
    if request.method == "POST" and profile is not None:
        check_can_change(request.user, profile, "change")
    instance = profile or ConfigProfile(created_by=request.user)
    form = ConfigProfileForm(request.POST or None, instance=instance)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        for note in form.notes:
            messages.info(request, note)
        messages.success(request, f"Config profile {saved.name} saved.")
        return redirect("config-detail", pk=saved.pk)
    context: dict[str, object] = {
        "form": form,
        "profile": profile,
        "may_save": can_change(request.user, instance),
    }
    if profile:
        context["diff"] = profile.diff_against_parent()
        context["effective"] = profile.effective_settings()
    return render(request, "runs/config_edit.html", context)


@login_required
def workload_list(request: HttpRequest) -> HttpResponse:
    return render(request, "runs/workload_list.html", {"workloads": Workload.objects.all()})


@login_required
def workload_edit(request: AuthenticatedHttpRequest, pk: int | None = None) -> HttpResponse:
    workload = get_object_or_404(Workload, pk=pk) if pk else None
    if request.method == "POST" and workload is not None:
        check_can_change(request.user, workload, "change")
    instance = workload or Workload(created_by=request.user)
    form = WorkloadForm(request.POST or None, instance=instance)
    if request.method == "POST" and form.is_valid():
        saved = form.save()
        messages.success(request, f"Workload {saved.name} saved.")
        return redirect("workload-detail", pk=saved.pk)
    context = {"form": form, "workload": workload, "may_save": can_change(request.user, instance)}
    return render(request, "runs/workload_edit.html", context)
