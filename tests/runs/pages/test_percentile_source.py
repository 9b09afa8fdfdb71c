"""The run page says, on each percentile, how the agent obtained it."""

import pytest
from django.urls import reverse

from runs.models import Result

pytestmark = pytest.mark.django_db


def test_run_page_says_where_each_percentile_comes_from(signed_in, run_with_results):
    Result.objects.filter(run=run_with_results, index=0).update(
        percentiles={
            "p95": 1.2,
            "source": "sample",
            "sampling_rate": 0.02,
            "sampled_transactions": 41000,
        }
    )
    page = signed_in.get(reverse("run-detail", args=[run_with_results.pk])).content.decode()
    assert 'title="p95 from a 2 % sample, 41,000 transactions"' in page
    assert 'title="p95 source not recorded"' in page  # stored before sources were kept
