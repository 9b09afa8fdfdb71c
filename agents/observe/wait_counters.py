"""Wait-event time of a point from the server sampler's samples, as counters.

The sampler (agents/observe/server.py) counts the active backends by wait event
once a second. Each backend seen waiting stands for one second of backend time
in that wait event's type ("Lock", "LWLock", "IO", ...; "CPU" for active with no
wait event): summed over the point's samples, divided per transaction like the
other counters, they say where the backends' time went. Samples, not a tracer:
a type that holds a backend a tenth of the time shows in about a tenth of the
backend-seconds (agents/contract/reports/table_wait_counters.py).
"""

from collections.abc import Mapping, Sequence

from agents.contract.reports.table_wait_counters import WAIT_TYPES
from agents.observe.server import SAMPLE_INTERVAL_S


def wait_counters(samples: object) -> dict[str, int | float | None]:
    """Backend-seconds per wait-event type over `samples` (a point's server samples); {}
    when there are none or the server has no wait events (before 9.6). Every type is
    present, 0 when nothing was seen in it, so a type that appears can be tested."""
    if not isinstance(samples, Sequence):
        return {}
    seen = [
        sample["wait_events"]
        for sample in samples
        if isinstance(sample, Mapping) and isinstance(sample.get("wait_events"), Mapping)
    ]
    if not seen:
        return {}
    totals: dict[str, int | float | None] = dict.fromkeys(WAIT_TYPES.values(), 0)
    for wait_events in seen:
        for wait_event, backends in wait_events.items():
            key = WAIT_TYPES.get(str(wait_event).split(":")[0])
            if key is not None and isinstance(backends, int):
                totals[key] = (totals[key] or 0) + backends * SAMPLE_INTERVAL_S
    return totals
