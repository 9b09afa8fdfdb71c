"""Importing nine pgbench 9.2 outputs through the page in a real browser: each run has a
latency, marked derived, and a label of its own in the experiment's chart and table."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Run
from tests.agents.pgbench.captures import FIXTURES

pytestmark = pytest.mark.e2e

PG92 = sorted((FIXTURES / "pg92").glob("*.log"))


def test_nine_92_outputs_imported_in_the_browser_have_latency_and_labels_of_their_own(
    signed_in_page, web
):
    page = signed_in_page
    page.goto(f"{web.url}/import/")
    page.set_input_files("input[type=file]", [str(path) for path in PG92])
    page.click("button:has-text('Import')")

    expect(page.locator(".messages")).to_contain_text("Imported 9 of 9 files.")
    page.wait_for_function("() => document.documentElement.dataset.chartsReady === '1'")
    names = page.evaluate(
        "document.querySelector('[data-figure=\"fig-experiment\"]').data.map(t => t.name)"
    )
    assert len(names) == len(set(names)) == 9
    assert sorted(re.search(r"tpcb_c\d+_T60_run\d\.log", n).group() for n in names) == [
        path.name for path in PG92
    ]
    labels = page.locator("#experiment-stats tbody tr td:first-child").all_inner_texts()
    assert len(set(labels)) == 9

    run = Run.objects.get(provenance__file_name=PG92[0].name)
    page.goto(f"{web.url}/runs/{run.pk}/")
    latency = page.locator("#results-table td[data-col=latency]")
    expect(latency).to_contain_text("derived")
    assert re.match(r"[\d.]+ derived", latency.inner_text())
