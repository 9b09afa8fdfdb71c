"""The web side of the lab transport (docs/contracts.md, section 4).

Jobs go to an agent's own queue by task name; the control plane never imports
the agent's Celery app. Cancel requests are a Redis key the agent polls.
"""

import logging
from functools import lru_cache

import redis
from django.conf import settings

from benchlab.celery import app

logger = logging.getLogger(__name__)

RUN_JOB_TASK = "benchlab.agent.run_job"


def agent_queue(host_name: str) -> str:
    """The Celery queue an agent listens on."""
    return f"agent.{host_name}"


def cancel_key(run_id: str, token: str) -> str:
    """The flag the agent polls for one dispatch of a run (docs/contracts.md section 4)."""
    return f"benchlab:cancel:{run_id}:{token}"


@lru_cache(maxsize=4)
def _connection(url: str) -> redis.Redis:
    return redis.Redis.from_url(url, decode_responses=True)


def redis_connection() -> redis.Redis:
    """A shared client for REDIS_URL (thread-safe: redis-py pools its connections)."""
    return _connection(settings.REDIS_URL)


def send_job(spec: dict, host_name: str, task_id: str) -> None:
    """Queue one job spec for an agent; `task_id` was stored on the Run beforehand."""
    app.send_task(RUN_JOB_TASK, args=[spec], queue=agent_queue(host_name), task_id=task_id)
    logger.info("run %s: job sent to %s (task %s)", spec["run_id"], agent_queue(host_name), task_id)


def request_cancel(run_id: str, token: str) -> None:
    """Set the flag the agent checks every second and before it starts a job."""
    redis_connection().set(cancel_key(run_id, token), "1", ex=settings.BENCHLAB_CANCEL_KEY_TTL_S)
    logger.info("run %s: cancel requested", run_id)
