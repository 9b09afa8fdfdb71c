"""`benchlab` against a small HTTP server standing in for the lab's API: the exit code
each report outcome gives, errors, the config, progress words and Ctrl-C detaching.
The real lab's answers are tested in tests/e2e/test_full_stack.py."""

import io
import json
import subprocess
import sys
import threading
import tomllib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import setuptools

from benchlab.cli import exits
from benchlab.cli.client import CliError
from benchlab.cli.config import load_config
from benchlab.cli.main import main
from benchlab.cli.output import Output
from benchlab.cli.waiting import Detached, progress_words, wait_for_experiment

ROOT = Path(__file__).resolve().parents[3]


class FakeLab(ThreadingHTTPServer):
    """Answers GET and POST by path from `answers`: (status, body, headers); keeps requests."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.answers: dict[str, tuple[int, str, dict[str, str]]] = {}
        self.requests: list[tuple[str, str, str, dict]] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class Handler(BaseHTTPRequestHandler):
    server: FakeLab

    def _answer(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length)) if length else {}
        path = self.path.split("?")[0]
        self.server.requests.append((self.command, self.path, self.headers["Authorization"], body))
        status, text, headers = self.server.answers.get(path, (404, '{"detail": "Not found."}', {}))
        self.send_response(status)
        for name, value in headers.items():
            self.send_header(name, value)
        self.send_header("Content-Length", str(len(text.encode())))
        self.end_headers()
        self.wfile.write(text.encode())

    do_GET = do_POST = _answer

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def lab(monkeypatch) -> Iterator[FakeLab]:
    server = FakeLab()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    monkeypatch.setenv("BENCHLAB_URL", server.url)
    monkeypatch.setenv("BENCHLAB_TOKEN", "secret-token")
    monkeypatch.setattr("benchlab.cli.waiting.POLL_S", 0.01)
    yield server
    server.shutdown()


def run_cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), Output(out, err))
    return code, out.getvalue(), err.getvalue()


def progress(status: str, **runs: int) -> str:
    counts = {"queued": 0, "running": 0, "succeeded": 0, "failed": 0, "cancelled": 0, **runs}
    return json.dumps(
        {
            "id": 5, "status": status, "runs": {**counts, "total": sum(counts.values())},
            "running": [], "rounds": 3, "max_rounds": 10, "ended": "", "remaining_seconds": 0,
        }
    )  # fmt: skip


@pytest.mark.parametrize(
    ("outcome", "code"),
    [("same_or_faster", 0), ("undecided", 2), ("slower", 3), ("nothing_compared", 1)],
)
def test_report_exits_by_the_labs_outcome(lab, outcome, code):
    headers = {"Content-Type": "text/plain", "BenchLab-Outcome": outcome}
    lab.answers["/api/experiments/5/report/"] = (200, "the report\n", headers)
    assert run_cli("report", "experiment", "5", "--margin", "2") == (code, "the report\n", "")
    method, path, token, _body = lab.requests[0]
    assert (method, token) == ("GET", "Token secret-token")
    assert "format=text" in path and "margin=2.0" in path and "min_effect" not in path


def test_run_from_a_file_starts_it_waits_and_reports(lab, tmp_path):
    experiment = tmp_path / "tiny.json"
    experiment.write_text(json.dumps({"name": "tiny", "clients": [1]}))
    created = {"id": 5, "name": "tiny", "schedule_notes": ["capacity search: probes too short"]}
    lab.answers["/api/experiments/"] = (201, json.dumps(created), {})
    lab.answers["/api/experiments/5/progress/"] = (200, progress("succeeded", succeeded=2), {})
    lab.answers["/api/experiments/5/report/"] = (200, "# md\n", {"BenchLab-Outcome": "slower"})
    code, out, err = run_cli("run", str(experiment), "--format", "markdown")
    assert (code, out) == (3, "# md\n")
    assert "note: capacity search: probes too short" in err
    assert "experiment 5: succeeded, 2/2 runs done" in err
    assert lab.requests[0][3] == {"name": "tiny", "clients": [1], "start": True}


def test_a_failed_run_is_an_error_whatever_the_report(lab):
    lab.answers["/api/experiments/5/progress/"] = (200, progress("failed", failed=1), {})
    lab.answers["/api/experiments/5/report/"] = (200, "r\n", {"BenchLab-Outcome": "undecided"})
    code, _out, err = run_cli("status", "5")
    assert code == exits.ERROR and "1 run(s) failed" in err


def test_the_labs_refusal_is_shown_with_exit_1(lab, tmp_path):
    experiment = tmp_path / "bad.json"
    experiment.write_text(json.dumps({"clients": []}))
    refusal = {
        "error": {"code": "invalid", "message": "bad input", "fields": {"clients": "give 1"}}
    }
    lab.answers["/api/experiments/"] = (400, json.dumps(refusal), {})
    code, _out, err = run_cli("run", str(experiment))
    assert code == 1 and "400 bad input; clients: give 1" in err
    code, _out, err = run_cli("cancel", "9")
    assert code == 1 and "404 Not found." in err


def test_a_patch_not_in_utf8_is_refused_before_asking_the_lab(lab, tmp_path):
    patch = tmp_path / "latin1.patch"
    patch.write_bytes("--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+caf\u00e9\n".encode("latin-1"))
    code, _out, err = run_cli(
        "try", "--host", "h", "--repo", "r", "--base", "main", "--version", "18",
        "--patch", str(patch),
    )  # fmt: skip
    assert code == exits.ERROR and f"{patch} is not UTF-8 text" in err
    assert lab.requests == []


def test_ctrl_c_in_a_try_names_every_experiment_to_reattach(lab, monkeypatch, tmp_path):
    patch = tmp_path / "comment.patch"
    patch.write_text("--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-a\n+b\n")
    battery = {"version": 1, "workloads": ["w1", "w2"], "clients": [1, 2]}
    started = {"battery": battery, "experiments": [{"id": 5}, {"id": 6}]}
    lab.answers["/api/tries/"] = (201, json.dumps(started), {})
    lab.answers["/api/experiments/5/progress/"] = (200, progress("running", running=1), {})

    def pressed(_seconds: float) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr("benchlab.cli.waiting.time.sleep", pressed)
    code, _out, err = run_cli(
        "try", "--host", "h", "--repo", "r", "--base", "main", "--version", "18",
        "--patch", str(patch),
    )  # fmt: skip
    assert code == exits.DETACHED
    assert "`benchlab status 5`" in err
    assert "the try's other experiments go on too: `benchlab status 6`" in err


def test_without_a_token_it_says_where_to_put_one(monkeypatch, tmp_path):
    monkeypatch.delenv("BENCHLAB_TOKEN", raising=False)
    monkeypatch.setenv("BENCHLAB_CONFIG", str(tmp_path / "none.toml"))
    code, _out, err = run_cli("status", "1")
    assert code == 1 and "BENCHLAB_TOKEN" in err and "none.toml" in err


def test_the_config_file_gives_url_and_token(monkeypatch, tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('url = "https://lab.example/"\ntoken = "from-file"\n')
    monkeypatch.setenv("BENCHLAB_CONFIG", str(path))
    monkeypatch.delenv("BENCHLAB_TOKEN", raising=False)
    monkeypatch.delenv("BENCHLAB_URL", raising=False)
    found = load_config()
    assert (found.url, found.token) == ("https://lab.example", "from-file")
    monkeypatch.setenv("BENCHLAB_TOKEN", "from-env")
    assert load_config().token == "from-env"
    path.write_text("url = ")
    with pytest.raises(CliError, match="cannot read"):
        load_config()


def test_progress_words_say_runs_done_step_round_and_time_left():
    found = json.loads(progress("running", succeeded=3, running=1, queued=4, failed=1))
    found["running"] = [
        {"id": 8, "host": "h", "build": "patched", "workload": "tpcb", "round": 3,
         "step": "point 2/3: 8 clients"}
    ]  # fmt: skip
    found["remaining_seconds"] = 600
    assert progress_words(found) == (
        "experiment 5: running, 4/9 runs done (1 failed), round 3 of at most 10; "
        "run 8 (patched, tpcb): point 2/3: 8 clients; about 10 min left"
    )


class InterruptedApi:
    """Answers one progress, then the user presses Ctrl-C."""

    def __init__(self) -> None:
        self.calls = 0

    def get(self, path: str) -> dict:
        self.calls += 1
        if self.calls > 1:
            raise KeyboardInterrupt
        return json.loads(progress("running", running=1))


def test_ctrl_c_detaches_and_says_how_to_reattach(monkeypatch):
    monkeypatch.setattr("benchlab.cli.waiting.POLL_S", 0)
    err = io.StringIO()
    with pytest.raises(Detached):
        wait_for_experiment(InterruptedApi(), 5, Output(io.StringIO(), err))  # type: ignore[arg-type]
    assert "`benchlab status 5`" in err.getvalue() and "`benchlab cancel 5`" in err.getvalue()


def test_help_documents_the_exit_codes():
    code = subprocess.run(
        [sys.executable, "-m", "benchlab.cli", "--help"], cwd=ROOT, capture_output=True, text=True
    )
    assert code.returncode == 0
    for line in (
        "0  every cell",
        "2  a cell is still undecided",
        "3  a cell is slower",
        "1  an error",
    ):
        assert line in code.stdout


def test_the_cli_imports_neither_django_nor_the_lab():
    probe = (
        "import sys, benchlab.cli.main, benchlab.cli.commands\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'django', 'celery', 'runs', "
        "'agents', 'rest_framework'}))"
    )
    found = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True)
    assert found.stdout.strip() == "[]", found.stderr


def test_the_console_script_is_benchlab_cli_main():
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())
    assert found["project"]["scripts"] == {"benchlab": "benchlab.cli.main:main"}
    # What `pip install` puts in site-packages: the command's packages, no top-level
    # `runs` or `agents`.
    include = found["tool"]["setuptools"]["packages"]["find"]["include"]
    installed = setuptools.find_packages(str(ROOT), include=include)
    assert sorted(installed) == ["benchlab", "benchlab.cli"]
