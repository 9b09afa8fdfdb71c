"""What a run's stored samples say on its time axis, as plain numbers.

The points of a run go one after another on one time axis: a point starts
where the previous one ended, and lasts as long as the longest of its stored
timelines (progress, host and server samples). The traces named here (a key
and its label) are what digests store and charts draw.
"""

from collections.abc import Sequence

from agents.contract.reports.samples import DiskRates, HostSampleDocument, ServerSampleDocument
from runs.analysis.validity import CheckpointEvent, checkpoint_events
from runs.models import HostSample, ProgressSample, ServerSample

HOST_TRACES = (
    ("cpu_user", "CPU user %"),
    ("cpu_system", "CPU system %"),
    ("cpu_iowait", "CPU iowait %"),
    ("disk_data_util", "disk util % (data)"),
    ("disk_wal_util", "disk util % (WAL)"),
)
# What is drawn of a client host: its CPU (a saturated load generator shows here).
CLIENT_HOST_TRACES = HOST_TRACES[:2]
BUFFER_TRACES = (
    ("buffers_checkpoint_per_s", "by checkpointer"),
    ("buffers_clean_per_s", "by background writer"),
    ("buffers_backend_per_s", "by backends"),
)
# Buffers read into shared buffers each second, drawn beside those written.
ALLOC_TRACE = ("buffers_alloc_per_s", "allocated")
SERVER_RATE_KEYS = (*(key for key, _label in BUFFER_TRACES), ALLOC_TRACE[0])

Samples = list[tuple[int, float]]


def point_offsets(*timelines: Samples) -> dict[int, float]:
    """Point -> where it starts on the shared axis: the points before it, end to end."""
    lengths: dict[int, float] = {}
    for samples in timelines:
        for point, t in samples:
            lengths[point] = max(lengths.get(point, 0.0), t or 0.0)
    offsets, start = {}, 0.0
    for point in sorted(lengths):
        offsets[point] = start
        start += lengths[point]
    return offsets


def offsets_for(
    progress: Sequence[ProgressSample], host: Sequence[HostSample], server: Sequence[ServerSample]
) -> dict[int, float]:
    """A run's point offsets from all of its stored timelines."""
    return point_offsets(sample_times(progress), sample_times(host), sample_times(server))


def sample_times(samples: Sequence[ProgressSample | HostSample | ServerSample]) -> Samples:
    return [(s.point, s.t or 0.0) for s in samples]


def run_checkpoints(server_samples: list[ServerSample]) -> list[CheckpointEvent]:
    """Every checkpoint start and end seen in a run's server samples, point by point."""
    by_point: dict[int, list[ServerSample]] = {}
    for sample in server_samples:
        by_point.setdefault(sample.point, []).append(sample)
    return [e for point, rows in sorted(by_point.items()) for e in checkpoint_events(point, rows)]


def host_sample_values(sample: HostSampleDocument) -> dict[str, float | None]:
    """The plotted values of one host sample (see agents/observe/host.py)."""
    disks = sample.get("disks") or {}
    return {
        "cpu_user": sample.get("cpu_user"),
        "cpu_system": sample.get("cpu_system"),
        "cpu_iowait": sample.get("cpu_iowait"),
        "disk_data_util": _util_percent(disks.get("data")),
        "disk_wal_util": _util_percent(disks.get("wal")),
    }


def _util_percent(rates: DiskRates | None) -> float | None:
    return rates.get("util_percent") if rates else None


def wait_type_counts(sample: ServerSampleDocument) -> dict[str, int]:
    """Active backends by wait-event type in one server sample (`CPU`: not waiting)."""
    counts: dict[str, int] = {}
    for key, backends in (sample.get("wait_events") or {}).items():
        kind = key.split(":")[0]
        counts[kind] = counts.get(kind, 0) + backends
    return counts


def server_sample_values(sample: ServerSampleDocument) -> dict[str, float | None]:
    """The plotted values of one server sample by trace name (`server.<rate>`,
    `wait.<wait-event type>`), as the kept digest draws them (runs/timelines/store.py)."""
    rates: dict[str, float | None] = {
        f"server.{key}": _rate(sample, key) for key in SERVER_RATE_KEYS
    }
    waits = {f"wait.{kind}": float(n) for kind, n in wait_type_counts(sample).items()}
    return {**rates, **waits}


def _rate(sample: ServerSampleDocument, key: str) -> float | None:
    value = sample.get(key)
    return float(value) if isinstance(value, int | float) else None


def wait_event_types(server_samples: list[ServerSample]) -> dict[str, list[int]]:
    """Wait-event type -> sampled backends per sample (`CPU`: active, not waiting)."""
    counts = [wait_type_counts(s.data) for s in server_samples]
    types = sorted({kind for found in counts for kind in found})
    return {name: [found.get(name, 0) for found in counts] for name in types}


def written_per_second(sample: ServerSample) -> float | None:
    """Buffers written per second by checkpointer, background writer and backends together."""
    values = [sample.data.get(key) for key, _label in BUFFER_TRACES]
    known = [v for v in values if v is not None]
    return sum(known) if known else None
