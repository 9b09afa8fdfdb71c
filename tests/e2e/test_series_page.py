"""The series page in a real browser: each metric's history is drawn with its change point."""

import pytest

from runs.models import Series
from runs.services.history.series import series_detect
from tests.runs.factories import ExperimentFactory
from tests.runs.history.test_change_alerts import history

pytestmark = pytest.mark.e2e


def test_the_series_page_draws_each_metric_over_time_with_the_change(signed_in_page, web, tmp_path):
    series = Series.objects.create(
        name="nightly", template=ExperimentFactory(), schedule="0 3 * * *"
    )
    history(series, [1000.0] * 12 + [900.0] * 6)
    series_detect(series)
    page = signed_in_page

    page.goto(f"{web.url}/series/{series.pk}/")
    page.wait_for_function("() => document.documentElement.dataset.chartsReady === '1'")

    drawn = page.evaluate(
        "[...document.querySelectorAll('[data-figure]')].map(e => e.data ? e.data.length : 0)"
    )
    assert drawn == [1, 1]  # tps and latency: one line each; p95 was not measured
    points = page.evaluate("document.querySelector('[data-figure]').data[0].x.length")
    assert points == 18
    assert page.locator(".alert-open").count() == 1
    page.screenshot(path=str(tmp_path / "series.png"), full_page=True)
