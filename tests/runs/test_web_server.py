"""The web server as scripts/lab runs it (uvicorn, ASGI): no request hangs, SIGTERM
stops it within seconds even with a live stream open, and a forged X-Forwarded-For
neither resets the token throttle nor locks a valid token out."""

import re
import signal
import socket
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from django.test import Client
from django.urls import reverse

from runs import services
from runs.models import Run
from runs.services.access.tokens import api_token_create
from tests.e2e.conftest import Web
from tests.runs.factories import ExperimentFactory, RunFactory, UserFactory
from tests.runs.pages.conftest import add_point
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
# An export of a one-point run takes some 40 ms; the hang this guards against never
# answered. CI's parallel stage (three workers, Chromium among them) once kept one 2.0 s.
ANSWER_WITHIN_S = 5.0
EXPORTS = [("json", ""), ("csv", ""), ("csv", "?rows=stats"), ("csv", "?rows=seconds")]


def lab_uvicorn_flag(name: str) -> str:
    """The value scripts/lab gives uvicorn's `name` flag."""
    match = re.search(rf"{name} (\S+)", (REPO / "scripts" / "lab").read_text())
    assert match, f"scripts/lab passes no {name} to uvicorn"
    return match.group(1)


@pytest.fixture
def lab_web(transactional_db, tmp_path):
    """uvicorn with the graceful-shutdown bound scripts/lab gives it, and believing proxy
    headers from nobody, as scripts/lab has it without BENCHLAB_TRUSTED_PROXIES."""
    grace = lab_uvicorn_flag("--timeout-graceful-shutdown")
    assert "proxy_args=(--no-proxy-headers)" in (REPO / "scripts" / "lab").read_text()
    server = Web(tmp_path, {}, ["--timeout-graceful-shutdown", grace, "--no-proxy-headers"])
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
    _link, token = services.share_link_create(run.experiment.created_by, run)
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
    _link, token = services.share_link_create(UserFactory(), run)
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


def test_a_valid_token_works_after_many_wrong_ones_with_forged_forwarded_for(lab_web):
    _row, token = api_token_create(UserFactory())

    def runs_with(presented: str, forwarded: str) -> int:
        headers = {"Authorization": f"Token {presented}", "X-Forwarded-For": forwarded}
        request = urllib.request.Request(lab_web.url + "/api/runs/", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status
        except urllib.error.HTTPError as refused:
            return refused.code

    wrong = [runs_with("0" * 40, f"198.51.100.{n}") for n in range(12)]

    assert wrong == [401] * 10 + [429] * 2, "a forged X-Forwarded-For resets no count"
    assert runs_with(token, "198.51.100.99") == 200


def test_no_share_token_reaches_the_web_servers_log(transactional_db, tmp_path):
    run = RunFactory(status=Run.Status.SUCCEEDED)
    add_point(run, 0, 1, 1, 1000.0, 1.0)
    link, token = services.share_link_create(run.experiment.created_by, run)
    server = Web(tmp_path, {}, ["--log-level", "info"])  # uvicorn's access log on
    try:
        answers = [
            urllib.request.urlopen(f"{server.url}{path}", timeout=30).status
            for path in (f"/s/{token}/", f"/s/{token}/results.json")
        ]
        with pytest.raises(urllib.error.HTTPError):  # Django logs the path it could not find
            urllib.request.urlopen(f"{server.url}/s/{token}x/", timeout=30)
    finally:
        server.close()

    log = server.log.read_text(errors="replace")
    assert answers == [200, 200]
    assert f"/s/{token[:6]}***" in log  # the lines are there, with the token cut
    assert token[6:] not in log, log
