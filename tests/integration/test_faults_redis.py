"""The lab's Redis down for a minute, and killed and restarted empty, under real agents,
a real control worker and real pgbench; the test process is the web tier on the same
Redis (a redis-server of the test's own, appendonly, so a stop keeps its data).

Each test logs its `time to recover` (docs/reliability.md, the fault table).
"""

import shutil
import time
from collections.abc import Iterator

import pytest

from agents.contract.wire import dead_letter_stream
from runs.models import Host, Run
from tests.agents.worker.conftest import SpareRedis
from tests.integration.conftest import Lab, running_lab
from tests.integration.faults import (
    PACED_TPS,
    all_final,
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    recovered,
    short_run,
)
from tests.integration.test_redis_loss import web_tier_on  # noqa: F401 - a fixture
from tests.waiting import wait_for

pytestmark = [pytest.mark.integration, pytest.mark.faults]

OUTAGE_S = 60
# The documented defaults: a Redis outage shorter than the grace fails no run.
ENV = {
    "HEARTBEAT_OFFLINE_AFTER_S": "30",
    "AGENT_LOST_GRACE_S": "90",
    "JOB_LOST_AFTER_S": "3",
    "REAPER_INTERVAL_S": "1",
}


@pytest.fixture
def lab(transactional_db, tmp_path, own_redis, web_tier_on, settings) -> Iterator[Lab]:  # noqa: F811
    settings.HEARTBEAT_OFFLINE_AFTER_S = 30
    settings.JOB_LOST_AFTER_S = 3
    with running_lab(tmp_path, own_redis.url, ENV) as lab:
        yield lab


def restart_empty(server: SpareRedis) -> None:
    """SIGKILL the redis-server and start it again on its port without its data."""
    server.process.kill()
    server.process.wait(timeout=10)
    shutil.rmtree(server.workdir / "appendonlydir", ignore_errors=True)
    (server.workdir / "dump.rdb").unlink(missing_ok=True)
    server.start()


def test_redis_down_for_a_minute_fails_no_run_and_loses_nothing(api, lab, own_redis):
    long_run = short_run(api, lab, points=3, duration_s=25, rate_tps=PACED_TPS)
    queued = short_run(api, lab)
    lab.wait_run(long_run, lambda r: r.progress.exists(), "to measure")

    own_redis.stop()
    down = time.monotonic()
    during = short_run(api, lab)  # the web tier starts a run while Redis is down
    time.sleep(OUTAGE_S - (time.monotonic() - down))
    host = Host.objects.get(name=lab.name)
    seen_offline = not host.is_online
    still_running = Run.objects.get(pk=long_run).status == Run.Status.RUNNING
    own_redis.start()
    back = time.monotonic()
    wait_for(lambda: Host.objects.get(pk=host.pk).is_online, 60, "a heartbeat", lab.logs)
    heartbeat_s = recovered("Redis down 60 s: first heartbeat", back)
    runs = all_final(lab, [long_run, queued, during], within_s=180)
    recovered("Redis down 60 s: every run final", back)

    assert seen_offline and still_running
    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 3, lab.logs()
    assert heartbeat_s < 30
    assert runs[0].results.count() == 3
    for run in runs:
        assert_stored_once(run)
    assert_measured_once(lab, runs)
    assert_no_orphans(lab)
    assert lab.redis.xlen(dead_letter_stream(lab.stream)) == 0


def test_redis_restarted_empty_under_a_running_and_a_queued_run_ends_both_once(api, lab, own_redis):
    running = short_run(api, lab, points=2, duration_s=5, rate_tps=PACED_TPS)
    queued = short_run(api, lab)
    lab.wait_run(running, lambda r: r.progress.exists(), "to measure")

    restart_empty(own_redis)
    emptied = time.monotonic()
    runs = all_final(lab, [running, queued], within_s=120)
    recovered("Redis restarted empty: every run final", emptied)

    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 2, lab.logs()
    assert runs[0].results.count() == 2
    assert runs[1].dispatches == 2, "the queued job, lost with Redis' data, was sent again"
    # Events the control worker had not read yet are lost with the stream: none twice.
    assert_stored_once(runs[0], gapless=False)
    assert_stored_once(runs[1])
    assert_measured_once(lab, runs)
    assert_no_orphans(lab)
