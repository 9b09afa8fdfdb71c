"""The API keeps the promises of its OpenAPI schema, checked by schemathesis against uvicorn.

schemathesis (every check, every phase: examples, coverage, fuzzing and the
stateful phase that chains operations through the links it infers, DELETE
included) runs against the real ASGI app on a free port, on the test
database, authenticated with a token. Its settings, and the few operations
where a schema-valid request may still be refused for what a schema cannot
say, are in tests/runs/api/schemathesis.toml.
"""

import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest

from runs.services.access.tokens import api_token_create
from tests.e2e.conftest import Web
from tests.runs.factories import ExperimentFactory, UserFactory
from tests.runs.pages.conftest import finished_run

REPO = Path(__file__).resolve().parents[3]
CONFIG = Path(__file__).with_name("schemathesis.toml")
SEED = 20261122
TIME_LIMIT_S = 600


@pytest.fixture
def api_server(transactional_db, tmp_path, lab_redis):
    """uvicorn serving the app, with a run that has results so reads have something to read."""
    run = finished_run([(1, 1, 100.0, 1.0), (2, 1, 180.0, 1.1)])
    ExperimentFactory(hosts=[run.host], builds=[run.build], workloads=[run.workload])
    # The fuzzer sends wrong tokens on purpose (ignored_auth): no lockout of 127.0.0.1.
    server = Web(tmp_path, {"BENCHLAB_AUTH_FAILURE_LIMIT": "1000000"})
    yield server
    server.close()


def served_schema(server: Web, path: Path) -> Path:
    """The schema as the server serves it (generating it takes seconds on a busy machine)."""
    request = urllib.request.Request(
        f"{server.url}/api/schema/", headers={"Accept": "application/vnd.oai.openapi+json"}
    )
    with urllib.request.urlopen(request, timeout=120) as response:
        path.write_bytes(response.read())
    return path


def test_schemathesis_finds_nothing_against_the_live_api(api_server, tmp_path):
    _row, token = api_token_create(UserFactory(username="fuzzer"))
    schema = served_schema(api_server, tmp_path / "openapi.json")
    argv = [
        sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG), "--no-color",
        "run", str(schema), "--url", api_server.url,
        "--checks", "all",
        "--request-timeout", "30",
        "--header", f"Authorization: Token {token}",
        "--seed", str(SEED),
        # One worker: Python 3.11.7's ast.parse is not thread-safe (CPython gh-106905), and
        # hypothesis parses lambda sources while it describes test cases.
        "--workers", "1",
        "--report", "junit", "--report-dir", str(tmp_path),
    ]  # fmt: skip

    completed = subprocess.run(
        argv, cwd=tmp_path, capture_output=True, text=True, timeout=TIME_LIMIT_S, check=False
    )

    report = completed.stdout[-20000:] + completed.stderr[-4000:]
    assert completed.returncode == 0, f"{report}\n--- server log ---\n{api_server.logs()}"
    assert "Stateful" in completed.stdout
