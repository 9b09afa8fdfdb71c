"""Control-plane tasks (queue `control`): regression-mode series, timeline digests,
adaptive experiments' and capacity searches' steps.

`series_fire` is what each series' beat schedule sends (runs.services.history.series);
`series_detect` runs when an occurrence's last run has ended; `digest_build`
when a run has ended or a final run got a late event (runs.services.runs);
`alert_confirm` when a new alert is raised; `adaptive_step_task` when a run of an
adaptive experiment has ended (and then the bisection whose step it is moves on,
runs.bisection.services, or the alert it confirms is concluded).
"""

import logging
from datetime import datetime

from celery import shared_task

from agents.contract.errors import JobError
from runs.agentlink.transport import CONTROL_QUEUE
from runs.bisection.services import bisection_advance_for
from runs.models import Alert, Series
from runs.services.adaptive import ADAPTIVE_TASK, adaptive_step
from runs.services.capacity import CAPACITY_TASK, capacity_step
from runs.services.errors import Conflict
from runs.services.history import series as series_service
from runs.services.history.alerts import CONFIRM_TASK
from runs.services.history.alerts import series_detect as detect
from runs.services.history.confirm import alert_confirm_start, alert_confirmation_for
from runs.services.runs import DIGEST_TASK
from runs.timelines import store

logger = logging.getLogger(__name__)


@shared_task(name=series_service.FIRE_TASK, queue=CONTROL_QUEUE)
def series_fire(series_id: int, slot: str | None = None) -> None:
    """Start the occurrence of an enabled series (a disabled or deleted one: nothing) for
    `slot`, the scheduled time the beat fired (ISO), once per slot.

    A fire without a slot was sent by a scheduler other than runs.control.beat's: it
    starts an occurrence as "fire now" does, unchecked against a second fire.
    """
    series = Series.objects.filter(pk=series_id, enabled=True).select_related("template").first()
    if series is None:
        logger.info("series %s: gone or disabled, not fired", series_id)
        return
    try:
        if slot is None:
            logger.warning("series %s: fired without a slot: not checked for a repeat", series_id)
            series_service.series_fire(series)
        else:
            series_service.series_fire_slot(series, datetime.fromisoformat(slot))
    except (JobError, Conflict) as error:
        # The occurrence stays as a draft experiment on the series page; the reason is here.
        logger.error("series %s: occurrence created but not started: %s", series_id, error)


@shared_task(name=series_service.DETECT_TASK, queue=CONTROL_QUEUE)
def series_detect(series_id: int) -> None:
    """Look for change points in the series and raise and deliver its new alerts."""
    series = Series.objects.filter(pk=series_id).first()
    if series is None:
        logger.info("series %s: gone, no detection", series_id)
        return
    alerts = detect(series)
    logger.info("series %s: %d new alerts", series_id, len(alerts))


@shared_task(name=CONFIRM_TASK, queue=CONTROL_QUEUE)
def alert_confirm(alert_id: int) -> None:
    """Start a new alert's confirming A/B (runs.services.history.confirm), once."""
    alert = Alert.objects.filter(pk=alert_id).select_related("series").first()
    if alert is None:
        logger.info("alert %s: gone, not confirmed", alert_id)
        return
    experiment = alert_confirm_start(alert)
    logger.info(
        "alert %s: %s",
        alert_id,
        f"confirming A/B {experiment.pk} started" if experiment else "no A/B started",
    )


@shared_task(name=DIGEST_TASK, queue=CONTROL_QUEUE)
def digest_build(run_id: int) -> None:
    """Build and store a final run's timeline digest, unless the stored one is current."""
    built = store.digest_refresh(run_id)
    logger.info("run %s: timeline digest %s", run_id, "built" if built else "already current")


@shared_task(name=ADAPTIVE_TASK, queue=CONTROL_QUEUE)
def adaptive_step_task(experiment_id: int) -> None:
    """Look at an adaptive experiment and queue its next round or end it, once its
    latest round's runs are all final (runs.services.adaptive)."""
    if not adaptive_step(experiment_id):
        logger.info("experiment %s: no adaptive step due", experiment_id)
    bisection_advance_for(experiment_id)
    alert_confirmation_for(experiment_id)


@shared_task(name=CAPACITY_TASK, queue=CONTROL_QUEUE)
def capacity_step_task(experiment_id: int) -> None:
    """Queue a capacity search's next probe or end it, once its latest probe is final
    (runs.services.capacity)."""
    if not capacity_step(experiment_id):
        logger.info("experiment %s: no capacity step due", experiment_id)
