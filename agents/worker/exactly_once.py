"""Exactly once: each job runs at most once on an agent, whatever is delivered again.

The worker asks `job_id_of_spec` for a delivered job's id, and its ledger
(agents.worker.ledger) for what it knows of it: a finished job is answered with its
result again (`answer_from_ledger`, under the token of the delivery that
asked, so the lab stores it); a job the ledger holds as started was cut short
by an earlier agent process and is reported failed (`report_interrupted`,
run when the agent starts). `ledger_sink` records a job's result in the ledger
before the result event is sent.
"""

import logging
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

import redis

from agents.contract.errors import JobError
from agents.contract.wire import dispatch_key, settled_key
from agents.events import EventEmitter, Sink, now_iso
from agents.job import new_result
from agents.worker.ledger import JobLog, Ledger, LedgerEntry

logger = logging.getLogger(__name__)


def job_id_of_spec(spec: Mapping[str, Any], run_id: str) -> str:
    """The job's id: the spec's `job_id`, else (a lab without job ids) its dispatch."""
    job_id = spec.get("job_id")
    return job_id if isinstance(job_id, str) and job_id else dispatch_key(run_id, spec.get("token"))


def ledger_sink(ledger: Ledger, entry: LedgerEntry) -> Sink:
    """A sink that keeps the job's log events and records its `result` event, with that
    log, in the ledger (put it before the sink that sends: the ledger holds the result
    before the lab can see it)."""
    log = JobLog()

    def record(event: dict[str, Any]) -> None:
        log.keep(event)
        if event.get("type") == "result":
            ledger.finish(entry, event["data"], log)

    return record


def replay_emitter(
    sinks: list[Sink], entry: LedgerEntry, token: str | None, agent: str
) -> EventEmitter:
    """An emitter for the events the ledger sends for a job after the job itself has gone.

    Their seq starts at the current Unix time in seconds: above any seq the job emitted
    itself (a job emits far fewer than a billion events), so the lab never takes one for
    an event it already stored, and below the lab's 2**31 limit.
    """
    return EventEmitter(
        sinks, run_id=entry.run_id, token=token, agent=agent, first_seq=int(time.time())
    )


def answer_from_ledger(
    sinks: list[Sink], entry: LedgerEntry, token: str | None, agent: str
) -> None:
    """Send the finished job's log and result again, under the token of the delivery that
    asked.

    The log's events keep their own seq and time: the lab stores those it lost (Redis
    emptied before it read them) and drops, as duplicates, those it has.
    """
    if entry.result is None:
        raise RuntimeError(f"job {entry.job_id}: a finished ledger entry without a result")
    emitter = replay_emitter(sinks, entry, token, agent)
    for kept in entry.log:
        emitter.resend(kept["type"], kept["data"], seq=kept["seq"], ts=kept["ts"])
    emitter.emit("log", {"level": "warning", "message": _answered_line(entry)})
    emitter.emit("result", entry.result)


def _answered_line(entry: LedgerEntry) -> str:
    dropped = f" ({entry.log_dropped} events of its log were not kept)" if entry.log_dropped else ""
    return (
        f"job {entry.job_id} was delivered again; it finished "
        f"{entry.result['status'] if entry.result else ''} before and is not run twice: "
        f"its log and result are sent again from the agent's ledger{dropped}"
    )


def report_interrupted(
    ledger: Ledger, sinks: list[Sink], agent: str, entries: list[LedgerEntry] | None = None
) -> list[str]:
    """Report each job an earlier agent process started and never finished (`entries`,
    by default all the ledger holds) as failed, `agent_restarted`; return their job ids.
    The lab keeps the points it stored."""
    reported = []
    for entry in ledger.interrupted() if entries is None else entries:
        error = interrupted_error(entry, agent)
        result = new_result({"run_id": entry.run_id, "token": entry.token, "job_id": entry.job_id})
        result["status"], result["error"] = "failed", error.as_dict()
        result["finished_at"] = now_iso()
        result["started_at"] = _iso(entry.started_at)
        ledger.finish(entry, result)
        emitter = replay_emitter(sinks, entry, entry.token, agent)
        emitter.emit("log", {"level": "error", "message": error.message})
        emitter.emit("result", result)
        logger.warning("run %s: %s", entry.run_id, error.message)
        reported.append(entry.job_id)
    return reported


def interrupted_error(entry: LedgerEntry, agent: str) -> JobError:
    return JobError(
        "agent_restarted",
        f"agent {agent} stopped while it ran job {entry.job_id} (killed, or its host "
        "restarted) and came back; the job is not run again: re-run it from the lab",
    )


def _iso(timestamp: float) -> str:
    return datetime.fromtimestamp(timestamp, UTC).isoformat()


def unconfirmed_job_ids(ledger: Ledger, client: redis.Redis) -> Callable[[], list[str]]:
    """For the heartbeat: the finished jobs the lab has not confirmed, confirming on the
    way those whose settled key (set by the lab once it stored the result) exists."""

    def finished() -> list[str]:
        entries = ledger.unconfirmed()
        if not entries:
            return []
        try:
            settled = _settled(client, [entry.job_id for entry in entries])
        except redis.RedisError as error:
            logger.debug("cannot ask which jobs the lab settled: %s", error)
            settled = [False] * len(entries)
        for entry, done in zip(entries, settled, strict=True):
            if done:
                ledger.confirm(entry)
        return [entry.job_id for entry, done in zip(entries, settled, strict=True) if not done]

    return finished


def _settled(client: redis.Redis, job_ids: list[str]) -> list[bool]:
    pipeline = client.pipeline(transaction=False)
    for job_id in job_ids:
        pipeline.exists(settled_key(job_id))
    return [bool(found) for found in pipeline.execute()]
