"""What anyone can see without signing in: no settings on a 404 or a 500, the CSP, the
deployment check for a public bind (the test client with the lab's default settings)."""

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import Client

REPO = Path(__file__).resolve().parents[3]
REDIS_PASSWORD = "redis-pass-1234"
SETTINGS_TEXT = ("REDIS_URL", "CELERY_BROKER_URL", "DATABASE_URL", "SECRET_KEY", REDIS_PASSWORD)


@pytest.fixture
def anonymous(settings) -> Client:
    settings.REDIS_URL = settings.CELERY_BROKER_URL = f"redis://:{REDIS_PASSWORD}@redis:6379/0"
    return Client(raise_request_exception=False)


def assert_shows_no_settings(body: bytes) -> None:
    text = body.decode(errors="replace")
    for word in SETTINGS_TEXT:
        assert word not in text


@pytest.mark.django_db
def test_debug_is_off_with_the_lab_default_settings():
    completed = subprocess.run(
        [sys.executable, "-c", "import benchlab.settings as s; print(s.DEBUG)"],
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k not in ("DEBUG", "BENCHLAB_BIND")},
        capture_output=True,
        text=True,
        check=True,
    )
    assert completed.stdout.strip() == "False"


@pytest.mark.django_db
def test_a_missing_static_file_is_a_plain_404(anonymous):
    response = anonymous.get("/static/missing.js")

    assert response.status_code == 404
    assert_shows_no_settings(response.content)


@pytest.mark.django_db
@pytest.mark.urls("tests.runs.security.broken_urls")
def test_a_500_shows_nothing_of_the_error_or_the_settings(anonymous):
    page = anonymous.get("/broken/")
    api = anonymous.get("/api/broken/")

    assert (page.status_code, api.status_code) == (500, 500)
    assert b"Server error" in page.content and b"RuntimeError" not in page.content
    assert api.json()["error"]["code"] == "server_error"
    assert_shows_no_settings(page.content + api.content)


@pytest.mark.django_db
@pytest.mark.urls("tests.runs.security.broken_urls")
def test_with_debug_on_the_debug_page_masks_url_passwords(anonymous, settings):
    settings.DEBUG = True

    response = anonymous.get("/broken-plainly/")

    assert response.status_code == 500
    assert b"REDIS_URL" in response.content, "the debug page, with its settings"
    assert REDIS_PASSWORD.encode() not in response.content


@pytest.mark.django_db
def test_pages_carry_a_content_security_policy_without_inline_scripts(anonymous):
    response = anonymous.get("/accounts/login/")

    policy = response["Content-Security-Policy"]
    assert "script-src 'self';" in policy and "unsafe-eval" not in policy
    assert "'unsafe-inline'" not in policy.split("script-src")[1].split(";")[0]
    assert response["X-Frame-Options"] == "DENY"


def test_the_deployment_check_is_clean_for_a_public_bind(tmp_path):
    key = tmp_path / "key"
    key.write_text("k" * 60 + "-0123456789abcdefghijklmnopqrstuvwxyz")
    unset = ("DEBUG", "SECRET_KEY", "DJANGO_ALLOW_ASYNC_UNSAFE")  # the e2e tests set the last
    env = {k: v for k, v in os.environ.items() if not k.startswith(unset)}
    env |= {"BENCHLAB_BIND": "0.0.0.0", "SECRET_KEY_FILE": str(key), "ALLOWED_HOSTS": "lab.test"}

    completed = subprocess.run(
        [sys.executable, "manage.py", "check", "--deploy", "--fail-level", "WARNING"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )

    assert completed.returncode == 0, completed.stderr
    assert "no issues" in completed.stdout


@pytest.mark.django_db
def test_the_api_docs_page_loads_only_the_labs_own_scripts(api_client):
    response = api_client.get("/api/docs/")

    page = response.content.decode()
    scripts = re.findall(r"<script[^>]*>", page)
    assert scripts and all("src=" in tag for tag in scripts)
    sources = re.findall(r'(?:src|href)="([^"]+)"', page)
    assert sources and not [url for url in sources if "//" in url], sources
    assert "http" not in response["Content-Security-Policy"]
    for static_file in [url for url in sources if url.startswith("/static/")]:
        assert api_client.get(static_file).status_code == 200, static_file
