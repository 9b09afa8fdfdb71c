"""A host's noise series: the canary its agent times before each run's cluster starts."""

from django.db import models

from runs.models.catalogue import Host
from runs.models.experiments import Run


class HostCanary(models.Model):
    """One host canary (agents/contract/reports/noise.py `HostCanary`): the median time of
    a fixed CPU loop's iteration and of an 8 kB write with fsync on the run's storage, and
    the median rate of a memory copy far larger than the CPU's cache (`memory_gbps`, None
    from agents before it), taken by the run's agent before its cluster started.

    `outside_usual` says the canary fell outside the host's usual spread of its earlier
    canaries (runs/services/hosts/noise.py), `detail` how; the run carries the same in
    `Run.host_noise`, and its verdicts warn about it.
    """

    host = models.ForeignKey(Host, on_delete=models.CASCADE, related_name="canaries")
    run = models.OneToOneField(
        Run, null=True, blank=True, on_delete=models.SET_NULL, related_name="canary"
    )
    at = models.DateTimeField()
    cpu_loop_ns = models.FloatField()
    fsync_ms = models.FloatField()
    fsync_max_ms = models.FloatField()
    memory_gbps = models.FloatField(null=True, blank=True)
    document = models.JSONField(default=dict, blank=True)
    outside_usual = models.BooleanField(default=False)
    detail = models.TextField(blank=True)

    class Meta:
        ordering = ["host", "at"]
        indexes = [models.Index(fields=["host", "at"], name="canary_host_at")]

    def __str__(self) -> str:
        return f"canary of {self.host_id} at {self.at:%Y-%m-%d %H:%M:%S}"
