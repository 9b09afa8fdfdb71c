"""Enrollment on the hosts page: an administrator (staff) approves or revokes an agent."""

from collections.abc import Callable

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect
from django.views.decorators.http import require_POST

from runs import services
from runs.models import Host
from runs.services.errors import Conflict


@login_required
@require_POST
def host_approve(request: HttpRequest, pk: int) -> HttpResponse:
    return _change_enrollment(request, pk, services.host_approve, "approved")


@login_required
@require_POST
def host_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    return _change_enrollment(request, pk, services.host_revoke, "revoked")


def _change_enrollment(
    request: HttpRequest, pk: int, action: Callable[..., Host], done: str
) -> HttpResponse:
    if not request.user.is_staff:
        raise PermissionDenied("only an administrator approves or revokes agents")
    host = get_object_or_404(Host, pk=pk)
    try:
        host = action(host, request.user)
    except Conflict as conflict:
        messages.error(request, conflict.message)
    else:
        messages.success(request, f"Host {host.name} {done}.")
    return redirect("host-list")
