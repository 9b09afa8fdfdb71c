"""What a run measured: results, progress/host/server samples, events, and stored timelines."""

from django.db import models
from django.utils import timezone

from runs.models.experiments import Run


class Result(models.Model):
    """One measured point of a run: a client count at one repeat."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="results")
    index = models.PositiveIntegerField()
    clients = models.PositiveIntegerField()
    threads = models.PositiveIntegerField(null=True, blank=True)
    repeat = models.PositiveIntegerField(default=1)
    tps = models.FloatField(null=True, blank=True)
    latency_avg_ms = models.FloatField(null=True, blank=True)
    # True when pgbench printed no latency (9.2, 9.3) and the lab derived it: clients / tps.
    latency_derived = models.BooleanField(default=False)
    latency_stddev_ms = models.FloatField(null=True, blank=True)
    percentiles = models.JSONField(default=dict, blank=True)
    transactions = models.BigIntegerField(null=True, blank=True)
    failed = models.BigIntegerField(default=0)
    retried = models.BigIntegerField(null=True, blank=True)
    # With a rate (-R): transactions skipped for starting later than the latency limit (-L)
    # allows, and the schedule lag; with -L: transactions over the limit and the limit. None
    # where pgbench printed no such line (no -R or -L, or a version before them).
    skipped = models.BigIntegerField(null=True, blank=True)
    late = models.BigIntegerField(null=True, blank=True)
    latency_limit_ms = models.FloatField(null=True, blank=True)
    schedule_lag_avg_ms = models.FloatField(null=True, blank=True)
    schedule_lag_max_ms = models.FloatField(null=True, blank=True)
    aborted_clients = models.PositiveIntegerField(default=0)
    duration_s = models.FloatField(null=True, blank=True)
    # CPU seconds (user + system) of the pgbench process, and of the agent itself, in the window.
    pgbench_cpu_s = models.FloatField(null=True, blank=True)
    agent_cpu_s = models.FloatField(null=True, blank=True)
    # How many CPUs pgbench's threads could use on the host it ran on (threads, or fewer CPUs).
    pgbench_cpus = models.PositiveIntegerField(null=True, blank=True)
    # When the agent launched pgbench and reaped it (seconds since the epoch, the agent's
    # clock): the window lies within them. Null from agents that do not record them.
    started_epoch = models.FloatField(null=True, blank=True)
    ended_epoch = models.FloatField(null=True, blank=True)
    statements = models.JSONField(default=list, blank=True)
    messages = models.JSONField(default=list, blank=True)
    argv = models.JSONField(default=list, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    stdout = models.TextField(blank=True)
    stderr = models.TextField(blank=True)
    # pgbench's per-script blocks (per transaction type), and each process of a point of
    # several (its own numbers, argv and output).
    scripts = models.JSONField(default=list, blank=True)
    processes = models.JSONField(default=list, blank=True)
    # The server's and the OS's counters over the window, with each per transaction
    # (agents/contract/reports/counters.py); {} for points measured before the agent
    # reported counters.
    counters = models.JSONField(default=dict, blank=True)
    # The host's noise over the window (agents/contract/reports/noise.py): the CPU stolen by
    # the hypervisor and the CPU used outside the job, as percent of the host's CPU time, and
    # the agent's whole document; None and {} for points whose agent did not measure it.
    cpu_steal_percent = models.FloatField(null=True, blank=True)
    foreign_cpu_percent = models.FloatField(null=True, blank=True)
    noise = models.JSONField(default=dict, blank=True)

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
    log; from a sampled log its tps is an estimate resting on `sampled` log lines, and so
    are its latency percentiles."""

    # What the API and the per-second export show of each second.
    SHOWN_FIELDS = (
        "point", "t", "tps", "latency_ms", "stddev_ms", "failed", "sampled", "sampling_rate",
        "p50_ms", "p95_ms", "p99_ms",
    )  # fmt: skip

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
    # The latency percentiles of the second's logged transactions; None without a
    # transaction log (`-P`, an aggregate log), in a second with nothing logged, or for
    # a second stored before the agent reported them.
    p50_ms = models.FloatField(null=True, blank=True)
    p95_ms = models.FloatField(null=True, blank=True)
    p99_ms = models.FloatField(null=True, blank=True)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [models.Index(fields=["run", "point", "t"], name="progress_run_point_t")]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} t={self.t}"


class PointSample(models.Model):
    """What every host or server sample has: the point, its second `t` in it, and what the
    sampler measured (`data`, the agent's sample document)."""

    point = models.PositiveIntegerField()
    t = models.FloatField(null=True, blank=True)
    data = models.JSONField(default=dict)

    class Meta:
        abstract = True


class HostSample(PointSample):
    """One sample of a host (CPU, iowait, disk, memory) during a point: of the server host
    (every run), or of the client host pgbench ran on (a run with a client host)."""

    class Role(models.TextChoices):
        SERVER = "server", "server host"
        CLIENT = "client", "client host"

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="host_samples")
    role = models.CharField(max_length=10, choices=Role.choices, default=Role.SERVER)

    class Meta:
        ordering = ["run", "point", "t"]
        indexes = [
            models.Index(fields=["run", "role", "point", "t"], name="host_sample_run_role_point_t")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} point {self.point} {self.get_role_display()} t={self.t}"


class ServerSample(PointSample):
    """One sample of the PostgreSQL server (checkpoints, wait events) during a point."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="server_samples")

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


class RunTimeline(models.Model):
    """What the pages read of a run's samples, built once (runs/timelines/store.py).

    `facts` holds the point offsets on the time axis, the checkpoints, the
    validity warnings found in each point's samples and where each point's
    warning mark goes; the traces (`TimelineTrace`) are the timelines reduced
    to what a chart shows. `key` is the run state they were built from: a row
    whose key no longer matches the run is built again.
    """

    run = models.OneToOneField(Run, on_delete=models.CASCADE, primary_key=True, related_name="+")
    key = models.CharField(max_length=100)
    facts = models.JSONField(default=dict)
    built_at = models.DateTimeField(default=timezone.now)

    def __str__(self) -> str:
        return f"timeline of run {self.run_id}"


class TimelineTrace(models.Model):
    """One reduced timeline of a run (`tps`, `host.cpu_user`, ...): runs/timelines/downsample.py."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="+")
    name = models.CharField(max_length=100)
    samples = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["run", "name"], name="timeline_trace_unique_name")
        ]

    def __str__(self) -> str:
        return f"run {self.run_id} {self.name}"
