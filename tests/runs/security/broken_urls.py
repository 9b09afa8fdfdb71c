"""A URL map with views that fail, to see what a 500 shows."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.urls import include, path


def fail(request: HttpRequest) -> HttpResponse:
    raise RuntimeError(f"cannot reach {settings.REDIS_URL} nor {settings.DATABASES}")


def fail_plainly(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("failed")


urlpatterns = [
    path("broken/", fail),
    path("broken-plainly/", fail_plainly),
    path("api/broken/", fail),
    path("", include("benchlab.urls")),
]

handler404 = "benchlab.security.page_not_found"
handler500 = "benchlab.security.server_error"
