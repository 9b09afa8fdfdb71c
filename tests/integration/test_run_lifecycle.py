"""Runs that survive operations: an agent killed mid-run, a cancel nobody answers, a job
sent twice. Real control worker and agent processes, real Redis, real pgbench.

Each test logs how long the lab took to recover (docs/reliability.md keeps the figures).
"""

import json
import time
from collections.abc import Iterator

import pytest

from agents.config import default_state_dir
from agents.contract.wire import agent_queue
from runs.models import Run, RunEvent
from runs.selectors import run_logs
from tests.integration.conftest import Lab, running_lab
from tests.integration.faults import (
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    measuring_point,
    next_run_succeeds,
    recovered,
)
from tests.integration.test_lab import experiment, start
from tests.integration.test_redis_loss import web_tier_on  # noqa: F401 - a fixture
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

# Longer than any test here waits: a run settled within it was not settled by the grace.
GRACE_S = "120"


@pytest.fixture
def patient_lab(transactional_db, tmp_path) -> Iterator[Lab]:
    """A lab whose reaper would wait GRACE_S for a silent agent."""
    with running_lab(tmp_path, env={"AGENT_LOST_GRACE_S": GRACE_S}) as lab:
        yield lab


def first_running(lab: Lab, run_ids: list[int]) -> Run:
    def running() -> Run | None:
        return Run.objects.filter(pk__in=run_ids, status=Run.Status.RUNNING).first()

    return wait_for(running, 120, "a run to start", lab.logs)


def test_an_agent_killed_mid_run_and_back_within_the_grace_settles_its_run_at_once(
    api, patient_lab
):
    lab = patient_lab
    exp = experiment(api, lab, [{}, {"work_mem": "8MB"}], [1, 2], duration_s=3)
    run_ids = start(api, exp["id"])
    run = first_running(lab, run_ids)
    (other,) = [pk for pk in run_ids if pk != run.pk]
    lab.wait_run(run.pk, measuring_point(2), "to run point 2")

    lab.kill_agent()
    killed = time.monotonic()
    lab.start_agent()
    run = lab.wait_terminal(run.pk, timeout=60)
    seconds = recovered("agent killed and restarted mid-run", killed)

    assert (run.status, run.error_code, run.error_category) == (
        "failed", "agent_restarted", "application",
    ), run.error_message  # fmt: skip
    assert run.results.count() == 1, "the point finished before the kill is kept"
    assert seconds < int(GRACE_S) / 2
    nxt = lab.wait_terminal(other, timeout=120)
    assert nxt.status == Run.Status.SUCCEEDED, nxt.error_message
    assert nxt.results.count() == 2
    assert_stored_once(run, gapless=False)  # the restarted agent's report: seqs from its clock
    assert_stored_once(nxt)
    assert_measured_once(lab, [run, nxt])
    assert_no_orphans(lab)


def test_cancel_of_a_run_whose_agent_is_gone_ends_it_at_once(api, patient_lab):
    lab = patient_lab
    exp = experiment(api, lab, [{}], [1, 2], duration_s=3)
    (run_id,) = start(api, exp["id"])
    lab.wait_run(run_id, lambda r: r.results.exists(), "to finish its first point")
    lab.kill_agent()

    asked = time.monotonic()
    response = api.post(f"/api/runs/{run_id}/cancel/")
    recovered("cancel of a run whose agent is gone", asked)

    assert response.status_code == 200, response.content
    assert response.json()["status"] == Run.Status.CANCELLED
    run = Run.objects.get(pk=run_id)
    assert (run.status, run.error_category) == ("cancelled", "cancelled")
    assert run.results.count() == 1, "the point finished before is kept"
    assert run.host.current_run is None
    assert_stored_once(run)
    lab.start_agent()
    assert_no_orphans(lab)
    next_run_succeeds(api, lab)
    assert_measured_once(lab, [run])


@pytest.fixture
def lab_on_own_redis(transactional_db, tmp_path, own_redis, web_tier_on) -> Iterator[Lab]:  # noqa: F811
    env = {"JOB_LOST_AFTER_S": "3", "REAPER_INTERVAL_S": "1", "AGENT_LOST_GRACE_S": GRACE_S}
    with running_lab(tmp_path, own_redis.url, env) as lab:
        yield lab


def stream_types(lab: Lab) -> list[str]:
    return [json.loads(fields[b"event"])["type"] for _id, fields in lab.redis.xrange(lab.stream)]


def test_a_job_sent_again_after_redis_lost_everything_is_measured_once(api, lab_on_own_redis):
    lab = lab_on_own_redis
    lab.stop_control()
    exp = experiment(api, lab, [{}], [1, 2], duration_s=2)
    (run_id,) = start(api, exp["id"])
    wait_for(lambda: "result" in stream_types(lab), 120, "the agent to finish", lab.logs)

    lab.redis.flushall()  # the result, the claim and the queue are gone with Redis' data
    lost = time.monotonic()
    lab.start_control()
    run = lab.wait_terminal(run_id, timeout=90)
    recovered("job sent again after Redis lost its data", lost)

    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert run.dispatches == 2, "the reaper sent the job again"
    assert run.results.count() == 2
    assert [step["name"] for step in run.steps].count("pgbench") == 2, "one pgbench per point"
    assert RunEvent.objects.filter(run=run, type="result").count() == 1
    assert run.queued_at <= run.started_at <= run.finished_at, "the agent's own times"
    assert_stored_once(run, gapless=False)  # the ledger keeps the log, not samples or points
    assert_measured_once(lab, [run])
    assert (lab.log_dir / "agent.log").read_text().count("answered from the ledger") == 1
    ledger = list((default_state_dir() / "ledger" / lab.name).glob("*.json"))
    assert len(ledger) == 1
    kept = json.loads(ledger[0].read_text())["log"]
    logged = {event.seq: event for event in run_logs(run)}
    assert len(kept) > 10 and all(event["seq"] in logged for event in kept), "its whole log"
    assert any("cluster" in str(event.payload) for event in logged.values())
    assert lab.redis.llen(agent_queue(lab.name)) == 0
    assert_no_orphans(lab)
    next_run_succeeds(api, lab)
