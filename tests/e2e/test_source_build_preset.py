"""Preset 5 from the browser, at small scale, on the real stack.

The preset's 16 kB, 256-partition build is pointed at the machine's 15.18
release tarball (the preset names 14.3 on postgresql.org, which this machine
cannot reach) and run against the prebuilt PostgreSQL 16 build: the agent
builds it (or reuses its cache), the run page shows the build and its
compile-time settings, and the compare page lists block_size 16384 vs 8192 in
"what differs".
"""

import pytest
from playwright.sync_api import expect

from runs.models import PgBuild, Run
from runs.presets import find, load_presets
from tests.e2e.conftest import PASSWORD, Web, sign_in
from tests.integration.conftest import running_lab
from tests.runs.factories import UserFactory
from tests.source_builds import blocks16_definition, sources_dir

# A cold build takes about 6 minutes on 2 cores; with the agent's cache warm, seconds.
pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(900)]


@pytest.fixture
def build_stack(transactional_db, tmp_path):
    sources = sources_dir()
    agent_args = ["--allow-source-builds", "--build-source", str(sources), "--allow-user-patches"]
    with running_lab(tmp_path, agent_args=agent_args) as lab:
        web = Web(tmp_path, {"REDIS_URL": lab.env["REDIS_URL"]})
        try:
            yield lab, web, sources
        finally:
            web.close()


def test_preset_5_preset_runs_from_the_browser_and_compares_block_sizes(build_stack, page):
    lab, web, sources = build_stack
    load_presets()
    patched_name, unpatched_name = (b.name for b in find("source-build-partitions").source_builds)
    PgBuild.objects.filter(name=patched_name).update(
        version="15", definition=blocks16_definition(sources)
    )
    unpatched = PgBuild.objects.get(name=unpatched_name)
    prebuilt = PgBuild.objects.get(name="PostgreSQL 16")
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)

    page.goto(f"{web.url}/experiments/new?preset=source-build-partitions")
    page.uncheck(f"input[name=builds][value='{unpatched.pk}']")
    page.check(f"input[name=builds][value='{prebuilt.pk}']")
    page.fill("input[name=clients]", "2")
    page.fill("input[name=duration_s]", "3")
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("2 run(s) queued")
    built = Run.objects.get(build__name=patched_name)
    other = Run.objects.get(build=prebuilt)

    lab.wait_terminal(built.pk, timeout=800)
    lab.wait_terminal(other.pk, timeout=180)
    for run in (built, other):
        run.refresh_from_db()
        assert run.status == Run.Status.SUCCEEDED, (run.error_message, lab.logs())
    assert built.spec["postgres"]["build"]["patches"][0]["name"] == "buffer-partitions-256"
    build_steps = built.events.filter(type="step", payload__name="build")
    assert build_steps.filter(payload__percent=100).exists()  # the live page's build progress
    assert any(sample.data.get("wait_events") is not None for sample in built.server_samples.all())

    page.goto(f"{web.url}/runs/{built.pk}/")
    expect(page.locator("#source-build summary")).to_contain_text("Source build")
    page.click("#compiled-settings summary")
    expect(page.locator("#compiled-settings")).to_contain_text('"block_size": "16384"')

    page.goto(f"{web.url}/")
    page.check(f"input[name=runs][value='{built.pk}']")
    page.check(f"input[name=runs][value='{other.pk}']")
    page.click("button:has-text('Compare ticked runs')")
    block_size = page.locator("#diff-table tr", has_text="compiled.block_size")
    expect(block_size).to_contain_text("16384")
    expect(block_size).to_contain_text("8192")
    expect(page.locator("#diff-table")).to_contain_text("build.patches.buffer-partitions-256")
