"""One loop for the control worker's threads: a lost database or Redis is waited out."""

import logging
import threading
from collections.abc import Callable

import redis
from django.db import InterfaceError, OperationalError, connections

logger = logging.getLogger(__name__)

DATABASE_DOWN = (OperationalError, InterfaceError)
FIRST_BACKOFF_S = 0.5
MAX_BACKOFF_S = 10.0


def run_until_stopped(
    name: str,
    step: Callable[[], object],
    stop: threading.Event,
    prepare: Callable[[], object] = lambda: None,
    pause_s: float = 0.0,
) -> None:
    """Call `step` until `stop` is set, `pause_s` apart; never give up.

    `prepare` runs before the first step and again after any failure. A failing
    step is logged (with its traceback when it is not a lost database or Redis)
    and retried with a doubling backoff of at most MAX_BACKOFF_S.
    """
    backoff, prepared = FIRST_BACKOFF_S, False
    while not stop.is_set():
        try:
            if not prepared:
                prepare()
                prepared = True
            step()
        except Exception as exc:
            _report(name, exc, backoff)
            prepared = False
            stop.wait(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF_S)
            continue
        backoff = FIRST_BACKOFF_S
        stop.wait(pause_s)
    connections.close_all()


def _report(name: str, exc: Exception, backoff: float) -> None:
    if isinstance(exc, DATABASE_DOWN):
        logger.warning("%s: database unavailable, retrying in %.1f s: %s", name, backoff, exc)
        connections.close_all()
    elif isinstance(exc, redis.RedisError):
        logger.warning("%s: redis unavailable, retrying in %.1f s: %s", name, backoff, exc)
    else:
        logger.exception("%s: unexpected error, retrying in %.1f s", name, backoff)
