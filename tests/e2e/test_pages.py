"""The pages in a real browser against uvicorn, with data made by factories and services."""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Comparison, ProgressSample, Result, Run, ServerSample
from tests.e2e.honesty import chart_problems, negative_intervals, watch_other_hosts
from tests.runs.factories import ConfigProfileFactory, RunFactory
from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.e2e


def chart_points(page, element_id: str) -> int:
    """How many x values trace 0 of a drawn plotly chart has (gaps included)."""
    return page.evaluate(f"document.getElementById('{element_id}').data[0].x.length")


# A server chart's trace by its `meta.trace` (as frontend/live.js finds it).
SERVER_TRACE = (
    "(name => document.getElementById('chart-server').data.find(t => t.meta?.trace === name))"
)


def test_signed_out_visitor_lands_on_the_sign_in_form(page, web):
    page.goto(f"{web.url}/runs/1/")
    expect(page.locator("h1")).to_have_text("Sign in")


def test_finished_run_page_shows_table_and_draws_charts(signed_in_page, web):
    run = finished_run([(1, 1, 1234.5678, 0.8101), (2, 1, 2345.25, 0.8529)])
    page = signed_in_page
    page.goto(f"{web.url}/runs/{run.pk}/")
    expect(page.locator("#results-table tbody tr")).to_have_count(2)
    expect(page.locator("#results-table")).to_contain_text("2,345.2")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    assert chart_points(page, "chart-tps") == 5  # two points of two samples, one gap
    page.click("summary:has-text('Commands')")
    expect(page.locator("#commands pre").first).to_contain_text("pgbench -c 1 -T 2")


def test_live_run_page_extends_charts_and_fills_the_table(signed_in_page, web):
    run = RunFactory(
        status=Run.Status.RUNNING,
        step="running: pgbench",
        spec={"sweep": {"clients": [1, 2], "repeats": 1, "duration_s": 3}},
    )
    page = signed_in_page
    page.goto(f"{web.url}/runs/{run.pk}/")
    expect(page.locator("#live-badge")).to_be_visible()
    page.wait_for_function("() => window.benchlabLive && window.benchlabLive.readyState === 1")
    for t in (1.0, 2.0, 3.0):
        ProgressSample.objects.create(run=run, point=0, t=t, tps=500 + t, latency_ms=2.0)
    page.wait_for_function("() => document.getElementById('chart-tps').data[0].x.length === 3")
    Result.objects.create(
        run=run, index=0, clients=1, repeat=1, tps=501.25, latency_avg_ms=1.995, exit_code=0
    )
    expect(page.locator("#results-table tbody tr")).to_have_count(1)
    expect(page.locator("#results-table")).to_contain_text("501.2")
    ProgressSample.objects.create(run=run, point=1, t=1.0, tps=900.0, latency_ms=2.2)
    # A new point starts after a gap, where the previous one ended.
    page.wait_for_function("() => document.getElementById('chart-tps').data[0].x.length === 5")
    xs = page.evaluate("document.getElementById('chart-tps').data[0].x")
    assert xs == [1.0, 2.0, 3.0, 3.0, 4.0]
    # The server's seconds: buffer rates, wait events stacked by type, checkpoints marked.
    for t, timed, written, waits in (
        (1.0, 0, 0.0, {"CPU": 2}),
        (2.0, 1, 80.0, {"CPU": 1, "IO:WALSync": 2}),
        (3.0, 1, 0.0, {"LWLock:WALWrite": 1}),
    ):
        data = {"t": t, "checkpoints_timed": timed, "checkpoints_req": 0, "wait_events": waits}
        data |= {"buffers_checkpoint_per_s": written, "buffers_alloc_per_s": 10 * t}
        ServerSample.objects.create(run=run, point=0, t=t, data=data)
    page.wait_for_function(
        "() => server_drawn('checkpoints').x.length === 2".replace("server_drawn", SERVER_TRACE)
    )
    server = page.evaluate(
        """() => Object.fromEntries(document.getElementById('chart-server').data
          .filter(t => t.meta && t.meta.trace).map(t => [t.meta.trace, [t.x, t.y, t.text]]))"""
    )
    assert server["server.buffers_checkpoint_per_s"][1] == [0.0, 80.0, 0.0]
    assert server["server.buffers_alloc_per_s"][1] == [10.0, 20.0, 30.0]
    # A wait-event type gets its trace when first seen; a drawn one the second lacks is 0.
    assert server["wait.CPU"][1] == [2, 1, 0] and server["wait.IO"][1] == [2, 0]
    assert server["wait.LWLock"][1] == [1]
    assert server["checkpoints"][0] == [2.0, 3.0]
    assert server["checkpoints"][2] == ["timed checkpoint start", "timed checkpoint end"]
    expect(page.locator("#server-empty")).to_have_count(0)
    # The finished page (the live one reloads) draws the same from the kept digest.
    with page.expect_navigation(timeout=15_000):
        Run.objects.filter(pk=run.pk).update(status=Run.Status.SUCCEEDED, step="")
    expect(page.locator("h1 [data-status]")).to_have_text("succeeded")
    expect(page.locator("#live-badge")).to_have_count(0)
    page.wait_for_function(
        "() => document.documentElement?.dataset.chartsReady === '1'"
        " && server_drawn('checkpoints').x.length === 2".replace("server_drawn", SERVER_TRACE)
    )
    kept = page.evaluate(
        """() => Object.fromEntries(document.getElementById('chart-server').data
          .filter(t => t.meta && t.meta.trace).map(t => [t.meta.trace, [t.x, t.y, t.text]]))"""
    )
    assert kept["checkpoints"] == server["checkpoints"]
    assert kept["server.buffers_checkpoint_per_s"][1] == [0.0, 80.0, 0.0]


def test_compare_ticked_runs_then_share_and_revoke(signed_in_page, web, browser):
    base = finished_run(
        [(1, 1, 1000.0, 1.0), (1, 2, 1040.0, 0.98), (2, 1, 1800.0, 1.1), (2, 2, 1850.0, 1.08)],
        settings={"shared_buffers": "128MB"},
    )
    tuned = finished_run(
        [(1, 1, 1100.0, 0.9), (1, 2, 1150.0, 0.88), (2, 1, 2400.0, 0.85), (2, 2, 2450.0, 0.83)],
        settings={"shared_buffers": "1GB"},
        config_profile=ConfigProfileFactory(name="shared_buffers 1GB"),
        experiment=base.experiment,
    )
    page = signed_in_page
    page.goto(f"{web.url}/")
    page.check(f"input[name=runs][value='{base.pk}']")
    page.check(f"input[name=runs][value='{tuned.pk}']")
    page.click("button:has-text('Compare ticked runs')")
    expect(page).to_have_url(re.compile(r"/comparisons/\d+/$"))
    expect(page.locator("#diff-table")).to_contain_text("settings.shared_buffers")
    expect(page.locator("#diff-table")).to_contain_text("1GB")
    expect(page.locator("#compare-table")).to_contain_text("+32.9 %")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    numbers = page.locator("#compare-table tbody").inner_text()

    page.click("summary:has-text('Share')")
    page.click("button:has-text('Create share link')")
    link = page.locator("[data-share-link]").first.get_attribute("href")
    visitor = browser.new_context().new_page()
    visitor.goto(f"{web.url}{link}")
    expect(visitor.locator(".readonly-banner")).to_be_visible()
    assert visitor.locator("#compare-table tbody").inner_text() == numbers
    assert visitor.locator("form[method=post]").count() == 0

    page.click("summary:has-text('Share')")
    page.click("button:has-text('Revoke')")
    response = visitor.goto(f"{web.url}{link}")
    assert response.status == 410
    expect(visitor.locator("h1")).to_have_text("This share link was revoked")
    visitor.context.close()


def test_pages_fit_a_narrow_window(browser, web):
    run = finished_run([(1, 1, 1234.5, 0.81)])
    from tests.e2e.conftest import PASSWORD, sign_in
    from tests.runs.factories import UserFactory

    context = browser.new_context(viewport={"width": 400, "height": 800})
    page = context.new_page()
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)
    for path in ("/", f"/runs/{run.pk}/", "/experiments/new", "/hosts/"):
        page.goto(f"{web.url}{path}")
        overflow = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        assert overflow <= 1, f"{path} overflows a 400 px window by {overflow} px"
    context.close()


# What every table is checked against: a laptop's browser window.
LAPTOP_WIDTH = 1280


def sideways_overflow(page) -> dict[str, int]:
    """Pixels each table (and the page) would need beyond the width it has."""
    return page.evaluate(
        """() => {
          const wide = {page: document.documentElement.scrollWidth
                               - document.documentElement.clientWidth};
          document.querySelectorAll('table').forEach((table, n) => {
            const box = table.closest('.table-wrap') || table.parentElement;
            const name = table.id || table.className || `table ${n}`;
            wide[name] = Math.max(table.scrollWidth, box.scrollWidth) - box.clientWidth;
          });
          return wide;
        }"""
    )


def test_every_table_fits_a_1280_px_window_and_no_page_misleads_or_loads_from_elsewhere(
    browser, web
):
    from tests.e2e.conftest import PASSWORD, sign_in
    from tests.runs.factories import UserFactory

    points = [
        (clients, repeat, 1000.0 * clients + repeat, 0.8)
        for clients in (1, 4, 16, 64)
        for repeat in (1, 2, 3)
    ]
    tuned = ConfigProfileFactory(
        name="tuned: shared_buffers 8GB, wal_compression lz4, checkpoint_timeout 30min",
        settings={"shared_buffers": "8GB", "wal_compression": "lz4"},
    )
    base = finished_run(points)
    other = finished_run(points, experiment=base.experiment, config_profile=tuned)
    comparison = Comparison.objects.create(name="tuned against default", baseline=base)
    comparison.runs.set([base, other])
    context = browser.new_context(viewport={"width": LAPTOP_WIDTH, "height": 900})
    page = context.new_page()
    sign_in(page, web.url, UserFactory(password=PASSWORD, is_staff=True).username)
    paths = [
        "/",
        f"/runs/{base.pk}/",
        f"/runs/{other.pk}/",
        "/experiments/",
        f"/experiments/{base.experiment_id}/",
        "/comparisons/",
        f"/comparisons/{comparison.pk}/",
        "/hosts/",
        f"/hosts/{base.host_id}/",
        "/builds/",
        "/configs/",
        "/workloads/",
        "/series/",
        "/alerts/",
        "/bisections/",
        "/import/",
        "/schedule/",
    ]
    elsewhere = watch_other_hosts(page, web.url)
    too_wide, misleading = {}, {}
    for path in paths:
        page.goto(f"{web.url}{path}")
        page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
        wide = {name: px for name, px in sideways_overflow(page).items() if px > 1}
        if wide:
            too_wide[path] = wide
        found = chart_problems(page) + negative_intervals(page)
        if found:
            misleading[path] = found
    page.goto(f"{web.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("BenchLab API")
    context.close()
    assert too_wide == {}, f"wider than {LAPTOP_WIDTH} px: {too_wide}"
    assert misleading == {}
    assert elsewhere == [], "every page loads only from the lab itself"
