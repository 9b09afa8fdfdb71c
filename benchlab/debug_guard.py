"""With DEBUG on, answer only requests that arrived on a loopback address.

Settings turn DEBUG on only when BENCHLAB_BIND is loopback, but the server
may be started by hand on another address. A request that reaches the app
through another interface while DEBUG is on is refused here (it would
otherwise get Django's debug pages: tracebacks, settings, SQL) with a
message saying what to change. Installed first in MIDDLEWARE when DEBUG is on.

Under ASGI (uvicorn, how the lab runs) SERVER_NAME is the address of the
socket the request came in on. WSGI servers put a host name there instead
(runserver even for 0.0.0.0), so WSGI requests are not judged here.
"""

from collections.abc import Callable

from django.conf import settings
from django.core.handlers.asgi import ASGIRequest
from django.http import HttpRequest, HttpResponse

from benchlab.settings import is_loopback


class LoopbackOnlyWhileDebug:
    """Refuse (403) a request on a non-loopback server address while DEBUG is on."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        arrived_on = request.META.get("SERVER_NAME", "")
        if settings.DEBUG and isinstance(request, ASGIRequest) and not is_loopback(arrived_on):
            return HttpResponse(
                "DEBUG is on, so this lab answers on 127.0.0.1 only. "
                "Run it with DEBUG=false (and SECRET_KEY, ALLOWED_HOSTS) to serve other addresses.",
                status=403,
                content_type="text/plain",
            )
        return self.get_response(request)
