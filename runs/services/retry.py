"""Transactions that lose a deadlock or a serialization conflict run again.

PostgreSQL ends one transaction of a lock cycle (`deadlock_detected`) and may
end a serializable one (`serialization_failure`); both leave nothing behind,
so the whole transaction can simply run again. `retry_on_conflict` does that
for a service that opens its own transaction, a few times with a random
pause that grows, so two transactions that collided do not collide again.
It retries nothing inside an enclosing transaction (the enclosing one is
lost: its caller must retry), and nothing else: a lost database is not a
conflict. Locks are taken in one order to keep conflicts rare: a run before
its host, rows of one table by id, and `select_for_update(no_key=True)`
where the key stays, so a new row's foreign-key check (`FOR KEY SHARE`) never
waits for them.
"""

import functools
import logging
import random
import time
from collections.abc import Callable
from typing import ParamSpec, TypeVar

from django.db import OperationalError, connection
from psycopg.errors import DeadlockDetected, SerializationFailure

logger = logging.getLogger(__name__)

ATTEMPTS = 5
FIRST_PAUSE_S = 0.05

P = ParamSpec("P")
T = TypeVar("T")


def is_conflict(exc: BaseException) -> bool:
    """Whether the database ended the transaction for a deadlock or a serialization failure
    (Django raises its OperationalError with psycopg's error as the cause)."""
    return isinstance(exc, OperationalError) and isinstance(
        exc.__cause__, DeadlockDetected | SerializationFailure
    )


def retry_on_conflict(function: Callable[P, T]) -> Callable[P, T]:
    """`function`, run again (up to ATTEMPTS in all) when its transaction hits a conflict."""

    @functools.wraps(function)
    def retried(*args: P.args, **kwargs: P.kwargs) -> T:
        attempt = 1
        while True:
            try:
                return function(*args, **kwargs)
            except OperationalError as exc:
                if not is_conflict(exc) or attempt >= ATTEMPTS or connection.in_atomic_block:
                    raise
                pause = random.uniform(0.5, 1.0) * FIRST_PAUSE_S * 2 ** (attempt - 1)
                logger.warning(
                    "%s: %s; attempt %d of %d in %.0f ms",
                    function.__qualname__,
                    str(exc).splitlines()[0] if str(exc) else type(exc.__cause__).__name__,
                    attempt + 1,
                    ATTEMPTS,
                    pause * 1000,
                )
                time.sleep(pause)
                attempt += 1

    return retried
