"""benchlab/settings.py: the environment helpers, the DEBUG rule, static files in production."""

import asyncio
import os
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

import pytest
from asgiref.sync import async_to_sync
from django.core.exceptions import ImproperlyConfigured
from django.core.handlers.asgi import ASGIHandler

from benchlab.settings import env_bool, env_int, env_str, generated_secret_key, private_file
from tests.e2e.conftest import Web, free_port

REPO = Path(__file__).resolve().parents[2]


def test_a_secret_is_read_from_the_file_its_file_variable_names(monkeypatch, tmp_path):
    secret = tmp_path / "secret"
    secret.write_text("s3cret\n")
    monkeypatch.setenv("BENCHLAB_TEST_SECRET_FILE", str(secret))

    assert env_str("BENCHLAB_TEST_SECRET") == "s3cret"


def test_a_bad_boolean_or_integer_is_a_configuration_error(monkeypatch):
    monkeypatch.setenv("BENCHLAB_TEST_FLAG", "maybe")
    monkeypatch.setenv("BENCHLAB_TEST_NUMBER", "ten")

    with pytest.raises(ImproperlyConfigured, match="BENCHLAB_TEST_FLAG"):
        env_bool("BENCHLAB_TEST_FLAG", False)
    with pytest.raises(ImproperlyConfigured, match="BENCHLAB_TEST_NUMBER"):
        env_int("BENCHLAB_TEST_NUMBER", 1)


def test_production_without_a_secret_key_refuses_to_start():
    env = {k: v for k, v in os.environ.items() if not k.startswith("SECRET_KEY")}
    env["DEBUG"] = "false"
    env["BENCHLAB_BIND"] = "0.0.0.0"

    completed = subprocess.run(
        [sys.executable, "manage.py", "check"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode != 0
    assert "SECRET_KEY (or SECRET_KEY_FILE) is required" in completed.stderr


def settings_in_subprocess(env: dict[str, str], expression: str) -> subprocess.CompletedProcess:
    """Import benchlab.settings with exactly this environment and print `expression`."""
    clean = {k: v for k, v in os.environ.items() if k not in ("DEBUG", "BENCHLAB_BIND")}
    return subprocess.run(
        [sys.executable, "-c", f"import benchlab.settings as s; print({expression})"],
        cwd=REPO,
        env={**clean, **env},
        capture_output=True,
        text=True,
        check=False,
    )


def test_debug_is_off_by_default_and_on_when_asked_on_loopback():
    loopback = settings_in_subprocess({}, "s.DEBUG, s.BENCHLAB_BIND")
    asked = settings_in_subprocess({"DEBUG": "true"}, "s.DEBUG")
    public = settings_in_subprocess(
        {"BENCHLAB_BIND": "0.0.0.0", "SECRET_KEY": "k"}, "s.DEBUG, s.ALLOWED_HOSTS"
    )

    assert loopback.stdout.strip() == "False 127.0.0.1"
    assert asked.stdout.strip() == "True"
    assert public.stdout.strip() == "False []"


def test_debug_on_a_public_address_refuses_to_start():
    completed = settings_in_subprocess({"BENCHLAB_BIND": "0.0.0.0", "DEBUG": "true"}, "s.DEBUG")

    assert completed.returncode != 0
    assert "DEBUG=true would show tracebacks to anyone who can reach 0.0.0.0" in completed.stderr


@pytest.fixture
def production_web(transactional_db, tmp_path):
    """uvicorn with DEBUG off, as a production start would run it (no collectstatic)."""
    server = Web(tmp_path, {"DEBUG": "false", "SECRET_KEY": "test-only-secret"})
    yield server
    server.close()


@pytest.mark.parametrize(
    ("path", "content_type", "marker"),
    [
        ("/static/app.css", "text/css", b"{"),
        ("/static/charts.js", "text/javascript", b"export"),
        ("/static/vendor/plotly.min.js", "text/javascript", b"plotly"),
        ("/static/admin/css/base.css", "text/css", b"{"),
    ],
)
def test_static_files_are_served_with_debug_off(production_web, path, content_type, marker):
    with urllib.request.urlopen(production_web.url + path, timeout=60) as response:
        body = response.read()

    assert response.status == 200
    assert response.headers["Content-Type"].startswith(content_type)
    assert marker in body[:100_000].lower()


def test_a_server_error_with_debug_off_sends_no_traceback(tmp_path):
    closed_port = free_port()
    broken_db = f"postgres://postgres@127.0.0.1:{closed_port}/nowhere"
    env = {"DEBUG": "false", "SECRET_KEY": "test-only-secret", "DATABASE_URL": broken_db}
    server = Web(tmp_path, env)
    try:
        with pytest.raises(urllib.error.HTTPError) as failed:
            # The token lookup is the first database query: it fails.
            request = urllib.request.Request(
                server.url + "/api/runs/", headers={"Authorization": "Token not-checked"}
            )
            urllib.request.urlopen(request, timeout=60)
        body = failed.value.read().decode()
    finally:
        server.close()

    assert failed.value.code == 500
    assert "Traceback" not in body and "OperationalError" not in body
    assert str(closed_port) not in body
    assert "OperationalError" in server.logs()  # logged on the server, not sent


async def asgi_get(path: str, server: tuple[str, int]) -> tuple[int, bytes]:
    """GET `path` through Django's ASGI handler as if it arrived on `server` (uvicorn's scope)."""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"localhost")],
        "client": ("192.0.2.9", 50000),
        "server": server,
    }
    sent: list[dict] = []
    incoming = iter([{"type": "http.request", "body": b"", "more_body": False}])

    async def receive() -> dict:
        """The request, then nothing: the client stays connected until the response."""
        for message in incoming:
            return message
        await asyncio.Event().wait()
        raise AssertionError("unreachable: the handler cancels this wait")

    async def send(message: dict) -> None:
        sent.append(message)

    await ASGIHandler()(scope, receive, send)
    return sent[0]["status"], b"".join(message.get("body", b"") for message in sent[1:])


def test_a_request_on_a_public_address_is_refused_while_debug_is_on(settings):
    settings.DEBUG = True
    settings.MIDDLEWARE = ["benchlab.debug_guard.LoopbackOnlyWhileDebug", *settings.MIDDLEWARE]

    public = async_to_sync(asgi_get)("/accounts/login/", ("192.0.2.2", 8000))
    loopback = async_to_sync(asgi_get)("/accounts/login/", ("127.0.0.1", 8000))

    assert public[0] == 403
    assert b"DEBUG is on, so this lab answers on 127.0.0.1 only" in public[1]
    assert loopback[0] == 200


def test_the_generated_secret_key_and_the_sqlite_file_are_private(tmp_path):
    key = generated_secret_key(tmp_path / "var" / "secret-key")
    database = private_file(tmp_path / "var" / "benchlab.sqlite3")

    assert len(key) > 50 and generated_secret_key(tmp_path / "var" / "secret-key") == key
    assert (tmp_path / "var").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / "var" / "secret-key").stat().st_mode & 0o777 == 0o600
    assert database.stat().st_mode & 0o777 == 0o600
    assert [path.name for path in (tmp_path / "var").iterdir()].count("secret-key") == 1
