"""A backlog of cancelled jobs is gone in seconds: the agent checks a job's cancel flag before
it does any work for it, and the job queued after the backlog starts promptly.

Real Redis, a real agent worker process, the real control worker; the jobs are queued and
cancelled through the API while the agent is down, so the whole backlog waits in its queue
when it starts.
"""

import re
import time
from datetime import datetime

import pytest

from agents.contract.wire import agent_queue
from runs.models import Run
from tests.integration.test_lab import create

pytestmark = pytest.mark.integration

PROFILES = 6
REPEATS = 50  # 6 cells x 50 rounds: 300 runs
# Generous: the agent process starts, registers, drops 300 jobs and starts the next one's
# provisioning. Dropping took ~0.5 s a job before the agent looked at the flag first.
BACKLOG_BOUND_S = 45
# From the first job dropped to the last, as the agent logs them (0.65 s here; ~300 s before).
DRAIN_BOUND_S = 15
DROPPED = re.compile(r"^\[([\d-]+ [\d:,]+): INFO/\w+\] run \d+: cancelled before it started", re.M)


def schedule(api, lab, name: str, profiles: list[int], repeats: int) -> dict:
    host = lab.wait_registered()
    build = create(api, "builds", {"name": f"pg16-{name}", "version": "16", "source": "auto"})
    workload = create(
        api,
        "workloads",
        {"name": f"tpcb-{name}", "scale": 1, "scripts": [{"builtin": "tpcb-like", "weight": 1}]},
    )
    return create(
        api,
        "experiments",
        {
            "name": name,
            "hosts": [host.pk],
            "builds": [build["id"]],
            "config_profiles": profiles,
            "workloads": [workload["id"]],
            "clients": [1],
            "duration_s": 2,
            "repeats": repeats,
            "execution": "rounds",
            "start": True,
        },
    )


def test_three_hundred_cancelled_jobs_are_dropped_in_seconds(api, lab, settings):
    settings.BENCHLAB_MAX_QUEUED_RUNS_PER_USER = 400
    lab.wait_registered()
    lab.kill_agent()
    profiles = [
        create(api, "config-profiles", {"name": f"p{i}", "settings": {}})["id"]
        for i in range(PROFILES)
    ]
    backlog = schedule(api, lab, "backlog", profiles, REPEATS)
    run_ids = list(Run.objects.filter(experiment_id=backlog["id"]).values_list("pk", flat=True))
    assert len(run_ids) == PROFILES * REPEATS
    for run_id in run_ids:
        assert api.post(f"/api/runs/{run_id}/cancel/").status_code == 200
    after = schedule(api, lab, "after", profiles[:1], 1)
    (next_run,) = Run.objects.filter(experiment_id=after["id"])
    queue = agent_queue(lab.name)
    assert lab.redis.llen(queue) == len(run_ids) + 1

    started = time.monotonic()
    lab.start_agent()
    lab.wait_run(next_run.pk, lambda run: run.started_at, "to start", BACKLOG_BOUND_S)
    elapsed = time.monotonic() - started
    api.post(f"/api/runs/{next_run.pk}/cancel/")

    assert elapsed < BACKLOG_BOUND_S
    assert lab.redis.llen(queue) == 0
    backlog_runs = Run.objects.filter(pk__in=run_ids)
    assert set(backlog_runs.values_list("status", flat=True)) == {Run.Status.CANCELLED}
    assert not backlog_runs.filter(started_at__isnull=False).exists()
    drops = DROPPED.findall((lab.log_dir / "agent.log").read_text(errors="replace"))
    assert len(drops) == len(run_ids)
    first, last = (datetime.strptime(drops[i], "%Y-%m-%d %H:%M:%S,%f") for i in (0, -1))
    assert (last - first).total_seconds() < DRAIN_BOUND_S
    lab.wait_terminal(next_run.pk)
