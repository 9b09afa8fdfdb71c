"""Coordinated omission, made to happen: a capacity probe through the real agent
(PostgreSQL 16, pgbench -R with its per-transaction log) and the lab's probe decision
(runs/analysis/capacity.py over runs/inference/capacity.py and quantiles.py), while a
second session holds `LOCK TABLE pgbench_accounts IN ACCESS EXCLUSIVE MODE` for 3 s in
mid-window. The probe's p99 must be at least 1 s and the probe must fail p99 <= 20 ms on
its p99: pgbench -R counts each transaction's latency from its scheduled start, so every
transaction scheduled during the stall waited behind it, not only the 4 in flight.

The acceptance case is 60 s at half the capacity. This probe is 20 s at 100 tps (TPC-B at
scale 1 without waiting for the WAL flush serves several hundred tps on a quiet machine
here), and the proportions keep the claim. A transaction scheduled t s into the 3 s stall
waits about 3 - t s, so the slowest 1 % of a window of T seconds waited at least
3 - 0.01 T s: 2.4 s at 60 s, 2.8 s at 20 s; both far above 1 s. What the claim is against
still shows: counted from the actual start (coordinated omission, the schedule's lag
dropped) only the 4 transactions in flight would be slow, 4 of 2,000 (0.2 %), below the
1 % a p99 needs. A window of 20 s costs a third of the case's 60 s.

Nothing here asserts the latency outside the stall: on this shared machine under a load
of 18 a probe at 100 tps without the stall measured p50 21 ms and p99 875 ms (and the
same probe with the stall p99 2,955 ms, its interval's lower end 2,847 ms).
"""

import threading
import time
from pathlib import Path

import psycopg
import pytest

from agents.config import AgentConfig
from agents.postgres.cluster.clients import SUPERUSER, WORKLOAD_DATABASE
from runs.analysis.capacity import capacity_reading
from runs.inference.capacity import Decision
from runs.models import Run
from runs.services.jobs.events import store_point
from tests.agents.jobs import Event, run, small_spec
from tests.runs.factories import ExperimentFactory, RunFactory

pytestmark = pytest.mark.django_db

RATE_TPS = 100.0
WINDOW_S = 20
STALL_S = 3.0
LIMIT_MS = 20.0
# From the point's start (its status event, within a second of pgbench's) to the lock: the
# stall then covers about seconds 8.5 to 11.5 of the 20.
LOCK_AFTER_S = WINDOW_S / 2 - STALL_S / 2


class Stall:
    """A second session that takes the lock once, in its own thread, for STALL_S."""

    def __init__(self, storage_root: Path) -> None:
        self.storage_root = storage_root
        self.thread = threading.Thread(target=self._hold, daemon=True)
        self.held = False
        self.error: BaseException | None = None

    def start_once(self, event: Event) -> None:
        if event["type"] == "status" and event["data"]["message"].startswith("point 1 of"):
            self.thread.start()

    def _hold(self) -> None:
        try:
            time.sleep(LOCK_AFTER_S)
            with psycopg.connect(self._conninfo(), autocommit=False) as conn:
                conn.execute("LOCK TABLE pgbench_accounts IN ACCESS EXCLUSIVE MODE")
                time.sleep(STALL_S)
                conn.commit()
                self.held = True
        except BaseException as error:  # the test asserts on it in its own thread
            self.error = error

    def _conninfo(self) -> str:
        job_dir = next(self.storage_root.glob("data/benchlab-*"))
        port = (job_dir / "data" / "postmaster.pid").read_text().splitlines()[3]
        socket_dir = job_dir / "socket"
        return f"host={socket_dir} port={port} user={SUPERUSER} dbname={WORKLOAD_DATABASE}"


def test_a_three_second_lock_mid_probe_puts_p99_over_a_second_and_fails_the_probe(
    config: AgentConfig, storage_root: Path
) -> None:
    spec = small_spec(
        run_id="stall",
        settings={"synchronous_commit": "off"},
        workload={"rate_tps": RATE_TPS},
        sweep={"clients": [4], "duration_s": WINDOW_S},
    )
    stall = Stall(storage_root)

    document, _events = run(spec, config, hook=stall.start_once)
    stall.thread.join(timeout=30)

    assert document["status"] == "succeeded", document["error"]
    assert stall.error is None and stall.held, stall.error
    (point,) = document["points"]
    # The stall fell in the window: pgbench started a transaction over 2 s behind schedule.
    assert (point["lag_max_ms"] or 0.0) >= 2000.0, point["lag_max_ms"]
    experiment = ExperimentFactory(
        clients=[4],
        duration_s=WINDOW_S,
        execution="rounds",
        capacity=True,
        capacity_percentile=99.0,
        capacity_limit_ms=LIMIT_MS,
        capacity_low_tps=RATE_TPS,
        capacity_high_tps=10 * RATE_TPS,
    )
    probe = RunFactory(experiment=experiment, status=Run.Status.SUCCEEDED, spec=spec, round=1)
    store_point(probe, point)

    reading = capacity_reading(experiment)
    (outcome,) = reading.outcomes
    (measured,) = reading.probes
    p99_ms = measured.percentiles[99.0]
    assert p99_ms is not None and p99_ms >= 1000.0, measured.percentiles
    assert outcome.estimate_ms is not None and outcome.estimate_ms >= 1000.0
    assert outcome.decision == Decision.FAIL, outcome.verdict.reasons
    assert any(reason.startswith("p99 at least") for reason in outcome.verdict.reasons)
