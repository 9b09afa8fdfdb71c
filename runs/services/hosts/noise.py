"""A host's canaries: stored as its runs report them, each checked against the host's usual
spread (runs/host_noise.py, runs/inference/usual.py).

A run's agent times the canary before the run's cluster starts
(agents/observe/canary.py). The lab keeps it as the host's series
(`HostCanary`) and compares it with the host's last canaries before it:
a CPU loop, an fsync or a memory copy outside their band marks the run (`Run.host_noise`),
and every verdict that uses the run warns about it
(`host_outside_usual_spread`). Such runs are only flagged, never dropped
(docs/decisions.md): the canary is taken before the window, not in it, and a
paired verdict already cancels a slowdown that hits both cells of a round.
"""

import logging
from datetime import datetime

from agents.contract.reports.noise import HostCanary as CanaryDocument
from runs.host_noise import CanaryBands, canary_bands
from runs.models import HostCanary, Run

logger = logging.getLogger(__name__)


def outside_usual(
    bands: CanaryBands, cpu_loop_ns: float, fsync_ms: float, memory_gbps: float | None
) -> list[str]:
    """What of a canary lies outside the host's usual spread, in words."""
    found = []
    if bands.cpu_loop_ns is not None and not bands.cpu_loop_ns.holds(cpu_loop_ns):
        found.append(f"CPU loop {cpu_loop_ns:.3g} ns/iteration, {bands.cpu_loop_ns.describe('ns')}")
    if bands.fsync_ms is not None and not bands.fsync_ms.holds(fsync_ms):
        found.append(f"fsync {fsync_ms:.3g} ms, {bands.fsync_ms.describe('ms')}")
    band = bands.memory_gbps
    if band is not None and memory_gbps is not None and not band.holds(memory_gbps):
        found.append(f"memory copy {memory_gbps:.3g} GB/s, {band.describe('GB/s')}")
    return found


def canary_record(run: Run, document: CanaryDocument, at: datetime | None) -> dict[str, object]:
    """Store the run's canary (once), timed at `at` (its agent's clock), and return what
    the run keeps as `host_noise`."""
    existing = HostCanary.objects.filter(run=run).first()
    if existing is not None:
        return {"outside_usual": existing.outside_usual, "detail": existing.detail}
    at = at or run.started_at
    if at is None:
        logger.warning("run %s: a canary without its time was sent; not kept", run.pk)
        return {}
    cpu, fsync = float(document["cpu_loop_ns"]), float(document["fsync_ms"])
    memory = document.get("memory_gbps")
    memory_gbps = None if memory is None else float(memory)
    found = outside_usual(canary_bands(run.host, before=at), cpu, fsync, memory_gbps)
    detail = "; ".join(found)
    HostCanary.objects.create(
        host=run.host,
        run=run,
        at=at,
        cpu_loop_ns=cpu,
        fsync_ms=fsync,
        fsync_max_ms=float(document["fsync_max_ms"]),
        memory_gbps=memory_gbps,
        document=dict(document),
        outside_usual=bool(found),
        detail=detail,
    )
    return {"outside_usual": bool(found), "detail": detail}
