"""`scripts/bench ingest`: how many agent events a second one control worker stores.

Creates approved hosts with a running run each in the (throw-away) lab
database, puts what their agents would send in a stream of its own (per agent
and second: a progress line and a host and server sample; a heartbeat every
five seconds; each event signed with its host's secret), then times one
EventConsumer, as the control worker runs it, storing all of it. Prints the
figure for the lab database in use (scripts/bench runs it on PostgreSQL, then
on SQLite).
"""

import json
import time
import uuid
from datetime import UTC, datetime

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser
from django.db import connection

from agents.contract.reports.events import EVENT_VERSION
from agents.contract.signing import new_secret, sign
from runs.agentlink.transport import redis_connection
from runs.control.consumer import EventConsumer
from runs.management import synthetic
from runs.management.commands.bench_pages import machine, require_throwaway_database
from runs.models import Host, ProgressSample, Run

HEARTBEAT_EVERY_S = 5
XADD_CHUNK = 1000


def _event(run: Run, seq: int, kind: str, data: dict[str, object]) -> dict[str, object]:
    event = {
        "version": EVENT_VERSION,
        "run_id": str(run.pk),
        "token": run.token,
        "agent": run.host.name,
        "seq": seq,
        "ts": datetime.now(UTC).isoformat(),
        "type": kind,
        "data": data,
    }
    return sign("event", event, run.host.secret)


def _heartbeat(run: Run, seq: int) -> dict[str, object]:
    event = {
        "version": EVENT_VERSION,
        "agent": run.host.name,
        "seq": seq,
        "ts": datetime.now(UTC).isoformat(),
        "type": "heartbeat",
        "data": {"running": str(run.pk)},
    }
    return sign("event", event, run.host.secret)


def agent_second(run: Run, t: int) -> list[dict[str, object]]:
    """What one agent sends in second `t` of its run."""
    host = {"t": float(t), "cpu_user": 50.0, "cpu_idle": 30.0, "disks": {}}
    server = {"t": float(t), "checkpoints_timed": 0, "buffers_checkpoint_per_s": 0.0}
    sent = [
        _event(run, 2 * t - 1, "progress", {"point": 0, "t": float(t), "tps": 1000.0 + t}),
        _event(run, 2 * t, "sample", {"point": 0, "host": host, "server": server}),
    ]
    if t % HEARTBEAT_EVERY_S == 0:
        sent.append(_heartbeat(run, t))
    return sent


class Command(BaseCommand):
    help = "Time one control worker storing agent events from Redis (throw-away DB)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--agents", type=int, default=200, help="agents sending at once")
        parser.add_argument("--seconds", type=int, default=30, help="seconds each agent sends")
        parser.add_argument("--batch", type=int, default=500, help="entries per consumer round")

    def handle(self, *args: object, **options: int) -> None:
        require_throwaway_database()
        runs = self.create_runs(options["agents"])
        self.stderr.write(f"signing what {len(runs)} agents send in {options['seconds']} s ...")
        seconds = range(1, options["seconds"] + 1)
        sent = [event for t in seconds for run in runs for event in agent_second(run, t)]
        client = redis_connection()
        stream = f"benchlab:bench-events:{uuid.uuid4().hex[:8]}"
        consumer = EventConsumer(client, stream, "bench", "bench", 100, options["batch"])
        try:
            for start in range(0, len(sent), XADD_CHUNK):
                pipe = client.pipeline()
                for event in sent[start : start + XADD_CHUNK]:
                    pipe.xadd(
                        stream,
                        {"event": json.dumps(event)},
                        maxlen=settings.BENCHLAB_EVENTS_MAXLEN,
                        approximate=True,
                    )
                pipe.execute()
            consumer.ensure_group()
            self.stderr.write(f"storing {len(sent):,} events ...")
            elapsed = self.consume(consumer)
        finally:
            client.delete(stream, consumer.dead_letter_stream)
        self.check_stored(runs, options["seconds"])
        rate = len(sent) / elapsed
        self.stdout.write(f"Machine: {machine()}")
        self.stdout.write(
            f"{connection.vendor}: {len(sent):,} events of {len(runs)} agents stored in "
            f"{elapsed:.1f} s by one consumer (batches of {options['batch']}): "
            f"{rate:,.0f} events/s"
        )

    def create_runs(self, count: int) -> list[Run]:
        tag = uuid.uuid4().hex[:6]
        experiment = synthetic.experiment(f"bench-ingest-{tag}")
        template = synthetic.long_run(experiment, [1], seed=0, running=True)
        hosts = Host.objects.bulk_create(
            Host(
                name=f"agent-{tag}-{n:04d}",
                enrollment=Host.Enrollment.APPROVED,
                secret=new_secret(),
            )
            for n in range(count)
        )
        fields = {f: getattr(template, f) for f in ("experiment_id", "build_id", "workload_id")}
        runs = Run.objects.bulk_create(
            Run(
                host=host,
                config_profile_id=template.config_profile_id,
                storage_data="default",
                status=Run.Status.RUNNING,
                token=uuid.uuid4().hex,
                **fields,
            )
            for host in hosts
        )
        return list(Run.objects.select_related("host").filter(pk__in=[r.pk for r in runs]))

    def consume(self, consumer: EventConsumer) -> float:
        started = time.perf_counter()
        while consumer.run_round():
            pass
        return time.perf_counter() - started

    def check_stored(self, runs: list[Run], seconds: int) -> None:
        stored = ProgressSample.objects.filter(run__in=runs).count()
        if stored != len(runs) * seconds:
            raise CommandError(f"stored {stored} progress samples, expected {len(runs) * seconds}")
