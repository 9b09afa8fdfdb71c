"""Browser tests: a real Chromium (Debian's) driving the pages served by uvicorn.

- `web`: `uvicorn benchlab.asgi:application` on a free port as a subprocess,
  on the test database (tests use `transactional_db`, so rows the test makes
  are committed and visible to it).
- `browser`: Chromium through Playwright; `page` is a fresh page in a fresh
  context, `signed_in_page` one that signed in through the sign-in form.
- The full-stack test adds the control worker and an agent (`tests.integration`'s `Lab`).
"""

import os
import socket
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from playwright.sync_api import sync_playwright

from tests.integration.conftest import database_url, running_lab
from tests.runs.factories import UserFactory
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
PASSWORD = "pw"

# Playwright's sync API keeps an event loop in this thread; the ORM calls the
# tests make between browser steps are plain blocking calls, so allow them.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Web:
    """uvicorn serving the ASGI app on the test database."""

    def __init__(self, log_dir: Path, extra_env: dict[str, str], args: Sequence[str] = ()):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log_dir / "web.log"
        env = {
            **os.environ,
            "DATABASE_URL": database_url(),
            "DEBUG": "true",
            "PYTHONUNBUFFERED": "1",
            **extra_env,
        }
        env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "uvicorn", "benchlab.asgi:application",
             "--host", "127.0.0.1", "--port", str(self.port), "--log-level", "warning", *args],
            cwd=REPO, env=env, stdout=self.log.open("ab"), stderr=subprocess.STDOUT,
        )  # fmt: skip
        wait_for(self._accepting, 90, "uvicorn to accept connections", self.logs)

    def _accepting(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"uvicorn exited\n{self.logs()}")
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", self.port)) == 0

    def logs(self) -> str:
        return self.log.read_text(errors="replace")[-4000:] if self.log.exists() else ""

    def close(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=5)


@pytest.fixture
def web(transactional_db, tmp_path):
    server = Web(tmp_path, {})
    yield server
    server.close()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    yield page
    context.close()


def sign_in(page, base_url: str, username: str) -> None:
    """Sign in through the sign-in form, as a person would."""
    page.goto(f"{base_url}/")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button:has-text('Sign in')")
    page.wait_for_selector("text=Sign out")


@pytest.fixture
def signed_in_page(page, web):
    user = UserFactory(password=PASSWORD)
    sign_in(page, web.url, user.username)
    return page


@pytest.fixture
def stack(transactional_db, tmp_path):
    """The whole lab: a control worker, one approved agent and uvicorn (lab, web)."""
    with running_lab(tmp_path) as lab:
        web = Web(tmp_path, {"REDIS_URL": lab.env["REDIS_URL"]})
        try:
            yield lab, web
        finally:
            web.close()
