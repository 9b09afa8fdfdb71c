"""Cells measured by the real agent and stored in the lab, for the known-cause tests of
the counters: each cell is one job of three short points (2 clients, PostgreSQL 16), or
in rounds one job (its own cluster) a repeat, and its top movers come from the lab's
comparison against another cell."""

from typing import Any

from agents.config import AgentConfig
from runs.models import Comparison, Experiment, Run
from runs.services.jobs.events import store_point
from runs.stats_tables import comparison_statistics
from tests.agents.jobs import run, small_spec
from tests.runs.factories import RunFactory


def measured_cell(
    config: AgentConfig,
    settings: dict[str, str],
    experiment: Experiment | None = None,
    transactions: int | None = None,
    repeats: int = 3,
    **sections: Any,
) -> Run:
    """A lab run holding `repeats` points of one real job with these settings (`sections`
    override the spec's dataset or workload); points of 2 s, or of `transactions` per
    client where a counter per transaction depends on how many the window holds."""
    length = {"duration_s": None, "transactions": transactions} if transactions else {}
    spec = small_spec(
        settings=settings,
        sweep={
            "clients": [2],
            "duration_s": 2,
            "warmup_s": 0,
            "repeats": repeats,
            "between_points": "checkpoint",
            **length,
        },
        **sections,
    )
    document, _events = run(spec, config)
    assert document["status"] == "succeeded", document["error"]
    fields = {"experiment": experiment} if experiment is not None else {}
    lab_run = RunFactory(status=Run.Status.SUCCEEDED, spec=spec, **fields)
    for point in document["points"]:
        store_point(lab_run, point)
    return lab_run


def measured_rounds(
    config: AgentConfig,
    experiment: Experiment,
    cell: int,
    rounds: int,
    transactions: int,
    **sections: Any,
) -> Run:
    """The run standing for `cell` of `experiment` measured in rounds, as the lab stores
    them: each round one job of one point of `transactions` per client, in a cluster of
    its own, stored as a run of that cell and round."""
    first: Run | None = None
    for round_number in range(1, rounds + 1):
        spec = small_spec(
            sweep={
                "clients": [2],
                "duration_s": None,
                "transactions": transactions,
                "warmup_s": 0,
                "repeats": 1,
                "first_repeat": round_number,
                "between_points": "checkpoint",
            },
            **sections,
        )
        document, _events = run(spec, config)
        assert document["status"] == "succeeded", document["error"]
        same = {"host": first.host, "build": first.build} if first is not None else {}
        lab_run = RunFactory(
            status=Run.Status.SUCCEEDED,
            spec=spec,
            experiment=experiment,
            cell=cell,
            round=round_number,
            **same,
        )
        for point in document["points"]:
            store_point(lab_run, point)
        first = first or lab_run
    assert first is not None
    return first


def top_movers_of(baseline: Run, other: Run) -> list[str]:
    """The counters of `other`'s cell that moved most against `baseline`'s, in rank order,
    each followed by the counters that read the same quantity and moved with it."""
    comparison = Comparison.objects.create(name="known cause", baseline=baseline)
    comparison.runs.set([baseline, other])
    statistics = comparison_statistics(comparison, min_effect_pct=1.0).document
    [cell] = statistics["top_movers"]  # type: ignore[misc]
    assert cell["run_id"] == other.pk
    return [key for mover in cell["movers"] for key in [mover["counter"], *mover["copies"]]]
