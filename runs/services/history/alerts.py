"""A series' change points and alerts: found, told apart from the host's, delivered.

`series_detect` runs when an occurrence's last run ended (runs.tasks.series_detect). For
every metric at every line (cell and client count) and for the host canary of the
occurrences (the median of their runs' canaries, agents/observe/canary.py: CPU loop,
fsync and memory copy, each its own line), it searches
the values after the last change point kept (runs/inference/changepoints.py) and keeps
the new ones as `ChangePoint` rows. A metric's change point in the bad direction raises
one `Alert`:

- "host" when the host's canary changed at the same place (a canary change point at the
  same or a neighbouring occurrence, slower), or the host was disturbed during the last
  occurrence before it or the first after (a canary outside the host's usual spread,
  other processes' CPU or steal beside its points): the host changed; nobody is told
  unless the A/B below finds the software slower too;
- otherwise "new".

Both are measured again by the control worker (runs/services/history/confirm.py): only
a confirmed alert goes to the webhook and mail, unless the series delivers every new
alert when found (`Series.deliver`).

A host slowed for an occurrence or two (a neighbour's batch job) makes no change point: a
side needs MIN_SEGMENT occurrences. Such an occurrence is still reported, as "host"
with no change point, when the host was not itself during it (its canaries outside the
host's usual spread, or its points beside other processes' CPU or the hypervisor's
steal: on a VM a busy neighbour can make a one-client run faster, since a wakeup then
needs no idle vCPU woken), its value is out of line with the line's values before it
(`SLOW_OCCURRENCE_P`, two-sided) and the next occurrence the host left alone is back in
line: nothing to measure again, nothing to bisect, nobody told. Should a change point
be found there after all, that alert becomes the change point's. A change point next to
such an occurrence is "host" (above).
"""

import json
import logging
import statistics
from collections.abc import Callable, Sequence
from functools import partial

from django.contrib.auth.models import User
from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.db.models import Avg
from django.utils import timezone

from benchlab.celery import app
from runs.agentlink.transport import CONTROL_QUEUE
from runs.analysis.compare import HIGHER_IS_BETTER
from runs.inference import changepoints
from runs.models import Alert, ChangePoint, HostCanary, Occurrence, Result, Series
from runs.services.history.series import SERIES_METRICS, HistoryPoint, series_history
from runs.services.history.webhooks import webhook_post

logger = logging.getLogger(__name__)

CONFIRM_TASK = "runs.tasks.alert_confirm"
# The canary's measures, each its own line of the series, and whether a larger value is a
# slower host (a longer loop or fsync) or a faster one (more memory copied a second).
CANARY_MEASURES = {"cpu_loop_ns": True, "fsync_ms": True, "memory_gbps": False}
CANARY_PREFIX = "canary."
# A canary change point this many occurrences from a metric's explains it.
CANARY_REACH = 1
# An occurrence the host disturbed is reported when its value is out of line with its
# line's earlier values at this two-sided p (the host's flag is the first condition:
# together they rarely meet by chance).
SLOW_OCCURRENCE_P = 0.01
# An occurrence's points ran beside this much CPU used outside the job (percent of the
# host's CPU), or this much stolen by the hypervisor, on average: the host was busy.
BUSY_FOREIGN_PERCENT = 10.0
BUSY_STEAL_PERCENT = 5.0


def series_detect(series: Series) -> list[Alert]:
    """Keep the series' new change points and raise an alert for each in the bad direction;
    host-changed ones are marked so; each is sent for confirmation (and a new one
    delivered at once, when the series delivers every alert)."""
    canary = _canary_change_points(series)
    disturbed = _host_disturbed(series)
    alerts = []
    histories = {metric: series_history(series, metric) for metric in SERIES_METRICS}
    for metric, lines in histories.items():
        for key, points in lines.items():
            occurrences = [point.occurrence for point in points]
            values = [point.mean for point in points]
            for change in _new_change_points(series, metric, key, occurrences, values):
                if (change.after < change.before) != HIGHER_IS_BETTER[metric]:
                    continue
                evidence = _host_evidence(change, canary, occurrences, disturbed)
                if evidence:
                    change.host_evidence = evidence
                    change.save(update_fields=["host_evidence"])
                alert = _raise(change, Alert.State.HOST if evidence else Alert.State.NEW)
                alerts.extend([alert] if alert else [])
    for alert in alerts:
        transaction.on_commit(partial(_confirm_send, alert.pk))
        if alert.state == Alert.State.NEW and series.deliver == Series.Deliver.DETECTED:
            alert_deliver(alert)
    return alerts + _slow_occurrences(series, histories, disturbed)


def _slow_occurrences(
    series: Series, histories: dict[str, dict[str, list[HistoryPoint]]], outside: dict[int, str]
) -> list[Alert]:
    """A "host" alert, without a change point, for each occurrence the host disturbed
    (`outside`: experiment id -> why) whose value on a line is out of line with the line's
    earlier values in its segment while the line came back after it; each once."""
    if not outside:
        return []
    alerts = []
    for metric, lines in histories.items():
        for key, points in lines.items():
            occurrences = [point.occurrence for point in points]
            values = [point.mean for point in points]
            alerts += _slow_on_line(series, metric, key, occurrences, values, outside)
    return alerts


def _host_disturbed(series: Series) -> dict[int, str]:
    """Experiment id -> why the host was not itself during that occurrence: its runs'
    canaries outside the host's usual spread, or its points beside other processes' CPU
    or the hypervisor's steal (BUSY_*_PERCENT on average)."""
    reasons: dict[int, list[str]] = {}
    canaries = HostCanary.objects.filter(
        run__experiment__occurrence__series=series, outside_usual=True
    ).select_related("run")
    for canary in canaries:
        if canary.run is not None:
            said = f"canary outside the host's usual spread: {canary.detail}"
            reasons.setdefault(canary.run.experiment_id, []).append(said)
    busy = (
        Result.objects.filter(run__experiment__occurrence__series=series)
        .values("run__experiment_id")
        .annotate(foreign=Avg("foreign_cpu_percent"), steal=Avg("cpu_steal_percent"))
    )
    for row in busy:
        found = reasons.setdefault(row["run__experiment_id"], [])
        if row["foreign"] is not None and row["foreign"] >= BUSY_FOREIGN_PERCENT:
            found.append(f"other processes used {row['foreign']:.0f} % of the host's CPU")
        if row["steal"] is not None and row["steal"] >= BUSY_STEAL_PERCENT:
            found.append(f"the hypervisor stole {row['steal']:.0f} % of the host's CPU")
    return {experiment: "; ".join(found) for experiment, found in reasons.items() if found}


def _slow_on_line(
    series: Series,
    metric: str,
    key: str,
    occurrences: list[Occurrence],
    values: list[float],
    outside: dict[int, str],
) -> list[Alert]:
    position = {occurrence.pk: index for index, occurrence in enumerate(occurrences)}
    kept = ChangePoint.objects.filter(series=series, metric=metric, key=key)
    starts = sorted(
        position[pk] for pk in kept.values_list("after_occurrence_id", flat=True) if pk in position
    )
    slow = set(
        Alert.objects.filter(
            series=series, metric=metric, key=key, change_point__isnull=True
        ).values_list("occurrence_id", flat=True)
    )

    def out_of_line(index: int, before: list[float]) -> float | None:
        """The p-value of the occurrence at `index` being one the host disturbed, else None."""
        if occurrences[index].experiment_id not in outside:
            return None
        p_value = _two_sided_p(before, values[index])
        return p_value if p_value is not None and p_value < SLOW_OCCURRENCE_P else None

    alerts = []
    for index, occurrence in enumerate(occurrences):
        if occurrence.pk in slow:
            continue
        start = max((at for at in starts if at <= index), default=0)
        before = [
            value
            for earlier, value in zip(occurrences[start:index], values[start:index], strict=True)
            if earlier.pk not in slow
        ]
        p_value = out_of_line(index, before)
        if p_value is None or not _came_back(index, before, values, out_of_line):
            continue
        detail = outside[occurrence.experiment_id]
        alert = _raise_slow(occurrence, metric, key, before, values[index], p_value, detail)
        if alert is not None:
            alerts.append(alert)
            slow.add(occurrence.pk)
    return alerts


def _two_sided_p(before: list[float], value: float) -> float | None:
    """The two-sided p-value of `value` against what `before` predicts (None: too few)."""
    lower = changepoints.beyond_prediction_p(before, value, lower_is_worse=True)
    higher = changepoints.beyond_prediction_p(before, value, lower_is_worse=False)
    if lower is None or higher is None:
        return None
    return min(1.0, 2 * min(lower, higher))


def _came_back(
    index: int,
    before: list[float],
    values: list[float],
    out_of_line: Callable[[int, list[float]], float | None],
) -> bool:
    """Whether the line came back after the occurrence at `index`: the first later one the
    host left alone is within what `before` predicts. A change that lasts is a change
    point's to report; until a later occurrence says, nothing is reported."""
    for later in range(index + 1, len(values)):
        if out_of_line(later, before) is not None:
            continue
        p_value = _two_sided_p(before, values[later])
        return p_value is not None and p_value >= SLOW_OCCURRENCE_P
    return False


def _raise_slow(
    occurrence: Occurrence,
    metric: str,
    key: str,
    before: list[float],
    value: float,
    p_value: float,
    detail: str,
) -> Alert | None:
    """The "host" alert of an occurrence the host disturbed; None when it has one on this
    line (a change point's, or this kind's)."""
    mean = statistics.fmean(before)
    change = (value / mean - 1) * 100 if mean else float("inf")
    said = (
        f"host changed during this occurrence, no change point: {detail}; {metric} "
        f"{change:+.1f} % is out of line with the {len(before)} occurrences before it "
        f"(two-sided p = {p_value:.2g}), and the line came back after it. Not measured "
        "again, nobody told."
    )
    try:
        with transaction.atomic():
            return Alert.objects.create(
                series=occurrence.series, occurrence=occurrence, metric=metric, key=key,
                before=mean, after=value, change_percent=change, state=Alert.State.HOST,
                confirmation=said,
            )  # fmt: skip
    except IntegrityError:
        return None


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
    change: ChangePoint,
    canary: Sequence[ChangePoint],
    occurrences: list[Occurrence],
    disturbed: dict[int, str],
) -> str:
    """Why the host, not the software, changed at `change`: a canary change point next to
    it, or the host disturbed during the last occurrence before it or the first after
    (`disturbed`, by experiment id); empty when nothing says so."""
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
    for occurrence in (change.before_occurrence, change.after_occurrence):
        said = disturbed.get(occurrence.experiment_id)
        if said:
            reasons.append(f"during {occurrence.experiment.name}: {said}")
    return "; ".join(reasons)


def _raise(change: ChangePoint, state: str) -> Alert | None:
    """The new alert, None when this change was alerted before (one alert per change). An
    occurrence reported as slowed by the host that turns out to start a change becomes
    this change's alert, to be measured again like any."""
    fields = {
        "change_point": change,
        "before": change.before,
        "after": change.after,
        "change_percent": change.change_percent,
        "state": state,
    }
    try:
        with transaction.atomic():
            return Alert.objects.create(
                series=change.series, occurrence=change.after_occurrence, metric=change.metric,
                key=change.key, **fields,
            )  # fmt: skip
    except IntegrityError:
        slowed = Alert.objects.filter(
            series=change.series, occurrence=change.after_occurrence, metric=change.metric,
            key=change.key, change_point__isnull=True, state=Alert.State.HOST,
        ).first()  # fmt: skip
        if slowed is None:
            return None
        Alert.objects.filter(pk=slowed.pk).update(**fields, confirmation="")
        slowed.refresh_from_db()
        return slowed


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
