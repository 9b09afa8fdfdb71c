"""Zooming into a chart of an hour-long run in a real browser: the range comes back at
full resolution, and zooming out restores the reduced line."""

import pytest

from runs.timelines.downsample import CHART_SAMPLES
from tests.runs.pages.test_timelines import SPIKE_T, SPIKE_TPS, long_run

pytestmark = pytest.mark.e2e

TRACE = "document.getElementById('chart-tps').data[0]"


def test_zooming_fetches_the_range_at_full_resolution_and_zooming_out_restores(signed_in_page, web):
    run = long_run()
    page = signed_in_page
    page.goto(f"{web.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    reduced = page.evaluate(f"{TRACE}.x.length")
    assert reduced <= CHART_SAMPLES

    page.evaluate(
        "window.Plotly.relayout(document.getElementById('chart-tps'),"
        " {'xaxis.range[0]': 1750, 'xaxis.range[1]': 1850})"
    )
    page.wait_for_function("() => document.getElementById('chart-tps').dataset.zoomed === '101'")
    xs, ys = page.evaluate(f"[{TRACE}.x, {TRACE}.y]")
    assert xs == [float(t) for t in range(1750, 1851)]
    assert ys[xs.index(SPIKE_T)] == SPIKE_TPS

    page.evaluate(
        "window.Plotly.relayout(document.getElementById('chart-tps'), {'xaxis.autorange': true})"
    )
    page.wait_for_function(f"() => {TRACE}.x.length === {reduced}")
