"""What every fault scenario asserts (docs/reliability.md): every run final
within a stated time, each per-second sample and point stored once, no run measured
twice, no orphan server or directory, and the host's queue moving again.

The scenarios are marked `faults` (`pytest -m faults` runs the tier). Each logs its
`time to recover` (pytest `-o log_cli=true --log-cli-level=WARNING`).
"""

import logging
import time
import uuid
from collections.abc import Callable, Iterable

import psutil
from django.db.models import Count, Model

from agents.config import default_state_dir
from agents.markers import ClusterMarker
from agents.pgbench.latency_log import LOG_DIR_NAME
from runs.models import Run
from tests.integration.api import create, start
from tests.integration.conftest import ROW_POLL_S, TERMINAL, Lab
from tests.waiting import wait_for

logger = logging.getLogger(__name__)

CLUSTER_CREATED = "creating a throw-away cluster"
# A run's per-second rows: one per point and second (and role, where samples have one).
SAMPLES = ("progress", "host_samples", "server_samples")
# The pace of a run that only has to last through a fault (pgbench -R, transactions a
# second): at full speed pgbench and its server take the CPUs, or the disk with a synced
# commit per transaction, from the suite's other tests for the whole run. Paced, each
# second still has its progress, samples and logged transactions (every one at this rate),
# and a point its result: what the fault scenarios check does not depend on the rate.
PACED_TPS = 50


def measuring_point(number: int) -> Callable[[Run], bool]:
    """Whether the run's agent said it started its point `number` (from 1): a status event,
    sent at once (live progress waits up to 2 s to go with the events after it)."""
    return lambda run: run.step.startswith(f"running: point {number} of")


def recovered(scenario: str, since: float) -> float:
    """Seconds since `since` (time.monotonic), logged as the scenario's time to recover."""
    seconds = time.monotonic() - since
    logger.warning("time to recover, %s: %.1f s", scenario, seconds)
    return seconds


def all_final(lab: Lab, run_ids: Iterable[int], within_s: float) -> list[Run]:
    """The runs once every one is final; the test fails if that takes longer than `within_s`."""
    ids = list(run_ids)

    def final() -> list[Run] | None:
        runs = list(Run.objects.filter(pk__in=ids).order_by("pk"))
        return runs if all(run.status in TERMINAL for run in runs) else None

    return wait_for(final, within_s, f"runs {ids} to be final", lab.logs, ROW_POLL_S)


def assert_stored_once(run: Run, gapless: bool = True) -> None:
    """Each event, per-second sample and point of `run` is stored once.

    `gapless`: the seqs also run 1..N without a gap (not so for a run settled by a
    restarted agent, whose report uses seqs from the current Unix time).
    """
    seqs = list(run.events.values_list("seq", flat=True))
    assert len(seqs) == len(set(seqs)), "an event was stored twice"
    if gapless and seqs:
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), f"an event was lost: {seqs}"
    for name in SAMPLES:
        rows = getattr(run, name)
        per = ["point", "t", *(f for f in ("role",) if _has_field(rows.model, f))]
        twice = rows.values(*per).annotate(n=Count("id")).filter(n__gt=1)
        assert not twice.exists(), f"run {run.pk}: {name} stored twice: {list(twice)}"
    indexes = list(run.results.order_by("index").values_list("index", flat=True))
    assert indexes == list(range(len(indexes))), f"run {run.pk}: points {indexes}"


def _has_field(model: type[Model], name: str) -> bool:
    return any(field.name == name for field in model._meta.get_fields())


def clusters_measured(lab: Lab, run_id: int) -> int:
    """How many clusters the lab's agents created for `run_id`, from their logs."""
    logs = (path.read_text(errors="replace") for path in lab.log_dir.rglob("*.log"))
    return sum(log.count(f"run {run_id}: {CLUSTER_CREATED}") for log in logs)


def assert_measured_once(lab: Lab, runs: Iterable[Run]) -> None:
    """No run was measured twice: at most one cluster per run, one for each with a point."""
    for run in runs:
        created = clusters_measured(lab, run.pk)
        assert created <= 1, f"run {run.pk} was measured {created} times"
        if run.results.exists():
            assert created == 1, f"run {run.pk} has points but no cluster in the agents' logs"


def orphans(lab: Lab) -> list[str]:
    """Servers and directories of the lab's agents that nothing owns any more: processes
    running in its storage, cluster directories there, point logs of its agent processes."""
    found = [
        f"process {p.pid}: {' '.join(p.info['cmdline'])}"
        for p in psutil.process_iter(["cmdline"])
        if str(lab.storage) in " ".join(p.info["cmdline"] or []) and p.pid not in lab.agent_pids
    ]
    found += [str(path) for path in lab.storage.glob("benchlab-*")]
    txlog = default_state_dir() / LOG_DIR_NAME
    for directory in txlog.iterdir() if txlog.is_dir() else ():
        marker = ClusterMarker.read(directory)
        if marker is not None and marker.owner_pid in lab.agent_pids:
            found.append(str(directory))
    return found


def assert_no_orphans(lab: Lab, within_s: float = 30) -> None:
    """Nothing of a run is left on the host (waits `within_s` for the agent's cleanup)."""
    wait_for(lambda: not orphans(lab), within_s, "orphans to go", lambda: str(orphans(lab)))


def short_run(
    api,
    lab: Lab,
    points: int = 1,
    duration_s: int = 1,
    scale: int = 1,
    data: str = "default",
    rate_tps: float | None = None,
) -> int:
    """Start a run of `points` points of `duration_s` at `scale` on the lab's host, its
    cluster on the storage target `data`, pgbench paced to `rate_tps` if given; its id."""
    tag = uuid.uuid4().hex[:6]
    build = create(api, "builds", {"name": f"pg16-{tag}", "version": "16", "source": "prebuilt"})
    profile = create(api, "config-profiles", {"name": f"fault-{tag}", "settings": {}})
    workload = create(
        api,
        "workloads",
        {
            "name": f"fault-{tag}",
            "scale": scale,
            "scripts": [{"builtin": "tpcb-like", "weight": 1}],
            "rate_tps": rate_tps,
        },
    )
    payload = {
        "name": f"fault {tag}",
        "hosts": [lab.wait_registered().pk],
        "builds": [build["id"]],
        "config_profiles": [profile["id"]],
        "workloads": [workload["id"]],
        "storage_layouts": [{"data": data, "wal": None}],
        "clients": list(range(1, points + 1)),
        "duration_s": duration_s,
    }
    (run_id,) = start(api, create(api, "experiments", payload)["id"])
    return run_id


def next_run_succeeds(api, lab: Lab, within_s: float = 120) -> float:
    """Start one short run on the lab's host and wait for it to succeed: the host's queue
    moves. Returns the seconds it took."""
    began = time.monotonic()
    run = lab.wait_terminal(short_run(api, lab), timeout=within_s)
    assert run.status == Run.Status.SUCCEEDED, run.error_message
    assert_stored_once(run)
    assert_measured_once(lab, [run])
    return time.monotonic() - began
