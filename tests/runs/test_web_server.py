"""The web server as scripts/lab runs it (uvicorn, ASGI): no request hangs, and SIGTERM
stops it within seconds even with a live stream open."""

import re
import signal
import socket
import time
import urllib.request
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import Run
from tests.e2e.conftest import Web
from tests.runs.factories import ExperimentFactory, RunFactory, UserFactory
from tests.runs.pages.conftest import add_point
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# An export of a one-point run takes some 40 ms: a second leaves room for a loaded machine.
ANSWER_WITHIN_S = 1.0
EXPORTS = [("json", ""), ("csv", ""), ("csv", "?rows=stats"), ("csv", "?rows=seconds")]


def lab_uvicorn_flag(name: str) -> str:
    """The value scripts/lab gives uvicorn's `name` flag."""
    match = re.search(rf"{name} (\S+)", (REPO / "scripts" / "lab").read_text())
    assert match, f"scripts/lab passes no {name} to uvicorn"
    return match.group(1)


@pytest.fixture
def lab_web(transactional_db, tmp_path):
    """uvicorn with the graceful-shutdown bound scripts/lab gives it."""
    grace = lab_uvicorn_flag("--timeout-graceful-shutdown")
    server = Web(tmp_path, {}, ["--timeout-graceful-shutdown", grace])
    yield server
    server.close()


@pytest.fixture
def run_with_queued_rerun(transactional_db):
    """A measured run of one round and a re-run of that round, still queued."""
    owner = UserFactory()
    experiment = ExperimentFactory(execution="rounds", repeats=1, created_by=owner)
    run = RunFactory(
        experiment=experiment, status=Run.Status.SUCCEEDED, cell=0, round=1, created_by=owner
    )
    add_point(run, 0, 4, 1, 1000.0, 1.0)
    RunFactory(experiment=experiment, cell=0, round=1, rerun_of=run, created_by=owner)
    return run


def get(url: str, cookie: str = "") -> tuple[int, float]:
    """GET `url`; its status and how long it took to answer in full."""
    request = urllib.request.Request(url, headers={"Cookie": cookie} if cookie else {})
    started = time.monotonic()
    with urllib.request.urlopen(request, timeout=60) as response:
        response.read()
        return response.status, time.monotonic() - started


def test_every_export_of_a_run_with_a_queued_rerun_answers(lab_web, run_with_queued_rerun):
    run = run_with_queued_rerun
    session = Client()
    session.force_login(UserFactory())
    cookie = f"sessionid={session.cookies['sessionid'].value}"
    token = services.share_link_create(run.experiment.created_by, run).token
    get(lab_web.url + reverse("run-detail", args=[run.pk]), cookie)  # the first loads the app

    answers = {}
    for fmt, query in EXPORTS:
        own = reverse("run-export", args=[run.pk, fmt]) + query
        shared = reverse("shared-export", args=[token, fmt]) + query
        answers[own] = get(lab_web.url + own, cookie)
        answers[shared] = get(lab_web.url + shared)

    slow = {url: answer for url, answer in answers.items() if answer[1] > ANSWER_WITHIN_S}
    assert {status for status, _seconds in answers.values()} == {200}
    assert not slow


def test_sigterm_stops_uvicorn_within_seconds_with_a_live_stream_open(lab_web, transactional_db):
    run = RunFactory(status=Run.Status.RUNNING)
    token = services.share_link_create(UserFactory(), run).token
    grace = float(lab_uvicorn_flag("--timeout-graceful-shutdown"))
    stream = socket.create_connection(("127.0.0.1", lab_web.port), timeout=30)
    path = reverse("shared-events", args=[token])
    stream.sendall(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
    seen = b""
    while b"event: status" not in seen:
        seen += stream.recv(65536)

    lab_web.process.send_signal(signal.SIGTERM)
    signalled = time.monotonic()
    wait_for(lambda: lab_web.process.poll() is not None, grace + 10, "uvicorn to exit")
    stopped_after = time.monotonic() - signalled
    while chunk := stream.recv(65536):  # until the server closes it (a hang times out)
        seen += chunk
    stream.close()

    assert stopped_after < grace + 5
    # uvicorn raises the signal it caught again once it has stopped.
    assert lab_web.process.returncode in (0, -signal.SIGTERM), lab_web.logs()
