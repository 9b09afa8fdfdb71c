"""A run's profiled repeat in the API: apart from its measured results, never one of them."""

from runs.api.fields import StrictModelSerializer
from runs.models import Profile


class ProfileSerializer(StrictModelSerializer[Profile]):
    """One point of the run's profiled repeat: the server's stacks under perf as folded text
    (`frames;... count` lines, outermost frame first). `tps` ran beside perf: context, not
    a measured result. `error` says why there are no stacks."""

    class Meta:
        model = Profile
        exclude = ["id", "run"]
