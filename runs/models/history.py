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


class Alert(models.Model):
    """A change point in the bad direction in one metric of a series.

    `key` names the line of the series chart (`cell N, C clients`);
    `occurrence` is the first occurrence after the change. One alert per
    (series, metric, key, occurrence): finding the change again adds none.
    """

    series = models.ForeignKey(Series, on_delete=models.CASCADE, related_name="alerts")
    occurrence = models.ForeignKey(Occurrence, on_delete=models.CASCADE, related_name="alerts")
    metric = models.CharField(max_length=30)
    key = models.CharField(max_length=100)
    before = models.FloatField()
    after = models.FloatField()
    change_percent = models.FloatField()
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
    """A dated remark on a run or a host ("firmware updated", "kernel 6.8")."""

    run = models.ForeignKey(
        "runs.Run", null=True, blank=True, on_delete=models.CASCADE, related_name="run_notes"
    )
    host = models.ForeignKey(
        "runs.Host", null=True, blank=True, on_delete=models.CASCADE, related_name="host_notes"
    )
    text = models.TextField()
    created_by = user_field("notes")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["created_at"]
        constraints = [
            models.CheckConstraint(
                condition=models.Q(run__isnull=False) | models.Q(host__isnull=False),
                name="note_on_run_or_host",
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
