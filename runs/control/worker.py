"""The control worker: `celery -A benchlab worker -Q control --concurrency 1`.

It runs no Celery task of its own. When the worker is ready it starts the
event consumer (runs.control.consumer) and the reaper (runs.control.reaper),
each in a thread, and stops them when the worker shuts down. (`--pool solo`
suits it as well: no pool process is then forked from a process whose threads
hold database connections.) BENCHLAB_INGEST_IN_WORKER=false gives a worker
that starts neither.

The Celery signals are connected when Django loads the `runs` app
(runs.apps), so any worker of the lab's Celery app starts them.
"""

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from runs.control import beat  # noqa: F401 - the embedded beat's guards (signals)
from runs.control.consumer import EventConsumer
from runs.control.reaper import Reaper

logger = logging.getLogger(__name__)

JOIN_TIMEOUT_S = 10

_stop = threading.Event()
_threads: list[threading.Thread] = []


def start() -> None:
    """Start consuming agent events and reaping, in the background of this process."""
    if not settings.BENCHLAB_INGEST_IN_WORKER:
        logger.info("event consumer and reaper disabled (BENCHLAB_INGEST_IN_WORKER=false)")
        return
    _stop.clear()
    for name, loop in (("benchlab-consumer", EventConsumer()), ("benchlab-reaper", Reaper())):
        thread = threading.Thread(target=loop.run_forever, args=(_stop,), name=name, daemon=True)
        thread.start()
        _threads.append(thread)


def stop() -> None:
    """Let the consumer finish its current entry and the reaper its pass, then join them."""
    _stop.set()
    while _threads:
        _threads.pop().join(timeout=JOIN_TIMEOUT_S)


@worker_ready.connect
def _on_worker_ready(**_signal: object) -> None:
    start()


@worker_shutdown.connect
def _on_worker_shutdown(**_signal: object) -> None:
    stop()
