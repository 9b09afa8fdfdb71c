"""A run end to end: API -> Celery -> agent -> Redis Streams -> control worker -> database.

Real Redis, real Celery worker processes (control and agent), real PostgreSQL
for the lab database and for the benchmarks, real pgbench.
"""

import json
import re
import time

import pytest

from agents.contract.signing import sign
from agents.contract.wire import agent_queue
from runs.models import Host, ProgressSample, Result, Run, RunEvent
from tests.integration.api import create, start
from tests.integration.faults import (
    assert_measured_once,
    assert_no_orphans,
    assert_stored_once,
    measuring_point,
    next_run_succeeds,
    recovered,
)
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

TPS_LINE = re.compile(r"^tps = ([\d.]+) \(without initial connection time\)$", re.MULTILINE)


def experiment(
    api, lab, profiles: list[dict], clients: list[int], duration_s: int, **more: object
) -> dict:
    """An experiment of pg16 x `profiles` (config profiles) on the lab's agent; `more` adds to
    its API body."""
    host = lab.wait_registered()
    build = create(api, "builds", {"name": "pg16", "version": "16", "source": "prebuilt"})
    profile_ids = [
        create(api, "config-profiles", {"name": f"profile-{i}", "settings": settings})["id"]
        for i, settings in enumerate(profiles)
    ]
    workload = create(
        api,
        "workloads",
        {"name": "tpcb", "scale": 1, "scripts": [{"builtin": "tpcb-like", "weight": 1}]},
    )
    return create(
        api,
        "experiments",
        {
            "name": "integration",
            "hosts": [host.pk],
            "builds": [build["id"]],
            "config_profiles": profile_ids,
            "workloads": [workload["id"]],
            "storage_layouts": [{"data": "default", "wal": None}],
            "clients": clients,
            "duration_s": duration_s,
            "repeats": 1,
            **more,
        },
    )


def signed(run: Run, event: dict) -> dict:
    """`event` signed as the run's agent signs it, with its host's secret."""
    return sign("event", event, run.host.secret)


# Event rows keep no copy of what sample, result and run rows hold (compact_payload):
# an event rebuilt from one gets back the fields its type must carry to be valid.
REQUIRED_DATA = {
    "progress": {"point": 0, "t": 0.0},
    "sample": {"point": 0},
    "point": {"index": 0},
    "cpu_profile": {"index": 0, "folded": ""},
    "result": {"status": "succeeded", "points": []},
}


def as_sent(run: Run, stored: RunEvent) -> dict:
    """The event document the agent sent (unsigned), rebuilt from what the control worker stored."""
    return {
        "version": 1,
        "run_id": str(run.pk),
        "token": run.token,
        "agent": stored.agent,
        "seq": stored.seq,
        "ts": stored.ts.isoformat(),
        "type": stored.type,
        "data": {**REQUIRED_DATA.get(stored.type, {}), **stored.payload},
    }


def test_two_configs_by_two_client_counts_store_what_the_agent_measured(api, lab):
    exp = experiment(
        api, lab, [{"shared_buffers": "64MB"}, {"shared_buffers": "96MB"}], [1, 2], duration_s=2
    )
    run_ids = start(api, exp["id"])
    assert len(run_ids) == 2

    lab.wait_run(
        run_ids[0],
        lambda run: run.status == Run.Status.RUNNING and run.progress.exists(),
        "to show progress while it runs",
    )
    runs = [lab.wait_terminal(run_id) for run_id in run_ids]

    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 2, lab.logs()
    results = Result.objects.filter(run__in=runs).order_by("run_id", "index")
    assert [(r.run_id, r.clients) for r in results] == [
        (run_ids[0], 1), (run_ids[0], 2), (run_ids[1], 1), (run_ids[1], 2),
    ]  # fmt: skip
    for result in results:
        assert result.tps == float(TPS_LINE.search(result.stdout).group(1))
        assert result.argv[0].endswith("pgbench")
    # Rounds run the cells in a seeded random order: match each run to its own config.
    for run in runs:
        effective = {row["name"]: row["setting"] for row in run.effective_settings}
        requested = run.spec["settings"]["shared_buffers"]
        assert effective["shared_buffers"] == {"64MB": "8192", "96MB": "12288"}[requested]
    assert ProgressSample.objects.filter(run=runs[0]).count() >= 2

    api_results = api.get(f"/api/runs/{run_ids[0]}/results/").json()
    assert [point["tps"] for point in api_results["results"]] == [
        r.tps for r in results if r.run_id == run_ids[0]
    ]


def test_cancel_mid_run_keeps_finished_points(api, lab):
    exp = experiment(api, lab, [{}], [1, 2, 4], duration_s=3)
    (run_id,) = start(api, exp["id"])

    lab.wait_run(run_id, lambda run: run.results.exists(), "to finish its first point")
    response = api.post(f"/api/runs/{run_id}/cancel/")
    assert response.status_code == 200, response.content
    run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.CANCELLED
    assert run.error_category == "cancelled"
    assert 1 <= run.results.count() < 3


@pytest.mark.faults
def test_killed_agent_fails_its_run_with_a_reason(api, lab, settings):
    settings.HEARTBEAT_OFFLINE_AFTER_S = int(lab.env["HEARTBEAT_OFFLINE_AFTER_S"])
    exp = experiment(api, lab, [{}], [1, 2], duration_s=5)
    (run_id,) = start(api, exp["id"])

    lab.wait_run(run_id, measuring_point(2), "to run point 2")
    lab.kill_agent()
    killed = time.monotonic()
    run = lab.wait_terminal(run_id, timeout=60)
    seconds = recovered("agent killed, never restarted: run final", killed)

    assert run.status == Run.Status.FAILED
    assert run.error_code == "agent_lost"
    assert run.error_message
    assert seconds < 12 + 15, "AGENT_LOST_GRACE_S 12, the reaper every 2 s, and a margin"
    assert run.results.count() == 1, "the point finished before the agent died is kept"
    assert not Host.objects.get(name=lab.name).is_online
    assert_stored_once(run)
    assert_measured_once(lab, [run])
    lab.start_agent()  # a new agent on the host, later: it removes what the killed one left
    replaced = time.monotonic()
    assert_no_orphans(lab)
    next_run_succeeds(api, lab)
    recovered("agent killed, never restarted: a new agent's first run", replaced)


def test_control_worker_down_during_a_run_loses_no_event(api, lab):
    exp = experiment(api, lab, [{}], [1, 2], duration_s=2)
    (run_id,) = start(api, exp["id"])
    lab.wait_run(run_id, lambda run: run.status == Run.Status.RUNNING, "to start")
    lab.stop_control()

    wait_for(
        lambda: any(
            json.loads(fields[b"event"])["type"] == "result"
            for _, fields in lab.redis.xrange(lab.stream)
        ),
        90,
        "the agent to finish while the control worker is down",
        lab.logs,
    )
    lab.start_control()
    run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.SUCCEEDED
    seqs = sorted(RunEvent.objects.filter(run=run).values_list("seq", flat=True))
    assert seqs == list(range(1, seqs[-1] + 1))
    assert run.results.count() == 2
    wait_for(lambda: lab.stream_backlog() == 0, 30, "the stream to be drained", lab.logs)


def test_replayed_events_are_stored_once(api, lab):
    exp = experiment(api, lab, [{}], [1], duration_s=2)
    (run_id,) = start(api, exp["id"])
    run = lab.wait_terminal(run_id)
    stored = RunEvent.objects.filter(run=run).count()
    results = list(run.results.values_list("index", "tps"))
    first = RunEvent.objects.filter(run=run).order_by("seq").first()
    one_more = {
        **as_sent(run, first),
        "seq": stored + 1,
        "type": "log",
        "data": {"level": "info", "message": "a new event among the replayed ones"},
    }

    for event in RunEvent.objects.filter(run=run).order_by("seq"):
        lab.redis.xadd(lab.stream, {"event": json.dumps(signed(run, as_sent(run, event)))})
    lab.redis.xadd(lab.stream, {"event": json.dumps(signed(run, one_more))})
    wait_for(lambda: lab.stream_backlog() == 0, 30, "the replayed events to be consumed", lab.logs)

    assert RunEvent.objects.filter(run=run).count() == stored + 1, "only the new event is added"
    assert list(run.results.values_list("index", "tps")) == results
    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED


def test_events_with_a_wrong_token_are_dropped(api, lab):
    exp = experiment(api, lab, [{}], [1], duration_s=2)
    (run_id,) = start(api, exp["id"])
    run = lab.wait_terminal(run_id)
    # The forgery copies a stored point: the run must have measured one.
    assert run.status == Run.Status.SUCCEEDED, (run.error_message, lab.logs())
    forged = as_sent(run, RunEvent.objects.filter(run=run, type="point").first())
    forged.update(seq=10_000, token="not-the-run-token")
    forged["data"] = {**forged["data"], "index": 99, "tps": 1e9}

    lab.redis.xadd(lab.stream, {"event": json.dumps(signed(run, forged))})
    wait_for(lambda: lab.stream_backlog() == 0, 30, "the forged event to be consumed", lab.logs)

    assert not run.results.filter(index=99).exists()
    assert not RunEvent.objects.filter(run=run, seq=10_000).exists()


def test_bad_input_is_refused_before_anything_is_queued(api, lab):
    exp = experiment(api, lab, [{}], [1], duration_s=2)
    queue = agent_queue(lab.name)

    bad_setting = api.post(
        "/api/config-profiles/", {"name": "bad", "settings": {"work_mem": "lots"}}, format="json"
    )
    shell = api.post(
        "/api/workloads/",
        {"name": "evil", "scripts": [{"name": "x", "text": "\\shell id\n", "weight": 1}]},
        format="json",
    )
    anonymous = api.__class__().post(f"/api/experiments/{exp['id']}/start/")

    assert bad_setting.status_code == 400
    assert "settings.work_mem" in bad_setting.json()["error"]["fields"]
    assert shell.status_code == 400
    assert "workload.scripts[0].text" in shell.json()["error"]["fields"]
    assert anonymous.status_code in (401, 403)
    assert Run.objects.count() == 0
    assert lab.redis.llen(queue) == 0
