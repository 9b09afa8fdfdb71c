"""The experiment page says where its spread comes from and what narrows it faster."""

import pytest
from django.urls import reverse
from django.utils import timezone

from runs.models import ProgressSample, Result, Run
from tests.runs.factories import ExperimentFactory, RunFactory

pytestmark = pytest.mark.django_db


def test_an_experiment_in_rounds_shows_where_repeats_pay(signed_in):
    experiment = ExperimentFactory(execution="rounds", repeats=3, clients=[2])
    for round_number, tps in enumerate((1000.0, 1100.0, 900.0), start=1):
        run = RunFactory(
            experiment=experiment,
            cell=0,
            round=round_number,
            position=round_number,
            status=Run.Status.SUCCEEDED,
            finished_at=timezone.now(),
        )
        Result.objects.create(run=run, index=0, clients=2, repeat=round_number, tps=tps)
        ProgressSample.objects.bulk_create(
            ProgressSample(run=run, point=0, t=float(t), tps=tps + (5 if t % 2 else -5))
            for t in range(1, 21)
        )

    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()

    assert 'id="spread"' in page
    assert "of a repeat&#x27;s variance is between clusters" in page
    assert "more rounds narrow the interval faster than longer points" in page


def test_an_experiment_without_repeats_shows_no_split(signed_in):
    experiment = ExperimentFactory(repeats=1)
    run = RunFactory(experiment=experiment, status=Run.Status.SUCCEEDED)
    Result.objects.create(run=run, index=0, clients=2, repeat=1, tps=1000.0)

    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()

    assert 'id="spread"' not in page
