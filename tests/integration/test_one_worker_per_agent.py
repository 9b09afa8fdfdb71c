"""One worker per agent: a second worker of a running agent's name refuses to start.

Real worker processes on the lab's Redis. A twin with the same name and state directory
is refused by the directory's lock, one with another state directory by the name's lease
in Redis; either names the running worker's pid and host, exits non-zero within 10 s,
and the first worker's run goes on and succeeds, measured once. Once the first worker
is killed (SIGKILL: no clean release), its lease expires after its TTL (shortened here)
and a worker of another state directory can start.
"""

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from agents.contract.wire import AGENT_LEASE_ENV, agent_lease_key
from agents.worker.exclusive import Holder
from runs.models import Run
from tests.integration.conftest import REPO, Lab, running_lab
from tests.integration.faults import assert_measured_once, short_run
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LEASE_S = 9
REFUSED_WITHIN_S = 10


def twin(lab: Lab, log: Path, *more: str) -> subprocess.Popen:
    """Another `python -m agents worker` with the lab agent's name (and its state directory,
    unless `more` names another)."""
    return subprocess.Popen(
        [sys.executable, "-m", "agents", "worker", "--name", lab.name,
         "--redis-url", lab.redis_url, "--storage", f"default={lab.storage}", *more],
        cwd=REPO, env=lab.env, stdout=log.open("wb"), stderr=subprocess.STDOUT,
        start_new_session=True,
    )  # fmt: skip


def refused(lab: Lab, log: Path, *more: str) -> str:
    """Start a twin and return what it said when it refused (it must, within 10 s)."""
    started = time.monotonic()
    process = twin(lab, log, *more)
    try:
        code = process.wait(timeout=REFUSED_WITHIN_S + 20)
    finally:
        if process.poll() is None:
            process.kill()
    seconds = time.monotonic() - started
    said = log.read_text(errors="replace")
    assert code != 0, said
    assert seconds < REFUSED_WITHIN_S, f"refused after {seconds:.1f} s\n{said}"
    return said


def lease_holder(lab: Lab) -> Holder | None:
    return Holder.parse(lab.redis.get(agent_lease_key(lab.name)))


def test_a_twin_is_refused_while_the_first_worker_runs_and_the_name_is_free_once_its_lease_expires(
    api, transactional_db, tmp_path
) -> None:
    env = {AGENT_LEASE_ENV: str(LEASE_S)}
    with running_lab(tmp_path, env=env) as lab:
        first = lab.agent.pid
        run_id = short_run(api, lab, points=2, duration_s=2)
        lab.wait_run(run_id, lambda run: run.status == Run.Status.RUNNING, "to start")

        same_dir = refused(lab, tmp_path / "twin-same-dir.log")
        other_dir = tmp_path / "other-state"
        same_name = refused(lab, tmp_path / "twin-other-dir.log", "--state-dir", str(other_dir))

        who = f"pid {first} on host {socket.gethostname()}"
        assert who in same_dir and "state directory" in same_dir, same_dir
        assert who in same_name and "lease in Redis expires in" in same_name, same_name
        assert not (other_dir / "ledger").exists(), "refused before reading any ledger"
        run = lab.wait_terminal(run_id)
        assert run.status == Run.Status.SUCCEEDED, f"{run.error_message}\n{lab.logs()}"
        assert_measured_once(lab, [run])

        lab.kill_agent()
        assert lease_holder(lab).pid == first, "a worker killed leaves its lease behind"
        refused(lab, tmp_path / "twin-after-kill.log", "--state-dir", str(other_dir))
        wait_for(lambda: lease_holder(lab) is None, LEASE_S + 10, "the lease to expire")
        successor = twin(lab, tmp_path / "successor.log", "--state-dir", str(other_dir))
        try:
            wait_for(
                lambda: (holder := lease_holder(lab)) is not None and holder.pid == successor.pid,
                30,
                "the new worker to take the name",
                lambda: (tmp_path / "successor.log").read_text(errors="replace"),
            )
            assert successor.poll() is None
        finally:
            os.killpg(successor.pid, signal.SIGTERM)  # a clean stop: Celery's warm shutdown
            successor.wait(timeout=60)
        said = (tmp_path / "successor.log").read_text(errors="replace")
        assert lease_holder(lab) is None, f"a clean stop releases the lease\n{said}"
