"""The lab's catalogue: hosts and their storage, builds, config profiles and workloads.

Every write goes through `runs.services`; these classes hold data and small
derived properties only.
"""

from datetime import timedelta
from typing import TYPE_CHECKING, TypedDict

from django.conf import settings
from django.db import models
from django.utils import timezone

from agents.contract import vocabulary
from agents.contract.signing import fingerprint, is_secret
from agents.contract.spec.document import SettingValue
from runs.agentlink.choices import text_choices

if TYPE_CHECKING:
    from django.contrib.auth.models import User


def owner_field(related_name: str) -> "models.ForeignKey[User | None, User | None]":
    """`created_by`, the owner: only they or staff may change or delete the row.

    Null (rows from before ownership, presets, a deleted user) means staff only.
    """
    return models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name=related_name,
        help_text="Only the owner or staff may change it; none: staff only.",
    )


# The name an import gives its host (runs.services.history.imports); agents' names have no
# spaces or colons, so no agent can take it.
IMPORTED_HOST_PREFIX = "imported: "


def agent_hosts() -> "models.QuerySet[Host]":
    """Hosts an agent runs on: every host but those imports made."""
    return Host.objects.exclude(name__startswith=IMPORTED_HOST_PREFIX)


class Host(models.Model):
    """A benchmark machine running one agent; `name` is the agent's name.

    `facts` is the hardware profile the agent detected (`python -m agents
    facts`); `notes` and `labels` are what people add. `installs` lists the
    PostgreSQL installs the agent found or cached at registration.

    Enrollment (docs/decisions.md): a new agent's first registration makes
    a `pending` host holding the agent's `secret` and what it reported
    (`pending_registration`); nothing else of it is used until an
    administrator approves it, comparing `fingerprint` with the one the agent
    logs. Jobs for an `approved` host and events from it are signed with
    `secret`; a `revoked` host's events are refused and it gets no jobs.
    """

    class Enrollment(models.TextChoices):
        PENDING = "pending"
        APPROVED = "approved"
        REVOKED = "revoked"

    name = models.CharField(max_length=100, unique=True)
    enrollment = models.CharField(
        max_length=10, choices=Enrollment.choices, default=Enrollment.PENDING
    )
    secret = models.CharField(max_length=64, blank=True, help_text="The agent's HMAC key (hex).")
    pending_registration = models.JSONField(default=dict, blank=True)
    enrollment_changed_at = models.DateTimeField(null=True, blank=True)
    enrollment_changed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    facts = models.JSONField(default=dict, blank=True)
    # Each storage target's latest space, from registration and heartbeats:
    # {target: {"total_bytes", "free_bytes", "at"}} (runs.services.hosts.space).
    storage_space = models.JSONField(default=dict, blank=True)
    installs = models.JSONField(default=list, blank=True)
    # What the agent's registration said its jobs may do: `allows`, its local config
    # (agents.contract.host_allows.HostAllows), and `isolation`, whether its jobs get
    # cgroups; empty until an agent that reports them registers. Review checks them.
    capabilities = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)
    labels = models.JSONField(default=list, blank=True)
    registered_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(null=True, blank=True)
    current_run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # The agent worker's instance token last heard and the one before it; `twin_seen_at`
    # is when the one before spoke again: two workers answer to this name
    # (runs.services.hosts.instances).
    instance = models.CharField(max_length=64, blank=True)
    previous_instance = models.CharField(max_length=64, blank=True)
    twin_seen_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def is_imported(self) -> bool:
        """A host an import of pgbench outputs made: no agent runs there."""
        return self.name.startswith(IMPORTED_HOST_PREFIX)

    @property
    def is_approved(self) -> bool:
        return self.enrollment == self.Enrollment.APPROVED

    @property
    def fingerprint(self) -> str:
        """The digest of the agent's secret an administrator compares before approving."""
        return fingerprint(self.secret) if is_secret(self.secret) else ""

    @property
    def is_online(self) -> bool:
        """Whether a heartbeat arrived within HEARTBEAT_OFFLINE_AFTER_S."""
        if self.last_seen is None:
            return False
        window = timedelta(seconds=settings.HEARTBEAT_OFFLINE_AFTER_S)
        return timezone.now() - self.last_seen <= window

    @property
    def has_twin(self) -> bool:
        """Whether two agent workers answered to this name within HEARTBEAT_OFFLINE_AFTER_S."""
        if self.twin_seen_at is None:
            return False
        window = timedelta(seconds=settings.HEARTBEAT_OFFLINE_AFTER_S)
        return timezone.now() - self.twin_seen_at <= window


class StorageTarget(models.Model):
    """A named directory on a host (`nvme`, `tmpfs`) as reported by its agent."""

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="storage_targets")
    name = models.CharField(max_length=100)
    path = models.CharField(max_length=500, blank=True)
    device = models.CharField(max_length=200, blank=True)
    filesystem = models.CharField(max_length=100, blank=True)
    facts = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["host__name", "name"]
        constraints = [
            models.UniqueConstraint(fields=["host", "name"], name="storage_target_unique_name")
        ]

    def __str__(self) -> str:
        return f"{self.host.name}:{self.name}"


class PgBuild(models.Model):
    """A PostgreSQL version and where its binaries come from.

    `version` is a major ("16") or an exact minor ("16.15"); `source` follows
    the job spec's `postgres.source` (docs/contracts.md, section 1).
    """

    Source = text_choices("Source", vocabulary.SOURCES, vocabulary.SOURCE_LABELS)

    name = models.CharField(max_length=100, unique=True)
    version = models.CharField(max_length=20)
    source = models.CharField(max_length=20, choices=Source.choices, default=Source.AUTO)
    # Source builds only: the job spec's `postgres.build` (agents/contract/builds/definition.py).
    definition = models.JSONField(default=dict, blank=True)
    notes = models.TextField(blank=True)
    created_by = owner_field("pg_builds")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        verbose_name = "PostgreSQL build"

    def __str__(self) -> str:
        return self.name


class SourceUpload(models.Model):
    """A source tarball uploaded as a source build's source (`definition.source.location`
    is its sha256). The bytes are a file named by the sha256 in settings.SOURCE_UPLOAD_DIR,
    shared by the uploads of the same tarball; `size` counts against the uploader's
    quota. Deleted with its build (runs/services/uploads.py removes the file).
    """

    build = models.OneToOneField(PgBuild, on_delete=models.CASCADE, related_name="source_upload")
    sha256 = models.CharField(max_length=64, db_index=True)
    size = models.PositiveBigIntegerField()
    created_by = owner_field("source_uploads")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"{self.sha256[:12]} ({self.build})"


class PgCatalogue(models.Model):
    """The `pg_settings` catalogue of one exact PostgreSQL version.

    Sent by agents at registration; `catalogue` is the JSON that
    `agents.contract.settings.catalogue.Catalogue.from_json` reads. Config profiles are
    validated against it before anything is queued.
    """

    version = models.CharField(max_length=20, unique=True)
    catalogue = models.JSONField(default=dict)
    reported_by = models.CharField(max_length=100, blank=True)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["version"]
        verbose_name = "PostgreSQL settings catalogue"

    def __str__(self) -> str:
        return self.version


# A setting whose value a profile changes from its parent's (`from` is a keyword).
SettingChange = TypedDict("SettingChange", {"from": SettingValue, "to": SettingValue})


class SettingsDiff(TypedDict):
    """What a config profile adds to (`added`) or changes in (`changed`) its parent's settings."""

    added: dict[str, SettingValue]
    changed: dict[str, SettingChange]


class ConfigProfile(models.Model):
    """A named set of postgresql.conf settings, optionally on top of a parent profile."""

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    settings = models.JSONField(default=dict, blank=True)
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="children"
    )
    created_by = owner_field("config_profiles")
    created_at = models.DateTimeField(default=timezone.now)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    def ancestors(self) -> list["ConfigProfile"]:
        """Parents from the root down, excluding this profile; stops at a cycle."""
        chain: list[ConfigProfile] = []
        seen = {self.pk}
        parent = self.parent
        while parent is not None and parent.pk not in seen:
            seen.add(parent.pk)
            chain.append(parent)
            parent = parent.parent
        return list(reversed(chain))

    def effective_settings(self) -> dict[str, SettingValue]:
        """The settings of the parent chain merged root first, this profile last."""
        merged: dict[str, SettingValue] = {}
        for profile in [*self.ancestors(), self]:
            merged.update(profile.settings)
        return merged

    def diff_against_parent(self) -> "SettingsDiff":
        """What this profile adds to or changes in its parent's effective settings."""
        base = self.parent.effective_settings() if self.parent else {}
        added = {k: v for k, v in self.settings.items() if k not in base}
        changed: dict[str, SettingChange] = {
            k: {"from": base[k], "to": v}
            for k, v in self.settings.items()
            if k in base and base[k] != v
        }
        return {"added": added, "changed": changed}


class Workload(models.Model):
    """Dataset initialisation plus the pgbench scripts and options to run.

    `scripts` is a list of `{"builtin": name, "weight": w}` or
    `{"name": n, "text": pgbench script, "weight": w}`, as in the job spec.
    """

    QueryMode = text_choices("QueryMode", vocabulary.QUERY_MODES)
    PartitionMethod = text_choices("PartitionMethod", vocabulary.PARTITION_METHODS)
    LatencyLog = text_choices("LatencyLog", vocabulary.LATENCY_LOGS, vocabulary.LATENCY_LOG_LABELS)

    name = models.CharField(max_length=100, unique=True)
    description = models.TextField(blank=True)
    scale = models.PositiveIntegerField(default=1)
    init_steps = models.CharField(max_length=20, default="dtgvp")
    partitions = models.PositiveIntegerField(null=True, blank=True)
    partition_method = models.CharField(max_length=10, choices=PartitionMethod.choices, blank=True)
    unlogged_tables = models.BooleanField(default=False)
    fillfactor = models.PositiveIntegerField(null=True, blank=True)
    foreign_keys = models.BooleanField(default=False)
    setup_sql = models.TextField(blank=True)
    scripts = models.JSONField(default=list)
    query_mode = models.CharField(
        max_length=10, choices=QueryMode.choices, default=QueryMode.SIMPLE
    )
    no_vacuum = models.BooleanField(default=False)
    rate_tps = models.FloatField(null=True, blank=True)
    latency_limit_ms = models.FloatField(null=True, blank=True)
    max_tries = models.PositiveIntegerField(null=True, blank=True)
    defines = models.JSONField(default=dict, blank=True)
    # What the lab measures besides tps (docs/benchmarks.md, "What each pgbench
    # option costs"): each costs throughput, so only the cheap ones are on by default.
    # Labels and help texts of the spec fields: agents/contract/spec/fields.py.
    latency_log = models.CharField(
        max_length=10, choices=LatencyLog.choices, default=LatencyLog.SAMPLED
    )
    progress = models.BooleanField(default=False)
    statement_latencies = models.BooleanField(default=False)
    # pgbench -v (vacuum every table first), -C (a new connection per transaction),
    # per-statement tracking, and several pgbench processes per point.
    vacuum_all = models.BooleanField(default=False)
    connect_per_transaction = models.BooleanField(default=False)
    track_statements = models.BooleanField(default=False)
    processes = models.JSONField(
        default=list,
        blank=True,
        help_text="Several pgbench processes per point, started together: a list of "
        '{"scripts": [...], "clients": n or null, "threads": n or null} (null: the sweep\'s '
        "client count). Empty: one process running the scripts above.",
    )
    created_by = owner_field("workloads")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name
