"""The series page in a real browser: each metric's history is drawn with its change point;
the alerts page with each state, acknowledging one, and a confirming comparison."""

import pytest
from django.contrib.auth.models import User
from django.utils import timezone

from runs.models import Alert, Series
from runs.services.history.alerts import series_detect
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
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")

    drawn = page.evaluate(
        "[...document.querySelectorAll('[data-figure]')].map(e => e.data ? e.data.length : 0)"
    )
    assert drawn == [1, 1]  # tps and latency: one line each; p95 was not measured
    points = page.evaluate("document.querySelector('[data-figure]').data[0].x.length")
    assert points == 18
    assert page.locator(".alert-open").count() == 1
    page.screenshot(path=str(tmp_path / "series.png"), full_page=True)


def test_the_alerts_page_shows_each_state_and_a_confirming_comparison(
    signed_in_page, web, tmp_path
):
    owner = User.objects.order_by("-pk").first()
    series = Series.objects.create(
        name="nightly", template=ExperimentFactory(), schedule="0 3 * * *", created_by=owner
    )
    history(series, [1000.0] * 12 + [900.0] * 6)
    (new,) = series_detect(series)
    ab = ExperimentFactory(name="nightly: confirm alert")
    states = {
        Alert.State.CONFIRMED: {
            "confirmation": "confirmed: slower by 9.8 % [-11.9, -7.7] over 6 rounds",
            "confirmation_experiment": ab,
        },
        Alert.State.HOST: {},
        Alert.State.NOT_CONFIRMED: {"confirmation": "not confirmed: same, -0.4 % over 4 rounds"},
        Alert.State.ACKNOWLEDGED: {"acknowledged_at": timezone.now(), "acknowledged_by": owner},
        Alert.State.FIXED: {"acknowledged_at": timezone.now(), "acknowledged_by": owner},
    }
    for number, (state, fields) in enumerate(states.items(), start=1):
        Alert.objects.create(
            series=series, occurrence=new.occurrence, metric="tps", key=f"cell {number}, 4 clients",
            before=1000.0, after=900.0, change_percent=-10.0, state=state, **fields,
        )  # fmt: skip
    page = signed_in_page

    page.goto(f"{web.url}/alerts/")

    shown = page.evaluate(
        "[...document.querySelectorAll('tr.alert-row')].map(r => r.dataset.state).sort()"
    )
    assert shown == sorted(["new", *(str(state) for state in states)])
    confirmed = page.locator("tr[data-state=confirmed]")
    assert "confirmed: slower by 9.8 % [-11.9, -7.7]" in confirmed.inner_text()
    row = page.locator(f"tr[data-alert='{new.pk}']")
    row.locator("input[name=note]").fill("looking at the planner change")
    row.get_by_role("button", name="Acknowledge").click()
    page.wait_for_selector(f"tr[data-alert='{new.pk}'][data-state=acknowledged]")
    assert (
        "looking at the planner change" in page.locator(f"tr[data-alert='{new.pk}']").inner_text()
    )
    page.screenshot(path=str(tmp_path / "alerts.png"), full_page=True)
    page.locator("tr[data-state=confirmed] a.confirming-ab").click()
    page.wait_for_url(f"**/experiments/{ab.pk}/")
    assert "nightly: confirm alert" in page.content()
