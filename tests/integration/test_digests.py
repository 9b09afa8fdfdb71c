"""Timeline digests for real: the control worker builds a run's digest when the run ends
and again when an event arrives for it later; the pages only read it.

The lab runs on a Redis of its own: the digest task goes to the queue `control`, which
any other lab's control worker on the shared Redis would take as well.
"""

import json
from collections.abc import Iterator

import pytest
from django.db.models import Max

from runs.models import Run, RunEvent, RunTimeline
from runs.timelines import store
from tests.integration.conftest import Lab, running_lab
from tests.integration.test_lab import as_sent, experiment, signed, start
from tests.integration.test_redis_loss import web_tier_on  # noqa: F401 - a fixture
from tests.waiting import wait_for

pytestmark = pytest.mark.integration

LATE_TPS = 7777.0


@pytest.fixture
def own_lab(transactional_db, tmp_path, own_redis, web_tier_on) -> Iterator[Lab]:  # noqa: F811
    with running_lab(tmp_path, own_redis.url) as lab:
        yield lab


def current_digest(run_id: int) -> RunTimeline | None:
    """The run's stored digest when it is the one for the run's state now."""
    run = Run.objects.get(pk=run_id)
    return RunTimeline.objects.filter(run=run, key=store.digest_key(run)).first()


def rebuilt_since(built: RunTimeline):
    """A condition: the run's digest is current and built for a later state than `built`."""

    def rebuilt() -> RunTimeline | None:
        digest = current_digest(built.run_id)
        return digest if digest is not None and digest.key != built.key else None

    return rebuilt


def test_the_control_worker_builds_a_digest_when_a_run_ends_and_after_a_late_event(api, own_lab):
    lab = own_lab
    exp = experiment(api, lab, [{}], [1], duration_s=2)
    (run_id,) = start(api, exp["id"])
    run = lab.wait_terminal(run_id)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    built = wait_for(lambda: current_digest(run_id), 60, "the digest of the ended run", lab.logs)
    assert "tps" in store.digests([run])[run_id].traces

    last = RunEvent.objects.filter(run=run).order_by("seq").last()
    late = {
        **as_sent(run, last),
        "seq": RunEvent.objects.filter(run=run).aggregate(n=Max("seq"))["n"] + 1,
        "type": "progress",
        "data": {"point": 1, "t": 1.0, "tps": LATE_TPS, "latency_ms": 1.0},
    }
    lab.redis.xadd(lab.stream, {"event": json.dumps(signed(run, late))})
    rebuilt = wait_for(rebuilt_since(built), 60, "the digest built after the late event", lab.logs)

    run.refresh_from_db()
    assert run.status == Run.Status.SUCCEEDED
    assert rebuilt.built_at > built.built_at
    assert store.digests([run], names=["tps"])[run_id].traces["tps"].y[-1] == LATE_TPS
    assert f"run {run_id}: timeline digest built" in lab.logs()
