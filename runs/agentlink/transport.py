"""The web side of the lab transport (docs/contracts.md, section 4).

Jobs go to an agent's own queue by task name; the control plane never imports
the agent's Celery app. Cancel requests are a Redis key the agent polls. The
names on the wire are the contract's (agents.contract.wire).
"""

import json
import logging
from collections.abc import Callable
from functools import lru_cache, partial

import redis
from django.conf import settings
from django.db import transaction
from kombu.exceptions import OperationalError

from agents.contract.duet import DuetDocument
from agents.contract.signing import sign
from agents.contract.spec.document import JobSpec
from agents.contract.wire import (
    DISPATCH_KEY_TTL_S,
    RUN_JOB_TASK,
    agent_queue,
    cancel_key,
    claim_key,
    dispatch_key,
    settled_key,
    source_upload_key,
)
from benchlab.celery import app

logger = logging.getLogger(__name__)

# The control worker's queue: the tasks the lab sends itself (series, digests, adaptive steps).
CONTROL_QUEUE = "control"
# What a send raises while Redis does not answer (celery's publish, after its own retries).
REDIS_DOWN = (OperationalError, redis.ConnectionError, redis.TimeoutError)


@lru_cache(maxsize=4)
def _connection(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def redis_connection() -> redis.Redis:
    """A shared client for REDIS_URL (thread-safe: redis-py pools its connections)."""
    return _connection(settings.REDIS_URL)


def send_after_commit(run_pk: int, what: str, send: Callable[[], None]) -> None:
    """Call `send` once the transaction commits; Redis not answering is logged, not raised.

    The write it follows is committed, so the request succeeds: a job not sent is
    sent again by the reaper once Redis answers (the run stays queued, neither
    waiting nor claimed: `runs_recover_lost_jobs`); a cancel flag not set is lost
    (the run is cancelled in the lab; an agent that takes its job runs it).
    """
    transaction.on_commit(partial(send_or_log, run_pk, what, send))


def send_or_log(run_pk: int, what: str, send: Callable[[], None]) -> None:
    """Call `send`; Redis not answering is logged as a warning naming the run and `what`."""
    try:
        send()
    except REDIS_DOWN as error:
        logger.warning("run %s: %s not sent, Redis did not answer: %s", run_pk, what, error)


def send_job(spec: JobSpec, host_name: str, task_id: str, secret: str) -> None:
    """Queue one job spec for an agent, signed with the agent's secret.

    `task_id` was stored on the Run beforehand.
    """
    queue = agent_queue(host_name)
    signed = sign("job", spec, secret)
    app.send_task(RUN_JOB_TASK, args=[signed], queue=queue, task_id=task_id)
    logger.info("run %s: job sent to %s (task %s)", spec["run_id"], queue, task_id)


def send_duet(document: DuetDocument, host_name: str, task_id: str, secret: str) -> None:
    """Queue a duet (both sides' job specs in one document, agents/duet.py) for an agent,
    signed as a job is."""
    queue = agent_queue(host_name)
    signed = sign("job", document, secret)
    app.send_task(RUN_JOB_TASK, args=[signed], queue=queue, task_id=task_id)
    logger.info("duet %s: job sent to %s (task %s)", document["key"], queue, task_id)


def request_cancel(run_id: str, token: str) -> None:
    """Set the flag the agent checks every second and before it starts a job."""
    key = cancel_key(dispatch_key(run_id, token))
    redis_connection().set(key, "1", ex=DISPATCH_KEY_TTL_S)
    logger.info("run %s: cancel requested", run_id)


def confirm_settled(job_id: str) -> None:
    """Tell the agent's ledger the lab stored the job's result (its heartbeats stop naming it)."""
    redis_connection().set(settled_key(job_id), "1", ex=DISPATCH_KEY_TTL_S)


# kombu keeps a queue as one Redis list per priority step; a message sent without
# a priority waits in the list named like the queue.
PRIORITY_SEPARATOR = "\x06\x16"
PRIORITY_STEPS = (3, 6, 9)


def waiting_task_ids(host_name: str) -> set[str]:
    """The Celery ids of the jobs waiting in the agent's queue, read in one round trip."""
    queue = agent_queue(host_name)
    pipeline = redis_connection().pipeline(transaction=False)
    for key in [queue, *(f"{queue}{PRIORITY_SEPARATOR}{step}" for step in PRIORITY_STEPS)]:
        pipeline.lrange(key, 0, -1)
    waiting = (message for messages in pipeline.execute() for message in messages)
    return {task_id for message in waiting if (task_id := _message_task_id(message))}


def _message_task_id(message: str) -> str | None:
    try:
        return json.loads(message)["headers"]["id"]
    except (ValueError, KeyError, TypeError):
        return None


def dispatch_claimed(run_id: str, token: str) -> bool:
    """Whether an agent has claimed this dispatch of the run."""
    return bool(redis_connection().exists(claim_key(dispatch_key(run_id, token))))


def events_backlog_age_s(stream: str) -> float:
    """How long the oldest event still in `stream` has waited, by Redis' clock; 0 when none.

    The consumer deletes each entry once stored, so what is left waits for it.
    """
    client = redis_connection()
    oldest = client.xrange(stream, count=1)
    if not oldest:
        return 0.0
    seconds, microseconds = client.time()
    sent_ms = int(str(oldest[0][0]).split("-")[0])
    return max(0.0, seconds + microseconds / 1e6 - sent_ms / 1000)


def store_source_upload(sha256: str, data: bytes, expiry_s: int) -> None:
    """Put an uploaded source tarball where agents read it, for `expiry_s` seconds."""
    redis.Redis.from_url(settings.REDIS_URL).set(source_upload_key(sha256), data, ex=expiry_s)


def refresh_source_upload(sha256: str, expiry_s: int) -> bool:
    """Keep the agents' copy of an upload `expiry_s` seconds more; False when there is none."""
    return bool(redis_connection().expire(source_upload_key(sha256), expiry_s))


def forget_source_upload(sha256: str) -> None:
    """Remove the agents' copy of an upload (its last build was deleted)."""
    redis_connection().delete(source_upload_key(sha256))
