"""Pages and exports that compute statistics and warnings read each kind of row once,
however many runs and points they cover (no query per run or per point)."""

from collections.abc import Callable

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from runs.models import Comparison, Provenance, Run
from runs.timelines import store
from tests.runs.factories import ServerSampleFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.django_db


def measured_run(tps: float, **fields) -> Run:
    """Two client counts of three repeats, each point with progress, host and server samples."""
    points = [(c, r, tps * c * (1 + r / 100), 4.0) for c in (1, 4) for r in (1, 2, 3)]
    run = finished_run(points, **fields)
    for index in range(len(points)):
        ServerSampleFactory(run=run, point=index, t=1.0)
    return run


def saved_comparison(how_many: int, imported: bool = False) -> Comparison:
    """`how_many` runs of one experiment; `imported`: each came from a file (its provenance
    and its config profile's stated settings are what its warnings read)."""
    base = measured_run(1000.0)
    others = [measured_run(1000.0 + i, experiment=base.experiment) for i in range(how_many - 1)]
    comparison = Comparison.objects.create(name=f"{how_many} runs", baseline=base)
    comparison.runs.set([base, *others])
    for run in [base, *others] if imported else []:
        Provenance.objects.create(run=run, file_name=f"run-{run.pk}.txt", sha256=f"{run.pk:064}")
    return comparison


URLS: dict[str, Callable[[Comparison], tuple[str, dict]]] = {
    "compare page": lambda c: (reverse("comparison-detail", args=[c.pk]), {}),
    "statistics csv": lambda c: (
        reverse("comparison-export", args=[c.pk, "csv"]),
        {"rows": "stats"},
    ),
    "points csv": lambda c: (reverse("comparison-export", args=[c.pk, "csv"]), {}),
    "json export": lambda c: (reverse("comparison-export", args=[c.pk, "json"]), {}),
    "experiment page": lambda c: (
        reverse("experiment-detail", args=[c.baseline.experiment_id]),
        {},
    ),
    "statistics api": lambda c: (f"/api/comparisons/{c.pk}/statistics/", {}),
}


def queries_of(client: Client, url: str, query: dict) -> int:
    with CaptureQueriesContext(connection) as captured:
        assert client.get(url, query).status_code == 200
    return len(captured.captured_queries)


@pytest.mark.parametrize("imported", [False, True], ids=["measured", "imported"])
@pytest.mark.parametrize("view", URLS)
def test_statistics_views_read_each_kind_of_row_once_whatever_the_number_of_runs(
    signed_in, view, imported
):
    few, many = saved_comparison(2, imported), saved_comparison(6, imported)
    assert queries_of(signed_in, *URLS[view](many)) == queries_of(signed_in, *URLS[view](few))


def test_the_compare_page_of_six_runs_takes_eleven_queries(
    signed_in, django_assert_max_num_queries
):
    """Once the control worker has built their timeline digests."""
    comparison = saved_comparison(6)
    for run in comparison.runs.all():
        store.digest_refresh(run.pk)
    url, query = URLS["compare page"](comparison)
    # The eleventh reads the notes on the runs and their hosts.
    with django_assert_max_num_queries(11):
        signed_in.get(url, query)
