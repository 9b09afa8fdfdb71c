"""Agent events for tests, built by the agent's own emitter (agents.events)."""

from datetime import UTC, datetime

from agents.contract.signing import is_secret, sign
from agents.events import EventEmitter


def run_event(run, seq: int, event_type: str, data: dict, token: str | None = None) -> dict:
    """A run's event as its host's agent sends it: built by the agent's emitter, signed with
    the host's secret."""
    emitter = EventEmitter(
        [],
        run_id=str(run.pk),
        token=run.token if token is None else token,
        agent=run.host.name,
        first_seq=seq,
    )
    event = emitter.emit(event_type, data)
    return sign("event", event, run.host.secret) if is_secret(run.host.secret) else event


def agent_event(
    agent: str, seq: int, event_type: str, data: dict, secret: str | None = None
) -> dict:
    """An agent-level event built by the agent's emitter, signed with `secret` when given."""
    event = EventEmitter([], agent=agent, first_seq=seq).emit(event_type, data)
    return sign("event", event, secret) if secret else event


def point(index: int, clients: int = 1, tps: float = 500.0) -> dict:
    """A point result (section 3) with a two-second progress timeline."""
    return {
        "index": index,
        "clients": clients,
        "threads": 1,
        "repeat": 1,
        "argv": ["/usr/bin/pgbench", "-c", str(clients), "-T", "2"],
        "exit_code": 0,
        "tps": tps,
        "latency_avg_ms": 1.9,
        "latency_stddev_ms": 0.3,
        "latency_percentiles_ms": {"p50": 1.8, "p99": 3.1},
        "transactions": int(tps * 2),
        "failed": 0,
        "duration_s": 2,
        "query_mode": "simple",
        "scale": 1,
        "statements": [{"latency_ms": 0.1, "command": "BEGIN;"}],
        "progress": [
            {"t": 1.0, "tps": tps, "latency_ms": 1.9, "stddev_ms": 0.2},
            {"t": 2.0, "tps": tps, "latency_ms": 1.9, "stddev_ms": 0.2},
        ],
        "host_samples": [{"t": 1.0, "cpu_user": 40.1}],
        "server_samples": [{"t": 1.0, "checkpoints_timed": 0}],
        "stdout": "tps = 500",
        "stderr": "",
    }


def result(run, status: str = "succeeded", points: list | None = None, error=None) -> dict:
    """A result document (section 3)."""
    return {
        "version": 1,
        "run_id": str(run.pk),
        "status": status,
        "error": error,
        "started_at": datetime.now(UTC).isoformat(),
        "finished_at": datetime.now(UTC).isoformat(),
        "spec": run.spec,
        "install": {"version": "16.15", "major": 16, "source": "prebuilt"},
        "facts": {"cpu": {"count": 2}},
        "storage": {"data": {"name": "default", "path": "/srv", "device": "sda"}, "wal": None},
        "settings": {
            "requested": {},
            "effective": [{"name": "shared_buffers", "setting": "16384"}],
        },
        "steps": [{"name": "initdb", "argv": ["initdb"], "seconds": 1.2, "exit_code": 0}],
        "points": points if points is not None else [point(0)],
        "server_log_tail": "LOG:  database system is shut down",
    }
