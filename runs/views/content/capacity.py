"""What the experiment page shows of a capacity search (runs/services/capacity.py): the
answer, why it ended, and per searched cell every probe with its percentiles and
decision, the curve, and where cells are compared, each one's ratio to the baseline
with its verdict (runs/analysis/capacity_compare.py)."""

from dataclasses import dataclass

from runs.analysis.capacity import CURVE_PERCENTILES, Probe
from runs.analysis.capacity_compare import CellCapacity, capacity_comparison, comparison_answer
from runs.charts.capacity import capacity_figure
from runs.charts.figures import PlotlyJson
from runs.inference.capacity_compare import CapacityRatio
from runs.inference.stalls import MAX_STALLED_WINDOWS
from runs.models import Experiment

# While a search runs, its page reloads this often to show new probes.
RELOAD_SECONDS = 10


@dataclass(frozen=True)
class ProbeRow:
    """A probe as its table row: the run, rates, percentiles in CURVE_PERCENTILES' order,
    its rate's decision, the reasons it did not pass and what stalled its window ("" where
    the host did not)."""

    probe: Probe
    latencies: list[float | None]
    decision: str
    reasons: str
    generator_limited: bool
    stall: str


@dataclass(frozen=True)
class CellPanel:
    """One searched cell: its label, capacity sentence, ratio to the baseline (None for
    the baseline or a lone cell), probes, curve and the curve's element id."""

    cell: int
    label: str
    sentence: str
    ratio: CapacityRatio | None
    probes: list[ProbeRow]
    figure: PlotlyJson | None
    figure_id: str


@dataclass(frozen=True)
class CapacitySummary:
    sentence: str
    ended: str
    running: bool
    reload_seconds: int
    probe_count: int
    percentiles: list[str]
    cells: list[CellPanel]
    compared: bool
    max_stalled_windows: int


def capacity_summary(experiment: Experiment) -> CapacitySummary | None:
    """The search's panel; None for an experiment that is no capacity search."""
    if not experiment.capacity:
        return None
    compared = capacity_comparison(experiment)
    state = experiment.capacity_state or {}
    several = len(compared) > 1
    cells = [_panel(experiment, item, several) for item in compared]
    return CapacitySummary(
        sentence=comparison_answer(compared),
        ended=state.get("ended", ""),
        running=bool(state) and state.get("ended", "") == "",
        reload_seconds=RELOAD_SECONDS,
        probe_count=sum(len(cell.probes) for cell in cells),
        percentiles=[f"p{p:g}" for p in CURVE_PERCENTILES],
        cells=cells,
        compared=several,
        max_stalled_windows=MAX_STALLED_WINDOWS,
    )


def _panel(experiment: Experiment, item: CellCapacity, several: bool) -> CellPanel:
    reading = item.reading
    measured = any(any(v is not None for v in p.percentiles.values()) for p in reading.probes)
    figure_id = f"fig-capacity-{item.cell}" if several else "fig-capacity"
    name = f"capacity-{experiment.pk}-{item.cell}" if several else f"capacity-{experiment.pk}"
    title = f"Latency against offered rate: {item.label}" if several else None
    return CellPanel(
        cell=item.cell,
        label=item.label,
        sentence=reading.capacity.sentence,
        ratio=item.ratio,
        probes=[_row(probe) for probe in reading.probes],
        figure=capacity_figure(reading, name, title) if measured else None,
        figure_id=figure_id,
    )


def _row(probe: Probe) -> ProbeRow:
    verdict = probe.verdict
    return ProbeRow(
        probe=probe,
        latencies=[probe.percentiles[p] for p in CURVE_PERCENTILES],
        decision=str(verdict.decision) if verdict else probe.status,
        reasons="; ".join(verdict.reasons) if verdict else "",
        generator_limited=bool(verdict and verdict.generator_limited),
        stall=_stall_said(probe),
    )


def _stall_said(probe: Probe) -> str:
    if probe.stall is None:
        return ""
    if probe.stall_counted:
        counted = f"counted as it is (its rate stalled in more than {MAX_STALLED_WINDOWS} windows)"
        return f"stalled: {probe.stall}; {counted}"
    return f"stalled: {probe.stall} (the host's, not the load's): set aside, its rate probed again"
