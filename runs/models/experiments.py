"""What to run and what ran: experiments, their runs, and saved comparisons of runs.

Every write goes through `runs.services`; these classes hold data and small
derived properties only.
"""

from django.conf import settings
from django.db import models
from django.utils import timezone

from agents.contract import vocabulary
from runs.agentlink.choices import text_choices
from runs.agentlink.execution import BLOCKS, ROUNDS, draw_seed
from runs.agentlink.row_fields import EXPERIMENT_ROW_DEFAULTS
from runs.inference.equivalence import DEFAULT_MARGIN_PCT
from runs.inference.stats import DEFAULT_MIN_EFFECT_PCT
from runs.models.catalogue import ConfigProfile, Host, PgBuild, Workload, owner_field


class Experiment(models.Model):
    """A run definition: a matrix hosts x builds x configs x storage x workloads.

    `storage_layouts` is a list of `{"data": target name, "wal": target name or
    null}`; each layout is one column of the matrix. `execution` says how the
    cells become runs (runs/agentlink/execution.py): in rounds, each repeat of each cell
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
    repeats = models.PositiveIntegerField(default=EXPERIMENT_ROW_DEFAULTS["repeats"])
    order = models.CharField(
        max_length=20, choices=Order.choices, default=EXPERIMENT_ROW_DEFAULTS["order"]
    )
    execution = models.CharField(max_length=10, choices=Execution.choices, default=Execution.ROUNDS)
    seed = models.PositiveBigIntegerField(default=draw_seed)
    warmup_s = models.PositiveIntegerField(default=EXPERIMENT_ROW_DEFAULTS["warmup_s"])
    between_points = models.CharField(
        max_length=20,
        choices=BetweenPoints.choices,
        default=EXPERIMENT_ROW_DEFAULTS["between_points"],
    )
    # A CPU-profile pass (perf) after the measured ones, never measured itself: recording
    # costs throughput, so its numbers would not compare.
    cpu_profile = models.BooleanField(default=EXPERIMENT_ROW_DEFAULTS["cpu_profile"])
    created_by = owner_field("experiments")
    created_at = models.DateTimeField(default=timezone.now)
    # pgbench on another host (agent) for every run of the experiment, so the load
    # generator does not share the server's CPUs.
    client_host = models.ForeignKey(
        Host,
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="client_experiments",
        help_text="Run pgbench on this host over TCP instead of on each server host; it is "
        "busy for every run of the experiment.",
    )

    # An adaptive experiment in rounds measures `repeats` rounds, then adds rounds
    # only to cells still undecided against the first cell, up to its budget
    # (runs/services/adaptive.py); `adaptive_state` is the lab's record of its looks.
    adaptive = models.BooleanField(
        default=False,
        help_text="Add rounds only to cells not yet decided against the first cell (faster, "
        "slower or same within the margin), until all are decided or the budget is spent.",
    )
    max_rounds = models.PositiveIntegerField(
        null=True, blank=True, help_text="Adaptive: the most rounds any cell gets."
    )
    max_hours = models.FloatField(
        null=True,
        blank=True,
        help_text="Adaptive: stop adding rounds once a next round would end past this many "
        "hours from the start (optional).",
    )
    margin_pct = models.FloatField(
        default=DEFAULT_MARGIN_PCT, help_text="Adaptive: the ±% within which a cell is the same."
    )
    min_effect_pct = models.FloatField(
        default=DEFAULT_MIN_EFFECT_PCT,
        help_text="Adaptive: the smallest difference in % worth calling faster or slower.",
    )
    adaptive_state = models.JSONField(default=dict, blank=True)
    # Two cells measured at the same time on one host, each on its own half of the CPUs
    # (agents/duet.py); the answer comes from the ratios of their simultaneous windows.
    duet = models.BooleanField(
        default=False,
        help_text="Run the two cells at the same time on one host, each with its own cluster "
        "and half of the CPUs (swapped every round): whatever the host does during a window "
        "reaches both, and their ratio cancels it. Rounds, two cells, one host.",
    )
    # A capacity search (runs/services/capacity.py): probes of one cell at offered rates
    # (-R), each a run of one point, until the rate where the objective's percentile
    # reaches its limit is bracketed; `capacity_state` is the lab's record of the probes.
    capacity = models.BooleanField(
        default=False,
        help_text="Search the highest rate (pgbench -R) this cell serves within a latency "
        "objective, probe by probe, instead of measuring closed-loop tps.",
    )
    capacity_percentile = models.FloatField(
        default=99.0, help_text="Capacity: the latency percentile the objective bounds."
    )
    capacity_limit_ms = models.FloatField(
        null=True, blank=True, help_text="Capacity: the limit (ms) the percentile must stay in."
    )
    capacity_skip_limit_ms = models.FloatField(
        null=True,
        blank=True,
        help_text="Capacity: skip transactions later than this (pgbench -L, ms; optional).",
    )
    capacity_max_skipped_pct = models.FloatField(
        default=0.0, help_text="Capacity: the share (%) of transactions that may be skipped."
    )
    capacity_low_tps = models.FloatField(
        null=True, blank=True, help_text="Capacity: the lowest rate to offer (tps)."
    )
    capacity_high_tps = models.FloatField(
        null=True, blank=True, help_text="Capacity: the highest rate to offer (tps)."
    )
    capacity_probes = models.PositiveIntegerField(
        default=24, help_text="Capacity: the most probes (runs) the search may take."
    )
    capacity_state = models.JSONField(default=dict, blank=True)
    # Each axis's ids in the order they were given ({"hosts": [3, 1], ...}): the cells
    # follow it, so the first given is cell 0, the reference of adaptive looks and the
    # default baseline. An axis or id missing (older experiments) goes by name after.
    cell_order = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return self.name

    @property
    def status(self) -> str:
        """Derived from the runs: `draft` before any run, else running, queued,
        failed, succeeded (every run) or cancelled, the first that applies. An adaptive
        experiment not ended is running between its rounds too (the control worker
        looks and queues the next)."""
        states = set(self.runs.values_list("status", flat=True))
        if not states:
            return "draft"
        searching = self.capacity and self.capacity_state.get("ended") == ""
        if searching or (self.adaptive and self.adaptive_state.get("ended") == ""):
            return Run.Status.QUEUED if states == {Run.Status.QUEUED} else Run.Status.RUNNING
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
    `position` the run's place in the experiment's queue (runs/agentlink/execution.py).

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
    ACTIVE_STATES = (Status.QUEUED, Status.RUNNING)

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
    # When its job was last sent (the reaper's clock for a lost job); later than
    # `queued_at` once the job was sent again.
    dispatched_at = models.DateTimeField(default=timezone.now)
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
    # The host that ran pgbench (null: the server host itself), and the network
    # path the client measured (addresses, transport, SELECT 1 round trip).
    client_host = models.ForeignKey(
        Host, null=True, blank=True, on_delete=models.PROTECT, related_name="client_runs"
    )
    network = models.JSONField(default=dict, blank=True)
    # The host canary its agent timed before the cluster started (runs/models/noise.py):
    # {"outside_usual": bool, "detail": why}; {} for runs whose agent timed none.
    host_noise = models.JSONField(default=dict, blank=True)

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
