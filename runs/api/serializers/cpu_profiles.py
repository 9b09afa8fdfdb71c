"""A run's CPU-profile pass in the API: apart from its measured results, never one of them."""

from runs.api.fields import StrictModelSerializer
from runs.models import CpuProfile


class CpuProfileSerializer(StrictModelSerializer[CpuProfile]):
    """One point of the run's CPU-profile pass: the server's stacks under perf as folded text
    (`frames;... count` lines, outermost frame first). `tps` ran beside perf: context, not
    a measured result. `error` says why there are no stacks."""

    class Meta:
        model = CpuProfile
        exclude = ["id", "run"]
