"""What the web tier shows and allows, beyond Django's own security middleware.

- `ContentSecurityPolicy`: the CSP header on every response (settings
  CONTENT_SECURITY_POLICY). Scripts come from the lab's own static files only
  (the API docs' Swagger UI too, from drf-spectacular-sidecar): no inline
  script, no eval, nothing from another host.
- `RedactingReporterFilter`: error reports (and the debug page, with
  DEBUG on) mask URL passwords (REDIS_URL, DATABASE_URL, CELERY_BROKER_URL)
  beside what Django already hides.
- `page_not_found`, `server_error`: the 404 and 500 answers with DEBUG off,
  JSON under /api/ (runs.api.errors' format), a plain page elsewhere; neither
  shows anything about the request or the settings.
"""

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string
from django.views.debug import SafeExceptionReporterFilter

from agents.contract.redaction import redact_text
from runs.api.errors import error_body

CSP_HEADER = "Content-Security-Policy"


class ContentSecurityPolicy:
    """Set the Content-Security-Policy header unless the view set its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        if CSP_HEADER not in response:
            response[CSP_HEADER] = settings.CONTENT_SECURITY_POLICY
        return response


class RedactingReporterFilter(SafeExceptionReporterFilter):
    """Django's filter, plus URL passwords and named secrets masked in every setting."""

    def cleanse_setting(self, key: Any, value: Any) -> Any:
        cleansed = super().cleanse_setting(key, value)
        return redact_text(cleansed) if isinstance(cleansed, str) else cleansed


def page_not_found(request: HttpRequest, exception: Exception) -> HttpResponse:
    """404 with DEBUG off: JSON under /api/, else a page that names nothing but the path."""
    if request.path.startswith("/api/"):
        return JsonResponse(error_body("not_found", "Not found."), status=404)
    return HttpResponse(render_to_string("404.html", request=request), status=404)


def server_error(request: HttpRequest) -> HttpResponse:
    """500 with DEBUG off: nothing about the error (it is in the server's log)."""
    if request.path.startswith("/api/"):
        message = "The lab failed to answer; the error is in its log."
        return JsonResponse(error_body("server_error", message), status=500)
    return HttpResponse(render_to_string("500.html"), status=500)
