"""The confirming measurement of an alert: the last occurrence before its change point
against the first after, again, in interleaved rounds on the same host.

`alert_confirm_start` (the control worker's task runs.tasks.alert_confirm, sent when a
new or host-changed alert is raised) schedules an adaptive experiment in rounds
(runs/services/adaptive.py) of two cells on the line's host and client count: cell 0
the before occurrence's build, cell 1 the after's, both pinned to the commit the agent
built for them when they were source builds of a git ref (so a branch that moved since
measures what was measured then), the after occurrence's config profile, workload and
storage otherwise. Each round runs both, so the A/B is paired round by round, and
duet where the series' template is; at least 3 rounds, at most the template's
`max_rounds` (12 when it has none).

The reaper's pass (`alert_confirmations_due`) starts the A/B of an alert waiting for one
(the task's message lost). `alert_confirmation_for` (after every adaptive step, and
on the reaper's pass) concludes once that experiment ended: slower (the bad
direction of tps, and of latency) is "confirmed: slower by 9.8 % [-12.1, -7.4]" and the
alert is delivered; anything else "not confirmed", kept and nobody told. A host-changed
alert is measured too, both builds now on the same host: the host that slowed with the
change does not hide a software regression at the same occurrence (confirmed, it is
delivered with the host's evidence kept); not confirmed, it stays "host changed".
"""

import logging
import math

from django.db import transaction
from django.db.models import QuerySet
from scipy.stats import norm

from agents.contract.errors import JobError
from runs.agentlink.execution import ROUNDS
from runs.analysis.verdicts import Verdict
from runs.models import Alert, Experiment, Occurrence, PgBuild, Run
from runs.services.adaptive_state import PointState
from runs.services.errors import Conflict
from runs.services.experiments import experiment_schedule
from runs.services.history.alerts import alert_deliver
from runs.services.history.series import copied_fields, line_cell

logger = logging.getLogger(__name__)

BEFORE_CELL, AFTER_CELL = 0, 1
CONFIRM_REPEATS = 3
CONFIRM_MAX_ROUNDS = 12
# The states of an alert whose confirming A/B has not concluded yet.
MEASURED_AGAIN = (Alert.State.NEW, Alert.State.HOST)
# What the confirming experiment leaves as the template's and sets itself.
NOT_FROM_TEMPLATE = ("execution", "adaptive", "max_rounds", "max_hours", "clients")


def alert_confirm_start(alert: Alert) -> Experiment | None:
    """Schedule and start the alert's confirming A/B, once (None: started before, or the
    change point has no sides to measure; the alert then says why)."""
    with transaction.atomic():
        locked = Alert.objects.select_for_update().filter(pk=alert.pk).first()
        if locked is None or locked.confirmation_experiment_id or not _waiting(locked):
            return None
        change = locked.change_point
        if change is None:
            _conclude(locked, False, "not confirmed: its change point is gone")
            return None
        cell, clients = line_cell(locked.key)
        before = _measured_run(change.before_occurrence, cell)
        after = _measured_run(change.after_occurrence, cell)
        if before is None or after is None:
            _conclude(locked, False, "not confirmed: a side has no run")
            return None
        try:
            experiment = _schedule(locked, before, after, clients)
        except (JobError, Conflict) as error:
            _conclude(locked, False, f"not confirmed: not measured ({error})")
            return None
        Alert.objects.filter(pk=locked.pk).update(confirmation_experiment=experiment)
    logger.info("alert %s: confirming A/B is experiment %s", alert.pk, experiment.pk)
    return experiment


def _measured_run(occurrence: Occurrence, cell: int) -> Run | None:
    runs = occurrence.experiment.runs.filter(cell=cell, status=Run.Status.SUCCEEDED)
    return runs.select_related("host", "build", "config_profile", "workload").first()


def _schedule(alert: Alert, before: Run, after: Run, clients: int) -> Experiment:
    template = after.experiment
    repeats = max(CONFIRM_REPEATS, template.repeats)
    values: dict[str, object] = {
        name: getattr(template, name)
        for name in copied_fields()
        if name not in NOT_FROM_TEMPLATE and name != "storage_layouts"
    }
    values.update(
        name=f"{alert.series.name}: confirm alert {alert.pk}"[:200],
        description=(
            f"Alert {alert.pk} ({alert.metric} {alert.change_percent:+.1f} %, {alert.key}): "
            f"{before.experiment.name} against {after.experiment.name}, again, in rounds."
        ),
        hosts=[after.host],
        builds=[_pinned(alert, "0 before", before), _pinned(alert, "1 after", after)],
        config_profiles=[after.config_profile],
        workloads=[after.workload],
        storage_layouts=[{"data": after.storage_data, "wal": after.storage_wal or None}],
        clients=[clients],
        repeats=repeats,
        execution=ROUNDS,
        adaptive=True,
        max_rounds=max(template.max_rounds or CONFIRM_MAX_ROUNDS, repeats),
        max_hours=None,
    )
    return experiment_schedule(alert.series.created_by, values, start=True).experiment


def _pinned(alert: Alert, label: str, run: Run) -> PgBuild:
    """The build `run` measured, as a build of its own for this A/B: a git source pinned to
    the commit the agent built."""
    definition = dict(run.build.definition or {})
    commit = str(run.build_record.get("source_digest") or "")
    source = dict(definition.get("source") or {})
    if source.get("kind") == "git" and commit.startswith("git:"):
        source["ref"] = commit.removeprefix("git:")
        source.pop("list_from", None)
        definition["source"] = source
    build, _created = PgBuild.objects.update_or_create(
        name=f"alert {alert.pk}: {label} ({run.experiment.name})"[:100],
        defaults={
            "version": run.build.version,
            "source": run.build.source,
            "definition": definition,
            "created_by": alert.series.created_by,
            "notes": f"the build {run.experiment.name} measured, for alert {alert.pk}",
        },
    )
    return build


def alert_confirmations_due() -> int:
    """The reaper's pass: start the A/B of every alert waiting for one without one (its
    task's message lost), conclude every one whose A/B ended; how many moved."""
    waiting = _waiting_alerts().select_related("series")
    started = sum(
        alert_confirm_start(alert) is not None
        for alert in waiting.filter(confirmation_experiment__isnull=True)
    )
    waiting = waiting.filter(confirmation_experiment__isnull=False)
    experiments = waiting.values_list("confirmation_experiment_id", flat=True)
    return started + sum(alert_confirmation_for(pk) for pk in experiments)


def alert_confirmation_for(experiment_pk: int) -> bool:
    """Conclude the waiting alert whose confirming A/B `experiment_pk` is, once it ended, and
    deliver it when confirmed, unless it was delivered when found (`Series.deliver`
    "detected": nobody is told twice); True when an alert was concluded."""
    with transaction.atomic():
        alert = (
            _waiting_alerts()
            .select_for_update()
            .filter(confirmation_experiment_id=experiment_pk)
            .select_related("confirmation_experiment", "series")
            .first()
        )
        if alert is None or alert.confirmation_experiment is None:
            return False
        state = alert.confirmation_experiment.adaptive_state
        if not state.get("ended"):
            return False
        point = next((p for p in state.get("points", []) if p["cell"] == AFTER_CELL), None)
        confirmed, sentence = confirmation_sentence(point)
        _conclude(alert, confirmed, sentence)
    if confirmed and not alert.delivery:
        transaction.on_commit(lambda: alert_deliver(alert))
    logger.info("alert %s: %s", alert.pk, sentence)
    return True


def confirmation_sentence(point: PointState | None) -> tuple[bool, str]:
    """(confirmed, what the A/B said): "confirmed: slower by 9.8 % [-12.1, -7.4]"."""
    if point is None:
        return False, "not confirmed: the A/B compared nothing (no run of a side succeeded)"
    pct, log_se = point.get("pct"), point.get("log_se")
    interval = ""
    if pct is not None and log_se is not None and pct > -100:
        level = (point.get("ci_level") or 95.0) / 100
        half = float(norm.ppf(0.5 + level / 2)) * log_se
        centre = math.log1p(pct / 100)
        low, high = (100 * math.expm1(centre - half), 100 * math.expm1(centre + half))
        interval = f" [{low:+.1f}, {high:+.1f}]"
    rounds = f" over {point['rounds']} rounds"
    if point["verdict"] == Verdict.SLOWER and pct is not None:
        return True, f"confirmed: slower by {abs(pct):.1f} %{interval}{rounds}"
    said = point["verdict"] if pct is None else f"{point['verdict']}, {pct:+.1f} %{interval}"
    return False, f"not confirmed: {said}{rounds}"


def _waiting_alerts() -> QuerySet[Alert]:
    """The alerts whose confirming A/B has not concluded (a host-changed one keeps its
    state when not confirmed, its sentence says it was measured)."""
    return Alert.objects.filter(state__in=MEASURED_AGAIN, confirmation="")


def _waiting(alert: Alert) -> bool:
    return alert.state in MEASURED_AGAIN and not alert.confirmation


def _conclude(alert: Alert, confirmed: bool, sentence: str) -> None:
    """Confirmed, or not: a host-changed alert not confirmed stays so."""
    state = Alert.State.CONFIRMED
    if not confirmed:
        host = alert.state == Alert.State.HOST
        state = Alert.State.HOST if host else Alert.State.NOT_CONFIRMED
    Alert.objects.filter(pk=alert.pk).update(state=state, confirmation=sentence)
    alert.state, alert.confirmation = state, sentence
