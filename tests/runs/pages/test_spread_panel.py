"""The experiment page says where its spread comes from and what narrows it faster."""

import numpy as np
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


def test_an_experiment_in_rounds_shows_what_pairing_its_rounds_removed(signed_in):
    """Two cells whose rounds move together (the host's moment) and apart a little: the
    panel gives the rounds' ratios' spread against the unpaired one."""
    experiment = ExperimentFactory(execution="rounds", repeats=4, clients=[2])
    moments = (1000.0, 1200.0, 900.0, 1100.0)
    for round_number, moment in enumerate(moments, start=1):
        for cell, own in ((0, 1.0), (1, 1.0 + 0.01 * (round_number % 2))):
            run = RunFactory(
                experiment=experiment,
                cell=cell,
                round=round_number,
                position=2 * round_number + cell,
                status=Run.Status.SUCCEEDED,
                finished_at=timezone.now(),
            )
            tps = moment * own
            Result.objects.create(run=run, index=0, clients=2, repeat=round_number, tps=tps)
            ProgressSample.objects.bulk_create(
                ProgressSample(run=run, point=0, t=float(t), tps=tps + (5 if t % 2 else -5))
                for t in range(1, 21)
            )

    page = signed_in.get(reverse("experiment-detail", args=[experiment.pk])).content.decode()

    logs = np.log(moments)
    ratios = np.log([1.0 + 0.01 * (r % 2) for r in range(1, 5)])
    share = 1 - ratios.var(ddof=1) / (logs.var(ddof=1) + (logs + ratios).var(ddof=1))
    assert 'id="spread-pairing"' in page
    assert "4 pairs of runs" in page
    assert f"pairing removes {share * 100:.0f} % of a difference" in page
    assert "pairing each round with the first cell&#x27;s removes" in page
