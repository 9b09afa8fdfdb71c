"""The lab's domain: hosts, what to measure (builds, configs, workloads,
experiments), what was measured (runs, results, samples, events) and how it
is shared (comparisons, share links).

Every write goes through `runs.services`; these classes hold data and small
derived properties only.
"""

import secrets
from datetime import timedelta
from typing import TypedDict

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils import timezone

from agents.contract import vocabulary
from agents.contract.signing import fingerprint, is_secret
from agents.contract.spec import SettingValue
from runs.choices import text_choices
from runs.execution import BLOCKS, ROUNDS, draw_seed


def owner_field(related_name: str) -> models.ForeignKey:
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
    # {target: {"total_bytes", "free_bytes", "at"}} (runs.services.space).
    storage_space = models.JSONField(default=dict, blank=True)
    installs = models.JSONField(default=list, blank=True)
    notes = models.TextField(blank=True)
    labels = models.JSONField(default=list, blank=True)
    registered_at = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(null=True, blank=True)
    current_run = models.ForeignKey(
        "Run", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

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
    # Source builds only: the job spec's `postgres.build` (agents/contract/builds.py).
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
    `agents.contract.catalogue.Catalogue.from_json` reads. Config profiles are
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
    # Labels and help texts of the spec fields: agents/contract/fields.py.
    latency_log = models.CharField(
        max_length=10, choices=LatencyLog.choices, default=LatencyLog.SAMPLED
    )
    progress = models.BooleanField(default=False)
    statement_latencies = models.BooleanField(default=False)
    # Issue 13: -v, and several pgbench processes per point.
    vacuum_all = models.BooleanField(default=False)
    connect_per_transaction = models.BooleanField(default=False)
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


class Experiment(models.Model):
    """A run definition: a matrix hosts x builds x configs x storage x workloads.

    `storage_layouts` is a list of `{"data": target name, "wal": target name or
    null}`; each layout is one column of the matrix. `execution` says how the
    cells become runs (runs/execution.py): in rounds, each repeat of each cell
    is one Run and the cells of each round go in an order drawn from `seed`; in
    blocks, each cell is one Run that sweeps `clients` `repeats` times. `seed`
    (given or drawn at creation) also seeds random client orders.
    """

    class Execution(models.TextChoices):
        ROUNDS = ROUNDS, "rounds: every repeat its own cluster, cells shuffled per round"
        BLOCKS = BLOCKS, "blocks: all repeats in one cluster, cells one after another"

    Order = text_choices("Order", vocabulary.SWEEP_ORDERS)
    BetweenPoints = text_choices("BetweenPoints", vocabulary.BETWEEN_POINTS)

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    hosts = models.ManyToManyField(Host, related_name="experiments")
    builds = models.ManyToManyField(PgBuild, related_name="experiments")
    config_profiles = models.ManyToManyField(ConfigProfile, related_name="experiments")
    workloads = models.ManyToManyField(Workload, related_name="experiments")
    storage_layouts = models.JSONField(default=list)
    clients = models.JSONField(default=list)
    threads = models.PositiveIntegerField(null=True, blank=True)
    duration_s = models.PositiveIntegerField(null=True, blank=True)
    transactions = models.PositiveIntegerField(null=True, blank=True)
    repeats = models.PositiveIntegerField(default=1)
    order = models.CharField(max_length=20, choices=Order.choices, default=Order.ASCENDING)
    execution = models.CharField(max_length=10, choices=Execution.choices, default=Execution.ROUNDS)
    seed = models.PositiveBigIntegerField(default=draw_seed)
    warmup_s = models.PositiveIntegerField(default=0)
    between_points = models.CharField(
        max_length=20, choices=BetweenPoints.choices, default=BetweenPoints.CHECKPOINT
    )
    created_by = owner_field("experiments")
    created_at = models.DateTimeField(default=timezone.now)
    # Issue 13: pgbench on another host (agent) for every run of the experiment.
    client_host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="client_experiments",
        help_text="Run pgbench on this host over TCP instead of on each server host; it is "
        "busy for every run of the experiment.",
    )

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def status(self) -> str:
        """Derived from the runs: `draft` before any run, else running, queued,
        failed, succeeded (every run) or cancelled, the first that applies."""
        states = set(self.runs.values_list("status", flat=True))
        if not states:
            return "draft"
        for state in (Run.Status.RUNNING, Run.Status.QUEUED, Run.Status.FAILED):
            if state in states:
                return state
        if states == {Run.Status.SUCCEEDED}:
            return Run.Status.SUCCEEDED
        return Run.Status.CANCELLED


class Run(models.Model):
    """One cluster lifecycle on one host: a cell of an experiment's matrix, or one
    round of a cell when the experiment runs in rounds.

    `cell` is the cell's index in matrix order, `round` the repeat this run
    measures (None in blocks mode, where the run holds every repeat), and
    `position` the run's place in the experiment's queue (runs/execution.py).

    State diagram (every change is a compare-and-set update in services)::

        queued ──> running ──> succeeded
          │           ├──────> failed      (error_code, error_category)
          │           └──────> cancelled   (the agent stops at the cancel flag)
          ├──────────────────> cancelled   (cancelled before the agent started)
          └──────────────────> failed      (refused by the agent, agent lost)

    succeeded, failed and cancelled are final. `spec` is the exact job spec
    sent; the snapshot fields (install, facts, storage_facts,
    effective_settings, steps, server_log_tail, build_record, compiled_settings) come
    from the agent's result and never change after.
    """

    Status = text_choices("Status", vocabulary.PENDING_STATES + vocabulary.JOB_OUTCOMES)

    FINAL_STATES = (Status.SUCCEEDED, Status.FAILED, Status.CANCELLED)

    experiment = models.ForeignKey(Experiment, on_delete=models.CASCADE, related_name="runs")
    host = models.ForeignKey(Host, on_delete=models.PROTECT, related_name="runs")
    build = models.ForeignKey(PgBuild, on_delete=models.PROTECT, related_name="runs")
    config_profile = models.ForeignKey(ConfigProfile, on_delete=models.PROTECT, related_name="runs")
    workload = models.ForeignKey(Workload, on_delete=models.PROTECT, related_name="runs")
    storage_data = models.CharField(max_length=100)
    storage_wal = models.CharField(max_length=100, blank=True)
    position = models.PositiveIntegerField(default=0)
    cell = models.PositiveIntegerField(default=0)
    round = models.PositiveIntegerField(null=True, blank=True)
    spec = models.JSONField(default=dict)
    token = models.CharField(max_length=64, blank=True)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.QUEUED)
    step = models.CharField(max_length=300, blank=True)
    celery_task_id = models.CharField(max_length=64, blank=True)
    dispatches = models.PositiveSmallIntegerField(
        default=1, help_text="How often the job was sent: a job Redis lost is sent once more."
    )
    error_code = models.CharField(max_length=50, blank=True)
    error_category = models.CharField(max_length=20, blank=True)
    error_field = models.CharField(max_length=200, blank=True)
    error_message = models.TextField(blank=True)
    queued_at = models.DateTimeField(default=timezone.now)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    last_event_at = models.DateTimeField(null=True, blank=True)
    install = models.JSONField(default=dict, blank=True)
    facts = models.JSONField(default=dict, blank=True)
    storage_facts = models.JSONField(default=dict, blank=True)
    effective_settings = models.JSONField(default=list, blank=True)
    steps = models.JSONField(default=list, blank=True)
    server_log_tail = models.TextField(blank=True)
    agent_version = models.CharField(max_length=40, blank=True)
    # Source builds: the agent's build record (key, compiler, patches, log) and the
    # compile-time settings the server reported (block_size, ...).
    build_record = models.JSONField(default=dict, blank=True)
    compiled_settings = models.JSONField(default=dict, blank=True)
    rerun_of = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="reruns"
    )
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="runs",
    )
    # Issue 13: the host that ran pgbench (null: the server host itself), and the network
    # path the client measured (addresses, transport, SELECT 1 round trip).
    client_host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.PROTECT, related_name="client_runs"
    )
    network = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-queued_at", "position"]
        indexes = [
            models.Index(fields=["status", "host"], name="run_status_host"),
            models.Index(fields=["queued_at"], name="run_queued_at"),
        ]

    def __str__(self) -> str:
        return f"run {self.pk} ({self.status})"

    @property
    def run_id(self) -> str:
        """The id carried by the job spec and every event of this run."""
        return str(self.pk)

    @property
    def is_final(self) -> bool:
        return self.status in self.FINAL_STATES


class Result(models.Model):
    """One measured point of a run: a client count at one repeat."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    index = models.PositiveIntegerField()
    clients = models.PositiveIntegerField()
    threads = models.PositiveIntegerField(null=True, blank=True)
    repeat = models.PositiveIntegerField(default=1)
    tps = models.FloatField(null=True, blank=True)
    latency_avg_ms = models.FloatField(null=True, blank=True)
    latency_stddev_ms = models.FloatField(null=True, blank=True)
    percentiles = models.JSONField(default=dict, blank=True)
    transactions = models.BigIntegerField(null=True, blank=True)
    failed = models.BigIntegerField(default=0)
    retried = models.BigIntegerField(null=True, blank=True)
    aborted_clients = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(null=True, blank=True)
    # CPU seconds (user + system) of the pgbench process, and of the agent itself, in the window.
    pgbench_cpu_s = models.FloatField(null=True, blank=True)
    agent_cpu_s = models.FloatField(null=True, blank=True)
    # How many CPUs pgbench's threads could use on the host it ran on (threads, or fewer CPUs).
    pgbench_cpus = models.PositiveIntegerField(null=True, blank=True)
    statements = models.JSONField(default=list, blank=True)
    messages = models.JSONField(default=list, blank=True)
    argv = models.JSONField(default=list, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stdout = models.TextField(blank=True)
    stderr = models.TextField(blank=True)
    # Issue 13: pgbench's per-script blocks (per transaction type), and each process of a
    # point of several (its own numbers, argv and output).
    scripts = models.JSONField(default=list, blank=True)
    processes = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [models.UniqueConstraint(fields=["run", "index"], name="result_unique_point")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.index}"

    @property
    def pgbench_busy_share(self) -> float | None:
        """pgbench's CPU time over what it could use in the window: one CPU per thread, at
        most the CPUs of the host it ran on (points stored before that was recorded: threads)."""
        cpus = self.pgbench_cpus or self.threads
        if not (self.pgbench_cpu_s and self.duration_s and cpus):
            return None
        return self.pgbench_cpu_s / (cpus * self.duration_s)


class ProgressSample(models.Model):
    """One second of a point: a pgbench `-P` line, or the second read from the transaction
    log; from a sampled log its tps is an estimate resting on `sampled` log lines."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="progress")
    point = models.PositiveIntegerField()
    t = models.FloatField()
    tps = models.FloatField(null=True, blank=True)
    latency_ms = models.FloatField(null=True, blank=True)
    stddev_ms = models.FloatField(null=True, blank=True)
    failed = models.BigIntegerField(default=0)
    # From a sampled transaction log: the lines behind this second, and the sampling rate.
    sampled = models.PositiveIntegerField(null=True, blank=True)
    sampling_rate = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [models.Index(fields=["run", "point", "t"], name="progress_run_point_t")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} t={self.t}"


class HostSample(models.Model):
    """One sample of the host (CPU, iowait, disk, memory) during a point."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="host_samples")
    point = models.PositiveIntegerField()
    t = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [models.Index(fields=["run", "point", "t"], name="host_sample_run_point_t")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} host t={self.t}"


class ClientHostSample(models.Model):
    """One sample of the client host (CPU, memory) during a point of a run with a client host."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="client_host_samples")
    point = models.PositiveIntegerField()
    t = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [models.Index(fields=["run", "point"], name="client_sample_run_point")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} client host t={self.t}"


class ServerSample(models.Model):
    """One sample of the PostgreSQL server (checkpoints, wait events) during a point."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="server_samples")
    point = models.PositiveIntegerField()
    t = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [models.Index(fields=["run", "point", "t"], name="server_sample_run_point_t")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} server t={self.t}"


class RunEvent(models.Model):
    """An event received from an agent for a run, stored once per (run, seq).

    The unique constraint is the idempotency key: a redelivered event is not
    stored or applied twice. Log lines are the events of type `log`.
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    agent = models.CharField(max_length=100, blank=True)
    seq = models.PositiveIntegerField()
    type = models.CharField(max_length=20)
    ts = models.DateTimeField(null=True, blank=True)
    payload = models.JSONField(default=dict)
    received_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["run", "seq"]
        constraints = [models.UniqueConstraint(fields=["run", "seq"], name="run_event_unique_seq")]
        indexes = [models.Index(fields=["run", "type"], name="run_event_run_type")]

    def __str__(self) -> str:
        return f"run {self.run_id} event {self.seq} {self.type}"


class Comparison(models.Model):
    """A saved selection of runs, compared against a baseline run."""

    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    runs = models.ManyToManyField(Run, related_name="comparisons")
    baseline = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="baseline_of"
    )
    created_by = owner_field("comparisons")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name


def new_share_token() -> str:
    """An unguessable token for a share link."""
    return secrets.token_urlsafe(32)


class ShareLink(models.Model):
    """A read-only link to one run, experiment or comparison; exactly one is set."""

    token = models.CharField(max_length=64, unique=True, default=new_share_token)
    run = models.ForeignKey(
        Run, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    experiment = models.ForeignKey(
        Experiment, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    comparison = models.ForeignKey(
        Comparison, null=True, blank=True, on_delete=models.CASCADE, related_name="share_links"
    )
    created_by = owner_field("share_links")
    created_at = models.DateTimeField(default=timezone.now)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]
        constraints = [
            models.CheckConstraint(
                condition=(
                    Q(run__isnull=False, experiment__isnull=True, comparison__isnull=True)
                    | Q(run__isnull=True, experiment__isnull=False, comparison__isnull=True)
                    | Q(run__isnull=True, experiment__isnull=True, comparison__isnull=False)
                ),
                name="share_link_exactly_one_target",
            )
        ]

    def __str__(self) -> str:
        return f"share link to {self.target}"

    @property
    def is_active(self) -> bool:
        return self.revoked_at is None

    @property
    def target(self) -> "Run | Experiment | Comparison":
        """The shared object."""
        target = self.run or self.experiment or self.comparison
        if target is None:
            raise ValueError(f"share link {self.pk} has no target")
        return target

    @property
    def target_kind(self) -> str:
        """`run`, `experiment` or `comparison`."""
        if self.run_id:
            return "run"
        return "experiment" if self.experiment_id else "comparison"


class RunTimeline(models.Model):
    """What the pages read of a run's samples, built once (runs/timelines.py).

    `facts` holds the point offsets on the time axis, the checkpoints, the
    validity warnings found in each point's samples and where each point's
    warning mark goes; the series (`TimelineSeries`) are the timelines reduced
    to what a chart shows. `key` is the run state they were built from: a row
    whose key no longer matches the run is built again.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="+")
    key = models.CharField(max_length=100)
    facts = models.JSONField(default=dict)
    built_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"timeline of run {self.run_id}"


class TimelineSeries(models.Model):
    """One reduced timeline of a run (`tps`, `host.cpu_user`, ...), as runs.series stores it."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    samples = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="timeline_series_unique_name")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.name}"


# History (series, alerts, notes, imported runs) lives in its own module.
from runs.models_history import Alert, Note, Occurrence, Provenance, Series  # noqa: E402, F401

# API tokens (digests only) live in their own module.
from runs.models_tokens import ApiToken  # noqa: E402, F401
