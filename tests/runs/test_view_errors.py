"""A view's StopIteration answers 500 under ASGI (JSON under /api/), logged, instead of
hanging the request: Django's real ASGI handler, as uvicorn calls it."""

import asyncio
import logging

import pytest
from asgiref.sync import async_to_sync
from django.core import signals
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.urls import path
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from benchlab.asgi import application
from runs import services
from tests.runs.factories import RunFactory

ANSWER_WITHIN_S = 10
handler500 = "benchlab.security.server_error"


def page_that_runs_out(request: HttpRequest, **_: object) -> HttpResponse:
    return HttpResponse(next(iter([])))


class ApiThatRunsOut(APIView):
    authentication_classes: list[type] = []
    permission_classes: list[type] = []

    def get(self, request: Request, pk: int) -> Response:
        return Response(next(iter([])))


urlpatterns = [
    path("runs/<int:pk>/broken", page_that_runs_out, name="run-broken"),
    path("s/<str:token>/broken", page_that_runs_out, name="shared-broken"),
    path("api/runs/<int:pk>/broken/", ApiThatRunsOut.as_view(), name="run-broken-api"),
]


async def asgi_get(url: str) -> tuple[int, bytes]:
    """GET `url` through the lab's ASGI application, as uvicorn would call it."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": url,
        "raw_path": url.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
    }
    sent: list[dict] = []
    request_sent = False

    async def receive() -> dict:
        nonlocal request_sent
        if not request_sent:
            request_sent = True
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # connected until the handler is done
        raise AssertionError("unreachable: the handler cancels this wait")

    async def send(message: dict) -> None:
        sent.append(message)

    await asyncio.wait_for(application(scope, receive, send), ANSWER_WITHIN_S)
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


@pytest.mark.urls(__name__)
def test_a_page_raising_stop_iteration_answers_500_and_logs_its_run(caplog):
    with caplog.at_level(logging.ERROR, logger="benchlab.view_errors"):
        status, body = asyncio.run(asgi_get("/runs/12/broken"))

    assert status == 500
    assert b"<html" in body.lower()
    (line,) = [r.getMessage() for r in caplog.records if r.name == "benchlab.view_errors"]
    assert "run 12" in line and "StopIteration" in line


@pytest.mark.urls(__name__)
def test_an_api_view_raising_stop_iteration_answers_a_json_500():
    status, body = asyncio.run(asgi_get("/api/runs/12/broken/"))

    assert status == 500
    assert b'"server_error"' in body
    assert b"Traceback" not in body


@pytest.fixture
def keeping_the_test_connection():
    """The handler's request signals leave the test's database connection (and its
    transaction) open, as Django's test client has them do."""
    signals.request_started.disconnect(close_old_connections)
    signals.request_finished.disconnect(close_old_connections)
    yield
    signals.request_started.connect(close_old_connections)
    signals.request_finished.connect(close_old_connections)


@pytest.mark.django_db
@pytest.mark.urls(__name__)
def test_a_failure_behind_a_share_link_is_logged_with_the_shared_run(
    caplog, user, keeping_the_test_connection
):
    run = RunFactory()
    _link, token = services.share_link_create(user, run)

    with caplog.at_level(logging.ERROR, logger="benchlab.view_errors"):
        status, _body = async_to_sync(asgi_get)(f"/s/{token}/broken")

    assert status == 500
    (line,) = [r.getMessage() for r in caplog.records if r.name == "benchlab.view_errors"]
    assert f"share link {token[:6]}… of run {run.pk}" in line
    assert token not in line
