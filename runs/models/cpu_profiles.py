"""What a run's CPU-profile pass recorded: the server's stacks per client count.

A CPU profile is never a measured point: it has its own table, so nothing that reads
`Result` (verdicts, statistics, movers, measured exports) can count it.
"""

from django.db import models

from runs.models.experiments import Run


class CpuProfile(models.Model):
    """The server's folded stacks during one pgbench run of a run's CPU-profile pass.

    `tps` is pgbench's throughput under perf: context, not a measurement. `error` says
    why the agent recorded no stacks (then `folded` is empty).
    """

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="cpu_profiles")
    index = models.PositiveIntegerField()
    clients = models.PositiveIntegerField(null=True, blank=True)
    tps = models.FloatField(null=True, blank=True)
    seconds = models.FloatField(default=0)
    frequency_hz = models.PositiveIntegerField(default=0)
    event = models.CharField(max_length=40, blank=True)
    call_graph = models.CharField(max_length=40, blank=True)
    samples = models.PositiveIntegerField(default=0)
    kept_samples = models.PositiveIntegerField(default=0)
    folded = models.TextField(blank=True)
    argv = models.JSONField(default=list, blank=True)
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["run", "index"]
        constraints = [
            models.UniqueConstraint(fields=["run", "index"], name="cpu_profile_unique_point")
        ]

    def __str__(self) -> str:
        return f"CPU profile of run {self.run_id} at {self.clients} clients"
