"""What the experiment page shows of a capacity search (runs/services/capacity.py): the
answer, why it ended, every probe with its percentiles and decision, and the curve."""

from dataclasses import dataclass

from runs.analysis.capacity import CURVE_PERCENTILES, CapacityReading, Probe, capacity_reading
from runs.charts.capacity import capacity_figure
from runs.charts.figures import PlotlyJson
from runs.models import Experiment

# While a search runs, its page reloads this often to show new probes.
RELOAD_SECONDS = 10


@dataclass(frozen=True)
class ProbeRow:
    """A probe as its table row: the run, rates, percentiles in CURVE_PERCENTILES' order,
    its rate's decision and the reasons it did not pass."""

    probe: Probe
    latencies: list[float | None]
    decision: str
    reasons: str
    generator_limited: bool


@dataclass(frozen=True)
class CapacitySummary:
    sentence: str
    ended: str
    running: bool
    reload_seconds: int
    probes: list[ProbeRow]
    percentiles: list[str]
    figure: PlotlyJson | None
    reading: CapacityReading


def capacity_summary(experiment: Experiment) -> CapacitySummary | None:
    """The search's panel; None for an experiment that is no capacity search."""
    if not experiment.capacity:
        return None
    reading = capacity_reading(experiment)
    state = experiment.capacity_state or {}
    measured = any(any(v is not None for v in p.percentiles.values()) for p in reading.probes)
    return CapacitySummary(
        sentence=reading.capacity.sentence,
        ended=state.get("ended", ""),
        running=bool(state) and state.get("ended", "") == "",
        reload_seconds=RELOAD_SECONDS,
        probes=[_row(probe) for probe in reading.probes],
        percentiles=[f"p{p:g}" for p in CURVE_PERCENTILES],
        figure=capacity_figure(reading, f"capacity-{experiment.pk}") if measured else None,
        reading=reading,
    )


def _row(probe: Probe) -> ProbeRow:
    verdict = probe.verdict
    return ProbeRow(
        probe=probe,
        latencies=[probe.percentiles[p] for p in CURVE_PERCENTILES],
        decision=str(verdict.decision) if verdict else probe.status,
        reasons="; ".join(verdict.reasons) if verdict else "",
        generator_limited=bool(verdict and verdict.generator_limited),
    )
