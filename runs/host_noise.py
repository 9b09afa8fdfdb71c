"""A host's noise, read from what the lab stored: its canaries and their usual spread."""

from dataclasses import dataclass
from datetime import datetime

from runs.inference.usual import UsualBand, usual_band
from runs.models import Host, HostCanary

# The canaries a new one is compared with: the host's recent ones, so a host whose speed
# changed for good (a new VM size) has a new usual spread within a day or two of runs.
HISTORY = 20
# The narrowest band on the log scale, as a standard deviation: a loop's median of runs
# repeats within about a percent, an fsync's median within several.
CPU_FLOOR_SD = 0.02
FSYNC_FLOOR_SD = 0.10


@dataclass(frozen=True)
class CanaryBands:
    """A host's usual CPU loop and fsync times (None: too few canaries yet)."""

    cpu_loop_ns: UsualBand | None
    fsync_ms: UsualBand | None
    canaries: int


def canary_bands(host: Host, before: datetime | None = None) -> CanaryBands:
    """The usual spread of the host's last HISTORY canaries (taken before `before`)."""
    canaries = HostCanary.objects.filter(host=host)
    if before is not None:
        canaries = canaries.filter(at__lt=before)
    recent = list(canaries.order_by("-at").values_list("cpu_loop_ns", "fsync_ms")[:HISTORY])
    return CanaryBands(
        cpu_loop_ns=usual_band([cpu for cpu, _fsync in recent], CPU_FLOOR_SD),
        fsync_ms=usual_band([fsync for _cpu, fsync in recent], FSYNC_FLOOR_SD),
        canaries=len(recent),
    )
