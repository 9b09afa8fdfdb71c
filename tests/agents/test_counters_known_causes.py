"""Known causes, measured: the real agent runs real pgbench against real servers that
differ in one setting, the lab stores the points and compares the cells, and the counter
the setting is known to move is among each compared cell's top three movers.

- full_page_writes on against off: after a CHECKPOINT before each point, the first
  change to each page writes a full-page image, which off never does;
- synchronous_commit off against on: a commit no longer waits for its WAL to be
  flushed, so the WAL syncs per transaction fall to the WAL writer's few.

Three cells of three short points each (2 clients, 2 s, PostgreSQL 16, scale 1).
"""

from typing import Any

import pytest

from agents.config import AgentConfig
from runs.analysis.tables import comparison_statistics
from runs.models import Comparison, Run
from runs.services.events import store_point
from tests.agents.jobs import run, small_spec
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db


def measured_cell(config: AgentConfig, settings: dict[str, str], experiment: Any = None) -> Run:
    """A lab run holding the points of one real job with these settings."""
    spec = small_spec(
        settings=settings,
        sweep={
            "clients": [2],
            "duration_s": 2,
            "warmup_s": 0,
            "repeats": 3,
            "between_points": "checkpoint",
        },
    )
    document, _events = run(spec, config)
    assert document["status"] == "succeeded", document["error"]
    fields = {"experiment": experiment} if experiment is not None else {}
    lab_run = RunFactory(status=Run.Status.SUCCEEDED, spec=spec, **fields)
    for point in document["points"]:
        store_point(lab_run, point)
    return lab_run


def top_movers_of(baseline: Run, other: Run) -> list[str]:
    comparison = Comparison.objects.create(name="known cause", baseline=baseline)
    comparison.runs.set([baseline, other])
    statistics = comparison_statistics(comparison, min_effect_pct=1.0)
    [cell] = statistics["top_movers"]  # type: ignore[misc]
    assert cell["run_id"] == other.pk
    return [mover["counter"] for mover in cell["movers"]]


def test_full_page_writes_and_synchronous_commit_move_the_counters_they_are_known_to_move(
    config: AgentConfig,
) -> None:
    default = measured_cell(config, {})
    without_fpw = measured_cell(config, {"full_page_writes": "off"}, default.experiment)
    asynchronous = measured_cell(config, {"synchronous_commit": "off"}, default.experiment)

    assert "wal.fpi" in top_movers_of(without_fpw, default)
    moved = top_movers_of(default, asynchronous)
    assert {"wal.syncs", "wal.sync_time_ms", "wal.write_time_ms"} & set(moved), moved
