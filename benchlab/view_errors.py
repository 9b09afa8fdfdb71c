"""Every failure of a view is an error answer, logged, never a connection left hanging.

Under ASGI Django runs a sync view in a worker thread (asgiref's `sync_to_async`)
and awaits its result as an asyncio future. A StopIteration (a `next()` that found
nothing) cannot be set on an asyncio future: asyncio raises TypeError inside an
event-loop callback instead, the future never completes and the request waits for
ever, holding the server's graceful shutdown with it (CPython gh-112182, still so
on Python 3.11). `LabASGIHandler` gives every sync view a wrapper that lets a
StopIteration out as a RuntimeError, which Django answers like any other error:
its 500 page, JSON under /api/ (benchlab.security.server_error).

`ViewFailureLog` writes one line per failed view naming what the URL is about
(`run 12`, `experiment 3`, a share link by its first characters and what it
shares); Django's own `django.request` line follows with the traceback.
"""

import functools
import logging
from collections.abc import Callable
from typing import Any

from asgiref.sync import iscoroutinefunction
from django.core.handlers.asgi import ASGIHandler
from django.db import DatabaseError
from django.http import HttpRequest, HttpResponse

from benchlab.log_redaction import SHARE_TOKEN_SHOWN
from runs.models import ShareLink
from runs.services.access.tokens import token_digest

logger = logging.getLogger(__name__)

View = Callable[..., Any]
SHARED_KINDS = ("run", "experiment", "comparison")


class LabASGIHandler(ASGIHandler):
    """Django's ASGI handler, with every sync view's StopIteration made a RuntimeError."""

    def make_view_atomic(self, view: View) -> View:
        """Django's hook around each view before it is called: wrap sync views too."""
        wrapped = super().make_view_atomic(view)
        if iscoroutinefunction(wrapped):
            return wrapped
        return stop_iteration_as_error(wrapped)


def stop_iteration_as_error(view: View) -> View:
    """`view`, raising RuntimeError where it would raise StopIteration (async-safe)."""

    @functools.wraps(view)
    def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
        try:
            return view(request, *args, **kwargs)
        except StopIteration as stop:
            raise RuntimeError(f"view {_callable_name(view)} raised StopIteration") from stop

    return guarded


def _callable_name(view: View) -> str:
    """`module.name` of a view function, or of the class of a class-based view."""
    named = getattr(view, "view_class", view)
    return f"{named.__module__}.{getattr(named, '__qualname__', repr(named))}"


class ViewFailureLog:
    """Log each view's exception with the object its URL names; Django then answers 500."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> None:
        subject = url_subject(request)
        token = _share_token(request)
        if token and not isinstance(exception, DatabaseError):
            subject += shared_subject(token)
        logger.error(
            "%s %s failed (%s): %s: %s",
            request.method,
            _view_name(request),
            subject,
            type(exception).__name__,
            exception,
        )


def _view_name(request: HttpRequest) -> str:
    match = request.resolver_match
    return match.view_name if match is not None else "unresolved"


def _share_token(request: HttpRequest) -> str:
    match = request.resolver_match
    return str(match.kwargs.get("token") or "") if match is not None else ""


def shared_subject(token: str) -> str:
    """` of run 12` (or experiment, comparison): what the link with `token` shares; ""
    for no such link. Not asked after a database error: the question would fail too."""
    found = ShareLink.objects.filter(digest=token_digest(token))
    ids = found.values_list("run_id", "experiment_id", "comparison_id").first() or ()
    for kind, pk in zip(SHARED_KINDS, ids, strict=False):
        if pk is not None:
            return f" of {kind} {pk}"
    return ""


def url_subject(request: HttpRequest) -> str:
    """What the request's URL is about: `run 12` for /runs/12/results.json, `share link
    AbCdEf…` for a shared page (never the whole token), `nothing named` otherwise."""
    match = request.resolver_match
    if match is None:
        return "nothing named"
    kwargs = match.kwargs
    if "token" in kwargs:
        return f"share link {str(kwargs['token'])[:SHARE_TOKEN_SHOWN]}…"
    if "pk" in kwargs:
        kind = (match.url_name or "object").split("-")[0]
        return f"{kind} {kwargs['pk']}"
    return "nothing named"
