"""What the experiment page shows about spending repeats: an adaptive experiment's
planned looks, each compared point's answer and the rounds it took, why it ended and
its machine time beside the fixed design of its budget (runs/services/adaptive.py);
and for any experiment, where its spread comes from (runs/inference/variance.py)."""

from dataclasses import dataclass
from datetime import timedelta

from django.db.models import DurationField, ExpressionWrapper, F, Max, Sum

from runs.inference.stats import ALPHA
from runs.inference.variance import VarianceSplit
from runs.models import Experiment, Result, Run
from runs.services.adaptive import AdaptiveState, Lengthened, LookRecord
from runs.services.adaptive_rounds import BASELINE_CELL, experiment_split


@dataclass(frozen=True)
class PointRow:
    cell: int
    label: str
    clients: int
    verdict: str
    sentence: str
    rounds: int
    # Which design answered ("paired over 6 rounds", "unpaired"); "" before answers said.
    design: str = ""


@dataclass(frozen=True)
class AdaptiveSummary:
    looks: list[int]
    looked: list[LookRecord]
    points: list[PointRow]
    ended: str
    baseline_label: str
    rounds_run: int
    runs_queued: int
    budget_runs: int
    run_time: timedelta | None
    budget_time: timedelta | None
    lengthened: Lengthened | None
    # Each cell placed at the first cell's level or at it moved by this (a bisection step).
    between_pct: float | None
    # How many experiments share the 5 % (a patch try's battery); 1: this one alone.
    shared_by: int

    @property
    def alpha_pct(self) -> float:
        """The error rate in percent this experiment's looks keep over all looks."""
        return round(ALPHA * 100.0 / self.shared_by, 6)  # 1 %, not 1.0000000000000002

    @property
    def run_seconds(self) -> float | None:
        return self.run_time.total_seconds() if self.run_time is not None else None

    @property
    def budget_seconds(self) -> float | None:
        return self.budget_time.total_seconds() if self.budget_time is not None else None

    @property
    def share_of_budget_pct(self) -> float | None:
        """The runs queued in percent of the fixed design of the budget's rounds."""
        return 100.0 * self.runs_queued / self.budget_runs if self.budget_runs else None


def adaptive_summary(experiment: Experiment, cell_labels: dict[int, str]) -> AdaptiveSummary | None:
    """The adaptive section of the experiment page; None for an experiment that is not
    adaptive or not started. `cell_labels`: cell index -> the label its runs carry."""
    state: AdaptiveState = experiment.adaptive_state
    if not experiment.adaptive or not state.get("looks"):
        return None
    runs = experiment.runs.filter(round__isnull=False)
    cells = len(set(runs.values_list("cell", flat=True)))
    budget_rounds = max(state["looks"])
    finished = runs.filter(started_at__isnull=False, finished_at__isnull=False)
    took = finished.annotate(
        took=ExpressionWrapper(F("finished_at") - F("started_at"), output_field=DurationField())
    ).aggregate(total=Sum("took"))["total"]
    count = finished.count()
    per_run = took / count if took is not None and count else None
    return AdaptiveSummary(
        looks=state["looks"],
        looked=state.get("looked", []),
        points=[
            PointRow(
                p["cell"],
                cell_labels.get(p["cell"], f"cell {p['cell']}"),
                p["clients"],
                p["verdict"],
                p["sentence"],
                p["rounds"],
                p.get("design", ""),
            )
            for p in state.get("points", [])
        ],
        ended=state.get("ended", ""),
        baseline_label=cell_labels.get(BASELINE_CELL, "the first cell"),
        rounds_run=runs.aggregate(latest=Max("round"))["latest"] or 0,
        runs_queued=runs.exclude(status=Run.Status.CANCELLED).count(),
        budget_runs=cells * budget_rounds,
        run_time=took,
        budget_time=per_run * cells * budget_rounds if per_run is not None else None,
        lengthened=state.get("lengthened"),
        between_pct=state.get("between_pct"),
        shared_by=state.get("shared_by", 1),
    )


def spread_split(experiment: Experiment, results: dict[int, list[Result]]) -> VarianceSplit | None:
    """Where the experiment's spread comes from (runs/services/adaptive_rounds.py): `results` maps a
    cell's standing run to every round's points."""
    repeats = [
        [r.tps or 0.0 for r in rs if r.clients == clients]
        for rs in results.values()
        for clients in {r.clients for r in rs}
    ]
    return experiment_split(experiment, repeats)
