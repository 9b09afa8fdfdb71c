"""The lab's main path, in a real browser against the real stack.

uvicorn serving the ASGI app, the control worker, one agent running real
PostgreSQL and pgbench, Redis: sign in, schedule from the form (the smoke
preset plus a profile made in the config editor), watch a run page receive
progress live, see its results table fill, compare the two finished runs and
their settings diff, open a share link signed out, revoke it.

Then the `benchlab` command against the same lab: the comparison's report, and a
tiny experiment run from a JSON file to its report and exit code.

The compare page's screenshot goes to var/screenshots/compare.png (not
tracked); copy it to docs/screenshots/ on purpose to refresh the README's.
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from playwright.sync_api import expect

from runs.models import Comparison, Run
from runs.presets import load_presets
from runs.services.access.tokens import api_token_create
from tests.e2e.conftest import PASSWORD, sign_in
from tests.runs.factories import UserFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(420)]

SCREENSHOT = Path(__file__).resolve().parents[2] / "var" / "screenshots" / "compare.png"

COUNT_PROGRESS = """() => {
  window.progressEvents = 0;
  window.benchlabLive.addEventListener("progress", () => { window.progressEvents += 1; });
}"""


def test_schedule_watch_compare_share_and_revoke(stack, page, browser):
    lab, web = stack
    load_presets()
    user = UserFactory(password=PASSWORD)
    sign_in(page, web.url, user.username)

    page.goto(f"{web.url}/configs/new")
    page.fill("input[name=name]", "small buffers")
    page.fill("textarea[name=settings_text]", "shared_buffers = 64MB")
    page.click("button:has-text('Save')")
    expect(page.locator("#profile-diff")).to_contain_text("64MB")

    page.goto(f"{web.url}/experiments/new?preset=smoke")
    expect(page.locator(f"input[data-host='{lab.name}']")).to_be_checked()
    page.check("label:has-text('small buffers') input")
    page.fill("input[name=clients]", "1,2")
    page.fill("input[name=duration_s]", "3")
    expect(page.locator("[data-estimate=runs]")).to_have_text("2")
    expect(page.locator("[data-estimate=points]")).to_have_text("4")
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("2 run(s) queued")
    first, second = Run.objects.order_by("pk")

    page.goto(f"{web.url}/runs/{first.pk}/")
    page.wait_for_function("() => window.benchlabLive !== undefined")
    page.evaluate(COUNT_PROGRESS)
    page.wait_for_function("() => window.progressEvents > 0", timeout=180_000)
    expect(page.locator("#results-table tbody tr").first).to_be_visible(timeout=60_000)
    expect(page.locator("h1 [data-status]")).to_have_text("succeeded", timeout=60_000)
    expect(page.locator("#results-table tbody tr")).to_have_count(2)
    lab.wait_terminal(second.pk, timeout=180)
    assert Run.objects.get(pk=second.pk).status == Run.Status.SUCCEEDED, lab.logs()

    page.goto(f"{web.url}/")
    page.check(f"input[name=runs][value='{first.pk}']")
    page.check(f"input[name=runs][value='{second.pk}']")
    page.click("button:has-text('Compare ticked runs')")
    expect(page).to_have_url(re.compile(r"/comparisons/\d+/$"))
    expect(page.locator("#diff-table")).to_contain_text("settings.shared_buffers")
    expect(page.locator("#compare-table tbody tr")).to_have_count(4)
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    # Drawn, in the page's own fonts, before the README's screenshot is taken.
    page.wait_for_function(
        "() => document.fonts.status === 'loaded' && [...document.querySelectorAll("
        "'.js-plotly-plot')].every((chart) => chart.querySelector('.main-svg'))"
    )
    SCREENSHOT.parent.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOT), full_page=True)

    page.goto(f"{web.url}/runs/{first.pk}/")
    numbers = page.locator("#results-table tbody").inner_text()
    page.click("summary:has-text('Share')")
    page.click("button:has-text('Create share link')")
    link = page.locator("[data-share-link]").first.get_attribute("href")
    visitor = browser.new_context().new_page()
    visitor.goto(f"{web.url}{link}")
    assert visitor.locator("#results-table tbody").inner_text() == numbers
    assert visitor.locator("form[method=post]").count() == 0
    assert visitor.locator("button:not(.modebar-btn)").count() == 0

    page.click("summary:has-text('Share')")
    page.click("button:has-text('Revoke')")
    wait_for(lambda: visitor.goto(f"{web.url}{link}").status == 410, 10, "the link to close")
    expect(visitor.locator("h1")).to_have_text("This share link was revoked")
    visitor.context.close()

    cli_reports_and_runs(web.url, user, first, second, tmp_path=SCREENSHOT.parent)


def benchlab(url: str, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "BENCHLAB_URL": url, "BENCHLAB_TOKEN": token}
    root = Path(__file__).resolve().parents[2]
    command = [sys.executable, "-m", "benchlab.cli", *args]
    return subprocess.run(command, cwd=root, env=env, capture_output=True, text=True, timeout=300)


def cli_reports_and_runs(url: str, user, first: Run, second: Run, tmp_path: Path) -> None:
    _row, token = api_token_create(user)
    comparison = Comparison.objects.get()
    report = benchlab(url, token, "report", "comparison", str(comparison.pk))
    # One repeat a side: too few repeats for a verdict, so undecided (2).
    assert report.returncode == 2, report.stderr
    assert report.stdout.startswith(f"BenchLab report: comparison {comparison.pk}")
    assert report.stdout.isascii() and max(map(len, report.stdout.splitlines())) <= 72

    tiny = tmp_path / "tiny-experiment.json"
    body = {
        "name": "cli tiny", "hosts": [first.host_id], "builds": [first.build_id],
        "config_profiles": [first.config_profile_id, second.config_profile_id],
        "workloads": [first.workload_id], "clients": [1], "duration_s": 2, "repeats": 1,
    }  # fmt: skip
    tiny.write_text(json.dumps(body))
    ran = benchlab(url, token, "run", str(tiny), "--format", "markdown")
    assert ran.returncode == 2, ran.stderr
    assert "2/2 runs done" in ran.stderr
    assert "| cell | clients | base tps | patched tps |" in ran.stdout
    assert Run.objects.filter(experiment__name="cli tiny", status=Run.Status.SUCCEEDED).count() == 2
