"""Synthetic runs for the benchmarks (never for a real lab database).

`long_run` makes a finished (or running) run whose points last an hour each,
with one progress, host and server sample a second, shaped like what agents
store: tps with a slow wave and noise, checkpoints every five minutes with
their buffer writes, wait events, CPU and disk utilisation.
"""

import math
import random
import secrets
from typing import TypeVar

from django.utils import timezone

from runs.models import (
    ConfigProfile,
    Experiment,
    Host,
    HostSample,
    PgBuild,
    ProgressSample,
    Result,
    Run,
    ServerSample,
    Workload,
)

CHECKPOINT_EVERY_S = 300
CHECKPOINT_WRITES_S = 120
BATCH = 5000


def experiment(name: str) -> Experiment:
    """An experiment on a synthetic host, build, profile and workload of that name."""
    host, _ = Host.objects.get_or_create(
        name=f"synthetic-{name}", defaults={"enrollment": Host.Enrollment.APPROVED}
    )
    build, _ = PgBuild.objects.get_or_create(name=f"pg17-{name}", defaults={"version": "17"})
    profile, _ = ConfigProfile.objects.get_or_create(name=f"tuned-{name}")
    workload, _ = Workload.objects.get_or_create(
        name=f"tpcb-{name}", defaults={"scripts": [{"builtin": "tpcb-like", "weight": 1}]}
    )
    found = Experiment.objects.create(name=name, clients=[16], duration_s=3600, repeats=1)
    found.hosts.set([host])
    found.builds.set([build])
    found.config_profiles.set([profile])
    found.workloads.set([workload])
    return found


def long_run(of: Experiment, seconds: list[int], seed: int, running: bool = False) -> Run:
    """A run of `of` whose points last `seconds` each, every sample stored."""
    rng = random.Random(seed)
    clients = [8 * (n + 1) for n in range(len(seconds))]
    run = Run.objects.create(
        experiment=of,
        host=of.hosts.get(),
        build=of.builds.get(),
        config_profile=of.config_profiles.get(),
        workload=of.workloads.get(),
        storage_data="default",
        token=secrets.token_hex(16),
        status=Run.Status.RUNNING if running else Run.Status.SUCCEEDED,
        spec={"sweep": {"clients": clients, "repeats": 1, "duration_s": max(seconds)}},
        started_at=timezone.now(),
        finished_at=None if running else timezone.now(),
    )
    for point, (length, count) in enumerate(zip(seconds, clients, strict=True)):
        base = 4000.0 + 400.0 * point + rng.uniform(-50, 50)
        _store(ProgressSample, [_progress(run, point, t, base, rng) for t in range(1, length + 1)])
        _store(HostSample, [_host(run, point, t, rng) for t in range(1, length + 1)])
        _store(ServerSample, [_server(run, point, t, rng) for t in range(1, length + 1)])
        if not running:
            Result.objects.create(
                run=run,
                index=point,
                clients=count,
                threads=count,
                tps=base,
                latency_avg_ms=1000.0 * count / base,
                transactions=int(base * length),
                duration_s=float(length),
            )
    return run


StoredSample = TypeVar("StoredSample", ProgressSample, HostSample, ServerSample)


def _store(model: type[StoredSample], rows: list[StoredSample]) -> None:
    model.objects.bulk_create(rows, batch_size=BATCH)


def _progress(run: Run, point: int, t: int, base: float, rng: random.Random) -> ProgressSample:
    writing = t % CHECKPOINT_EVERY_S < CHECKPOINT_WRITES_S
    tps = base * (1 + 0.05 * math.sin(t / 60)) * (0.9 if writing else 1.0) + rng.gauss(0, 40)
    return ProgressSample(
        run=run, point=point, t=float(t), tps=tps, latency_ms=4.0 * base / tps, stddev_ms=0.8
    )


def _host(run: Run, point: int, t: int, rng: random.Random) -> HostSample:
    data = {
        "t": float(t),
        "cpu_user": 55 + rng.uniform(-5, 5),
        "cpu_system": 20 + rng.uniform(-3, 3),
        "cpu_iowait": 3 + rng.uniform(0, 2),
        "cpu_idle": 20 + rng.uniform(-3, 3),
        "disks": {
            "data": {"util_percent": 40 + rng.uniform(-10, 10)},
            "wal": {"util_percent": 60 + rng.uniform(-10, 10)},
        },
    }
    return HostSample(run=run, role=HostSample.Role.SERVER, point=point, t=float(t), data=data)


def _server(run: Run, point: int, t: int, rng: random.Random) -> ServerSample:
    writing = t % CHECKPOINT_EVERY_S < CHECKPOINT_WRITES_S
    data = {
        "t": float(t),
        "checkpoints_timed": t // CHECKPOINT_EVERY_S,
        "checkpoints_req": 0,
        "buffers_checkpoint_per_s": 800 + rng.uniform(0, 100) if writing else 0.0,
        "buffers_clean_per_s": 50 + rng.uniform(0, 20),
        "buffers_backend_per_s": 10 + rng.uniform(0, 5),
        "wait_events": {"LWLock:WALWrite": rng.randint(0, 4), "IO:WALSync": rng.randint(0, 3)},
    }
    return ServerSample(run=run, point=point, t=float(t), data=data)
