"""Importing nine pgbench 9.2 outputs through the page in a real browser: each run has a
latency, marked derived, and a label of its own in the experiment's chart and table; and,
described per file, they come back as preset 2's 3 x 3 table."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Result, Run
from tests.agents.pgbench.captures import FIXTURES
from tests.e2e.honesty import assert_honest, watch_other_hosts

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
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
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


DEVICES, METHODS = ("sas", "ssd", "ram"), ("fsync", "fdatasync", "open_sync")


def test_preset_2_rebuilt_in_the_browser_from_nine_9_2_outputs_described_per_file(
    signed_in_page, web
):
    """The nine outputs named by device and method, described by pattern in the form, then
    the cells compared: the pivot reads as the original write-up's 3 x 3 (a row per device,
    a column per wal_sync_method), and the page is honest and fits 1,280 px."""
    page = signed_in_page
    elsewhere = watch_other_hosts(page, web.url)
    names = [f"{device}-{method}.log" for device in DEVICES for method in METHODS]
    files = [
        {"name": name, "mimeType": "text/plain", "buffer": path.read_bytes()}
        for name, path in zip(names, PG92, strict=True)
    ]
    describe = "\n".join(
        [f"{device}-*: storage={device.upper()}" for device in DEVICES]
        + [f"*-{method}.log: wal_sync_method={method}" for method in METHODS]
    )
    page.goto(f"{web.url}/import/")
    page.set_input_files("input[type=file]", files)
    page.fill("textarea[name=describe]", describe)
    page.click("button:has-text('Import')")
    expect(page.locator(".messages")).to_contain_text("Imported 9 of 9 files.")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    assert_honest(page)

    page.click("button:has-text('Compare the cells')")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    header = page.locator("#pivot-tps thead th.num").all_text_contents()
    assert [text.strip() for text in header] == list(METHODS), "a column per wal_sync_method"
    rows = page.locator("#pivot-tps tbody tr")
    expect(rows).to_have_count(3)
    for n, device in enumerate(DEVICES):
        row = rows.nth(n)
        assert row.locator("th").text_content().split(" · ")[0] == device.upper()
        shown = row.locator("td strong").all_text_contents()
        expected = [
            Result.objects.get(run__provenance__file_name=f"{device}-{method}.log").tps
            for method in METHODS
        ]
        assert shown == [f"{tps:,.1f}" for tps in expected]
    assert_honest(page)
    overflow = page.evaluate(
        """() => [document.documentElement, ...document.querySelectorAll('.table-wrap')]
          .map(box => box.scrollWidth - box.clientWidth)"""
    )
    assert max(overflow) <= 0, overflow
    assert elsewhere == []
