"""A series' change points and alerts: found, told apart from the host's, delivered.

`series_detect` runs when an occurrence's last run ended (runs.tasks.series_detect). For
every metric at every line (cell and client count) and for the host canary of the
occurrences (the median of their runs' canaries, agents/observe/canary.py: CPU loop,
fsync and memory copy, each its own line), it searches
the values after the last change point kept (runs/inference/changepoints.py) and keeps
the new ones as `ChangePoint` rows. A metric's change point in the bad direction raises
one `Alert`:

- "host" when the host's canary changed at the same place (a canary change point at the
  same or a neighbouring occurrence, slower), or the canaries of the first occurrence
  after it were outside the host's usual spread: the host changed; nobody is told
  unless the A/B below finds the software slower too;
- otherwise "new".

Both are measured again by the control worker (runs/services/history/confirm.py): only
a confirmed alert goes to the webhook and mail, unless the series delivers every new
alert when found (`Series.deliver`).
"""

import json
import logging
import statistics
from collections.abc import Sequence
from functools import partial

from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone

from benchlab.celery import app
from runs.agentlink.transport import CONTROL_QUEUE
from runs.analysis.compare import HIGHER_IS_BETTER
from runs.inference import changepoints
from runs.models import Alert, ChangePoint, HostCanary, Occurrence, Series
from runs.services.history.series import SERIES_METRICS, series_history
from runs.services.history.webhooks import webhook_post

logger = logging.getLogger(__name__)

CONFIRM_TASK = "runs.tasks.alert_confirm"
# The canary's measures, each its own line of the series, and whether a larger value is a
# slower host (a longer loop or fsync) or a faster one (more memory copied a second).
CANARY_MEASURES = {"cpu_loop_ns": True, "fsync_ms": True, "memory_gbps": False}
CANARY_PREFIX = "canary."
# A canary change point this many occurrences from a metric's explains it.
CANARY_REACH = 1


def series_detect(series: Series) -> list[Alert]:
    """Keep the series' new change points and raise an alert for each in the bad direction;
    host-changed ones are marked so; each is sent for confirmation (and a new one
    delivered at once, when the series delivers every alert)."""
    canary = _canary_change_points(series)
    alerts = []
    for metric in SERIES_METRICS:
        for key, points in series_history(series, metric).items():
            occurrences = [point.occurrence for point in points]
            values = [point.mean for point in points]
            for change in _new_change_points(series, metric, key, occurrences, values):
                if (change.after < change.before) != HIGHER_IS_BETTER[metric]:
                    continue
                evidence = _host_evidence(change, canary, occurrences)
                if evidence:
                    change.host_evidence = evidence
                    change.save(update_fields=["host_evidence"])
                alert = _raise(change, Alert.State.HOST if evidence else Alert.State.NEW)
                alerts.extend([alert] if alert else [])
    for alert in alerts:
        transaction.on_commit(partial(_confirm_send, alert.pk))
        if alert.state == Alert.State.NEW and series.deliver == Series.Deliver.DETECTED:
            alert_deliver(alert)
    return alerts


def _confirm_send(alert_pk: int) -> None:
    app.send_task(CONFIRM_TASK, args=[alert_pk], queue=CONTROL_QUEUE)


def _new_change_points(
    series: Series, metric: str, key: str, occurrences: list[Occurrence], values: list[float]
) -> list[ChangePoint]:
    """The line's change points found after the last one kept, kept now."""
    kept = ChangePoint.objects.filter(series=series, metric=metric, key=key)
    position = {occurrence.pk: index for index, occurrence in enumerate(occurrences)}
    known = [position[pk] for pk in kept.values_list("after_occurrence_id", flat=True)]
    new = []
    for found in changepoints.change_points(values, known):
        if found.index in known:
            continue
        try:
            with transaction.atomic():
                new.append(
                    ChangePoint.objects.create(
                        series=series,
                        metric=metric,
                        key=key,
                        before_occurrence=occurrences[found.index - 1],
                        after_occurrence=occurrences[found.index],
                        before=found.before,
                        after=found.after,
                        change_percent=found.change_percent,
                        low_percent=found.low_percent,
                        high_percent=found.high_percent,
                        p_value=found.p_value,
                    )
                )
        except IntegrityError:
            logger.info("series %s: %s %s change point kept already", series.pk, metric, key)
    return new


def canary_history(series: Series) -> dict[str, tuple[list[Occurrence], list[float]]]:
    """Line (`canary.cpu_loop_ns host`) -> the occurrences with canaries and the median of
    their runs' canaries, oldest first (a measure their agents did not take is left out)."""
    lines: dict[str, tuple[list[Occurrence], list[float]]] = {}
    canaries = HostCanary.objects.filter(run__experiment__occurrence__series=series)
    by_occurrence: dict[tuple[int, str], list[HostCanary]] = {}
    for canary in canaries.select_related("host", "run"):
        if canary.run is not None:
            key = (canary.run.experiment_id, canary.host.name)
            by_occurrence.setdefault(key, []).append(canary)
    for occurrence in series.occurrences.order_by("fired_at"):
        for (experiment_id, host), taken in sorted(by_occurrence.items()):
            if experiment_id != occurrence.experiment_id:
                continue
            for measure in CANARY_MEASURES:
                values = [getattr(c, measure) for c in taken if getattr(c, measure) is not None]
                if values:
                    line = lines.setdefault(f"{CANARY_PREFIX}{measure} {host}", ([], []))
                    line[0].append(occurrence)
                    line[1].append(statistics.median(values))
    return lines


def _canary_change_points(series: Series) -> list[ChangePoint]:
    """The host canary's change points where the host got slower (kept and new)."""
    for line, (occurrences, values) in canary_history(series).items():
        measure, _host = line.split(" ", 1)
        _new_change_points(series, measure, line, occurrences, values)
    kept = ChangePoint.objects.filter(series=series, metric__startswith=CANARY_PREFIX)
    return [
        change
        for change in kept
        if (change.after > change.before)
        == CANARY_MEASURES[change.metric.removeprefix(CANARY_PREFIX)]
    ]


def _host_evidence(
    change: ChangePoint, canary: Sequence[ChangePoint], occurrences: list[Occurrence]
) -> str:
    """Why the host, not the software, changed at `change`; empty when nothing says so."""
    position = {occurrence.pk: index for index, occurrence in enumerate(occurrences)}
    at = position[change.after_occurrence_id]
    reasons = []
    for host_change in canary:
        index = position.get(host_change.after_occurrence_id)
        if index is not None and abs(index - at) <= CANARY_REACH:
            reasons.append(
                f"{host_change.key.removeprefix(CANARY_PREFIX)} changed "
                f"{host_change.change_percent:+.1f} % "
                f"[{host_change.low_percent:+.1f}, {host_change.high_percent:+.1f}] "
                f"at {host_change.after_occurrence.experiment.name}"
            )
    outside = HostCanary.objects.filter(
        run__experiment=change.after_occurrence.experiment, outside_usual=True
    )
    experiment = change.after_occurrence.experiment.name
    reasons.extend(
        f"canary of {experiment} outside the host's usual spread: {canary.detail}"
        for canary in outside
    )
    return "; ".join(reasons)


def _raise(change: ChangePoint, state: str) -> Alert | None:
    """The new alert, None when this change was alerted before (one alert per change)."""
    try:
        with transaction.atomic():
            return Alert.objects.create(
                series=change.series,
                occurrence=change.after_occurrence,
                change_point=change,
                metric=change.metric,
                key=change.key,
                before=change.before,
                after=change.after,
                change_percent=change.change_percent,
                state=state,
            )
    except IntegrityError:
        return None


def alert_document(alert: Alert) -> dict[str, object]:
    """The JSON a webhook receives."""
    change = alert.change_point
    return {
        "series": alert.series.name,
        "series_id": alert.series_id,
        "alert_id": alert.pk,
        "state": alert.state,
        "metric": alert.metric,
        "line": alert.key,
        "before": alert.before,
        "after": alert.after,
        "change_percent": round(alert.change_percent, 2),
        "interval_percent": (
            [round(change.low_percent, 2), round(change.high_percent, 2)] if change else None
        ),
        "confirmation": alert.confirmation,
        "find_the_commit": f"/bisections/new/?alert={alert.pk}",
        "experiment_id": alert.occurrence.experiment_id,
        "occurrence_fired_at": alert.occurrence.fired_at.isoformat(),
        "created_at": alert.created_at.isoformat(),
    }


def alert_deliver(alert: Alert) -> None:
    """POST the alert to the series' webhook (runs.services.history.webhooks) and mail it; record
    what happened on the alert."""
    outcomes = []
    series = alert.series
    if series.webhook_url:
        outcomes.append(webhook_post(series.webhook_url, alert_document(alert)))
    if series.alert_email:
        outcomes.append(_mail(series.alert_email, alert))
    Alert.objects.filter(pk=alert.pk).update(delivery="; ".join(outcomes))


def _mail(address: str, alert: Alert) -> str:
    subject = f"BenchLab: {alert}"
    body = json.dumps(alert_document(alert), indent=2)
    try:
        send_mail(subject, body, None, [address])
    except OSError as error:
        logger.warning("alert %s: mail to %s failed: %s", alert.pk, address, error)
        return f"mail failed: {error}"
    return f"mailed {address}"


def alert_acknowledge(alert: Alert, user: User, note: str) -> Alert:
    """Mark the alert seen, with the user's note (what they found, what they did)."""
    Alert.objects.filter(pk=alert.pk).update(
        acknowledged_at=timezone.now(),
        acknowledged_by=user,
        acknowledgement=note,
        state=Alert.State.ACKNOWLEDGED,
    )
    alert.refresh_from_db()
    return alert


def alert_fixed(alert: Alert, user: User, note: str) -> Alert:
    """Mark the alert fixed, with the user's note (which commit fixed it); an alert not
    acknowledged before is acknowledged by the same user."""
    Alert.objects.filter(pk=alert.pk, acknowledged_at__isnull=True).update(
        acknowledged_at=timezone.now(), acknowledged_by=user, acknowledgement=note
    )
    Alert.objects.filter(pk=alert.pk).update(state=Alert.State.FIXED)
    alert.refresh_from_db()
    alert.notes.create(text=f"fixed: {note}", created_by=user)
    return alert
