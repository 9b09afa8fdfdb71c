"""The control worker: `celery -A benchlab worker -Q control --concurrency 1`.

(`--pool solo` suits it as well: the queue carries no tasks of its own yet, and
no pool process is then forked from a process whose consumer thread holds a
database connection.)

When the worker is ready it starts the event consumer (runs.ingest) in a
thread of its own, and stops it when the worker shuts down. The consumer also
runs the reaper that fails the runs of silent agents. Set
BENCHLAB_INGEST_IN_WORKER=false for a worker that must not consume events.
"""

import logging
import threading

from celery.signals import worker_ready, worker_shutdown
from django.conf import settings

from runs.ingest import EventConsumer

logger = logging.getLogger(__name__)

_stop = threading.Event()
_threads: list[threading.Thread] = []


@worker_ready.connect
def start_event_consumer(**_kwargs) -> None:
    """Start consuming agent events in the background of the control worker."""
    if not settings.BENCHLAB_INGEST_IN_WORKER:
        logger.info("event consumer disabled (BENCHLAB_INGEST_IN_WORKER=false)")
        return
    _stop.clear()
    consumer = EventConsumer()
    thread = threading.Thread(
        target=consumer.run_forever, args=(_stop,), name="benchlab-ingest", daemon=True
    )
    thread.start()
    _threads.append(thread)


@worker_shutdown.connect
def stop_event_consumer(**_kwargs) -> None:
    """Let the consumer finish its current entry and stop."""
    _stop.set()
    while _threads:
        _threads.pop().join(timeout=10)
