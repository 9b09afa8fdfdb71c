"""History: series of scheduled experiments, their alerts, notes, and imported runs.

Every write goes through `runs.services`.
"""

from typing import TYPE_CHECKING

from django.conf import settings
from django.db import models
from django.utils import timezone

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from runs.models.experiments import Run


def user_field(related_name: str) -> "models.ForeignKey[User | None, User | None]":
    """A user who did something (imported, acknowledged); kept null when the user is deleted."""
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
    )


class Series(models.Model):
    """An experiment on a schedule (regression mode).

    Each time `periodic_task` (django-celery-beat, cron-like `schedule`) fires,
    the `template` experiment is copied into a new experiment, an `Occurrence`
    of this series, and started. Change points in the occurrences' numbers
    raise `Alert`s, posted to `webhook_url` and mailed to `alert_email`.
    """

    name = models.CharField(max_length=200, unique=True)
    template = models.ForeignKey(
        "runs.Experiment", on_delete=models.PROTECT, related_name="series_templates"
    )
    schedule = models.CharField(
        max_length=100,
        help_text="Cron: minute hour day month weekday, e.g. '0 3 * * *'.",
    )
    enabled = models.BooleanField(default=True)
    webhook_url = models.URLField(
        blank=True, help_text="Alerts are POSTed here as JSON (http or https)."
    )
    alert_email = models.EmailField(blank=True, help_text="Alerts are also mailed here.")

    class Deliver(models.TextChoices):
        CONFIRMED = "confirmed", "confirmed alerts only (after their confirming measurement)"
        DETECTED = "detected", "every alert when its change point is found"

    deliver = models.CharField(
        max_length=10,
        choices=Deliver.choices,
        default=Deliver.CONFIRMED,
        help_text="Which alerts the webhook and mail get.",
    )
    periodic_task = models.OneToOneField(
        "django_celery_beat.PeriodicTask",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="benchlab_series",
    )
    created_by = user_field("series")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name_plural = "series"

    def __str__(self) -> str:
        return self.name

    def get_absolute_url(self) -> str:
        return f"/series/{self.pk}/"


class Occurrence(models.Model):
    """One firing of a series: the experiment it created and started.

    `slot` is the scheduled time a fire of the series' schedule stands for
    (runs.control.fire_slots), unique per series: a second fire of one slot (a
    beat started again after a crash, a second beat) creates nothing. Null for
    an occurrence started by hand ("fire now") and for those from before slots.
    """

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="occurrences")
    experiment = models.OneToOneField(
        "runs.Experiment", on_delete=models.CASCADE, related_name="occurrence"
    )
    fired_at = models.DateTimeField(default=timezone.now)
    slot = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["series", "fired_at"]
        constraints = [
            models.UniqueConstraint(fields=["series", "slot"], name="occurrence_once_per_slot")
        ]

    def __str__(self) -> str:
        return f"{self.series} at {self.fired_at:%Y-%m-%d %H:%M}"


class ChangePoint(models.Model):
    """A change point in one line of a series' metric (runs/inference/changepoints.py), or
    in its host canary (`metric` `canary.cpu_loop_ns`, `canary.fsync_ms`, `canary.memory_gbps`;
    `key` the measure and the host).

    `before_occurrence` is the last occurrence before the change, `after_occurrence` the
    first after; the change in % with its 95 % interval. Found once, kept (the next
    detection searches only after the last one). `host_evidence` is set when the host's
    canary changed at the same place: the change is the host's, not the software's.
    """

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="change_points")
    metric = models.CharField(max_length=30)
    key = models.CharField(max_length=100)
    before_occurrence = models.ForeignKey(
        Occurrence, on_delete=models.CASCADE, related_name="change_points_after_it"
    )
    after_occurrence = models.ForeignKey(
        Occurrence, on_delete=models.CASCADE, related_name="change_points"
    )
    before = models.FloatField()
    after = models.FloatField()
    change_percent = models.FloatField()
    low_percent = models.FloatField()
    high_percent = models.FloatField()
    p_value = models.FloatField()
    host_evidence = models.TextField(blank=True)
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["series", "metric", "key", "after_occurrence__fired_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["series", "metric", "key", "after_occurrence"],
                name="change_point_once",
            )
        ]

    def __str__(self) -> str:
        return f"{self.series}: {self.metric} {self.change_percent:+.1f} % ({self.key})"


class Alert(models.Model):
    """A change point in the bad direction in one metric of a series.

    `key` names the line of the series chart (`cell N, C clients`);
    `occurrence` is the first occurrence after the change. One alert per
    (series, metric, key, occurrence): finding the change again adds none.

    State diagram (runs/services/history/alerts.py)::

        new ──> confirmed       (the confirming A/B found it: delivered)
         └────> not confirmed   (the A/B did not: nobody told)
        host ─> confirmed       (the host's canary changed with it, but the A/B
                                 found the software slower too; else stays host)
        host                    (no change point: an occurrence the host disturbed,
                                 out of line either way; stays so)
        any ──> acknowledged ──> fixed   (a person, with a note)
    """

    class State(models.TextChoices):
        NEW = "new"
        CONFIRMED = "confirmed"
        HOST = "host", "host changed"
        NOT_CONFIRMED = "not_confirmed", "not confirmed"
        ACKNOWLEDGED = "acknowledged"
        FIXED = "fixed"

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="alerts")
    occurrence = models.ForeignKey(Occurrence, on_delete=models.CASCADE, related_name="alerts")
    change_point = models.OneToOneField(
        ChangePoint, null=True, blank=True, on_delete=models.SET_NULL, related_name="alert"
    )
    metric = models.CharField(max_length=30)
    key = models.CharField(max_length=100)
    before = models.FloatField()
    after = models.FloatField()
    change_percent = models.FloatField()
    state = models.CharField(max_length=15, choices=State.choices, default=State.NEW)
    confirmation_experiment = models.ForeignKey(
        "runs.Experiment",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="confirmed_alerts",
    )
    confirmation = models.TextField(
        blank=True, help_text='What the confirming A/B said ("confirmed: slower by 9.8 % [...]").'
    )
    created_at = models.DateTimeField(default=timezone.now)
    delivery = models.TextField(blank=True, help_text="What happened to the webhook and mail.")
    acknowledged_at = models.DateTimeField(null=True, blank=True)
    acknowledged_by = user_field("acknowledged_alerts")
    acknowledgement = models.TextField(blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.UniqueConstraint(
                fields=["series", "metric", "key", "occurrence"], name="alert_once_per_change"
            )
        ]

    def __str__(self) -> str:
        return f"{self.series}: {self.metric} {self.change_percent:+.1f} % ({self.key})"


class Note(models.Model):
    """A dated remark on a run, a host ("firmware updated", "kernel 6.8") or an alert."""

    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="run_notes"
    )
    host = models.ForeignKey(
        "runs.Host", null=True, blank=True, on_delete=models.CASCADE, related_name="host_notes"
    )
    alert = models.ForeignKey(
        Alert, null=True, blank=True, on_delete=models.CASCADE, related_name="notes"
    )
    text = models.TextField()
    created_by = user_field("notes")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(run__isnull=False)
                | models.Q(host__isnull=False)
                | models.Q(alert__isnull=False),
                name="note_on_run_host_or_alert",
            )
        ]

    def __str__(self) -> str:
        return self.text[:60]


class Provenance(models.Model):
    """Where an imported run came from: one uploaded pgbench output file.

    `file_said` is what the file told about the host and programs
    (pgbench and server versions, clients, threads, scale, query mode).
    """

    run = models.OneToOneField("runs.Run", on_delete=models.CASCADE, related_name="provenance")
    file_name = models.CharField(max_length=300)
    sha256 = models.CharField(max_length=64, db_index=True)
    command_line = models.TextField(blank=True)
    pg_version = models.CharField(max_length=40, blank=True)
    notes = models.TextField(blank=True)
    file_said = models.JSONField(default=dict, blank=True)
    imported_by = user_field("imports")
    imported_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-imported_at"]

    def __str__(self) -> str:
        return f"{self.file_name} ({self.sha256[:12]})"


def imported_file(run: "Run") -> str | None:
    """The name of the file an imported run came from (its `Provenance`); None for a
    measured run."""
    provenance = getattr(run, "provenance", None)
    return provenance.file_name if provenance is not None else None
