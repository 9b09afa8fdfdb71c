"""Stored noise for tests: a host's experiment in rounds."""

from datetime import UTC, datetime, timedelta

from runs.models import Experiment, Host, Run
from tests.runs.factories import ExperimentFactory, ResultFactory, RunFactory

ROUND_BASE = [21000.0, 30000.0, 39000.0, 25000.0, 11000.0, 19000.0]
ROUND_RATIOS = [1.052, 1.047, 1.066, 1.061, 1.043, 1.058]


def rounds_experiment(host: Host, base=ROUND_BASE, ratios=ROUND_RATIOS, **fields) -> Experiment:
    """A finished experiment in rounds: two cells on `host`, each round's pair sharing the
    host's speed of the moment, the second cell faster by each round's ratio."""
    experiment = ExperimentFactory(execution=Experiment.Execution.ROUNDS, hosts=[host], **fields)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for number, (base_tps, ratio) in enumerate(zip(base, ratios, strict=True), start=1):
        for cell, tps in ((0, base_tps), (1, base_tps * ratio)):
            run = RunFactory(
                experiment=experiment,
                host=host,
                cell=cell,
                round=number,
                status=Run.Status.SUCCEEDED,
                started_at=start,
                finished_at=start + timedelta(seconds=90),
            )
            ResultFactory(run=run, index=0, clients=4, tps=tps)
    return experiment
