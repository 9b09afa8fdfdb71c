"""A Redis that lost its data: no run stays queued for ever.

The lab runs on a redis-server of the test's own (never the machine's shared
one), which the test empties with FLUSHALL. Real control worker and agent
processes; the test process plays the web tier on that Redis too.
"""

from collections.abc import Iterator

import kombu.pools
import pytest

from agents.contract.wire import agent_queue
from benchlab.celery import app
from runs.models import Run
from tests.integration.conftest import Lab, running_lab
from tests.integration.test_lab import experiment, start

pytestmark = pytest.mark.integration

JOB_LOST_AFTER_S = 3


@pytest.fixture
def web_tier_on(own_redis, settings) -> Iterator[None]:
    """The test process sends its jobs and cancel flags to the test's own Redis."""
    broker = app.conf.broker_url
    settings.REDIS_URL = own_redis.url
    use_broker(own_redis.url)
    yield
    use_broker(broker)


def use_broker(url: str) -> None:
    """Point the lab's Celery app at `url` for the next send.

    Celery keeps its broker connection and producer pools for the life of the
    process, in kombu's registry of pools by broker URL; they are closed and
    forgotten here, as Celery does after a fork. Closing only the app's pool left
    a closed pool in that registry, and a later send to the same URL got it back.
    """
    kombu.pools.reset()
    app.conf.broker_url = url
    app._after_fork()


@pytest.fixture
def lab_on_own_redis(transactional_db, tmp_path, own_redis, web_tier_on) -> Iterator[Lab]:
    """A lab whose agent is stopped once it has registered: jobs wait in its queue."""
    env = {"JOB_LOST_AFTER_S": str(JOB_LOST_AFTER_S), "REAPER_INTERVAL_S": "1"}
    with running_lab(tmp_path, own_redis.url, env) as lab:
        lab.kill_agent()  # idle: no job is in flight
        yield lab


def queued_run(api, lab: Lab) -> Run:
    exp = experiment(api, lab, [{}], [1], duration_s=2)
    (run_id,) = start(api, exp["id"])
    assert lab.redis.llen(agent_queue(lab.name)) == 1, "the job waits in the agent's queue"
    return Run.objects.get(pk=run_id)


def test_a_run_whose_job_a_flushall_lost_is_sent_again_and_runs(api, lab_on_own_redis):
    lab = lab_on_own_redis
    run = queued_run(api, lab)

    lab.redis.flushall()
    lab.start_agent()
    run = lab.wait_run(run.pk, lambda r: r.status != Run.Status.QUEUED, "to leave queued", 90)

    assert run.status in (Run.Status.RUNNING, Run.Status.SUCCEEDED), run.error_message
    assert run.dispatches == 2
    assert lab.wait_terminal(run.pk).status == Run.Status.SUCCEEDED


def test_a_job_an_agent_took_and_died_with_before_claiming_is_sent_again(api, lab_on_own_redis):
    lab = lab_on_own_redis
    run = queued_run(api, lab)

    assert lab.redis.rpop(agent_queue(lab.name)), "taken off the queue, as BRPOP does"
    lab.start_agent()
    run = lab.wait_run(run.pk, lambda r: r.status != Run.Status.QUEUED, "to leave queued", 90)

    assert run.status in (Run.Status.RUNNING, Run.Status.SUCCEEDED), run.error_message
    assert run.dispatches == 2


def test_a_run_whose_job_is_lost_twice_fails_with_a_reason(api, lab_on_own_redis):
    lab = lab_on_own_redis
    run = queued_run(api, lab)

    lab.redis.flushall()
    queue = agent_queue(lab.name)
    lab.wait_run(
        run.pk, lambda r: r.dispatches == 2 and lab.redis.llen(queue) == 1, "to be sent again", 60
    )
    lab.redis.flushall()
    run = lab.wait_terminal(run.pk, timeout=60)

    assert (run.status, run.error_code, run.error_category) == ("failed", "job_lost", "application")
    assert f"queue {agent_queue(lab.name)}" in run.error_message
    assert "Redis lost its data" in run.error_message
