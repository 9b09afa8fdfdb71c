"""A host's noise in the browser: the host page draws its canaries with the usual band and
lists its points' steal and foreign CPU; the schedule form says, per chosen host, how many
rounds an effect needs in each design."""

from datetime import UTC, datetime, timedelta

import pytest
from playwright.sync_api import expect

from runs.models import HostCanary, Run
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    ResultFactory,
    RunFactory,
    WorkloadFactory,
)
from tests.runs.noise_data import rounds_experiment

pytestmark = pytest.mark.e2e


def page_errors(page) -> list[str]:
    """What the page's scripts throw or the Content-Security-Policy refuses, as it happens."""
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on(
        "console",
        lambda message: (
            errors.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    return errors


def test_the_host_page_draws_its_canaries_and_lists_its_points_noise(signed_in_page, web):
    host = HostFactory(name="noisy-vm")
    start = datetime(2026, 11, 1, tzinfo=UTC)
    for number in range(8):
        HostCanary.objects.create(
            host=host,
            at=start + timedelta(minutes=number),
            cpu_loop_ns=40.0 + number % 2,
            fsync_ms=2.0,
            fsync_max_ms=4.0,
            memory_gbps=6.0 - 0.1 * (number % 2),
        )
    HostCanary.objects.create(
        host=host,
        at=start + timedelta(hours=1),
        cpu_loop_ns=55.0,
        fsync_ms=2.0,
        fsync_max_ms=4.0,
        memory_gbps=5.9,
        outside_usual=True,
        detail="CPU loop 55 ns/iteration, usual 40.5 ns",
    )
    run = RunFactory(host=host, status=Run.Status.SUCCEEDED)
    ResultFactory(run=run, index=0, cpu_steal_percent=4.2, foreign_cpu_percent=31.5)
    page = signed_in_page
    errors = page_errors(page)

    page.goto(f"{web.url}/hosts/{host.pk}/")

    chart = page.locator("#host-noise [data-figure=fig-host-canary]")
    expect(chart.locator(".main-svg").first).to_be_visible()
    drawn = chart.evaluate(
        "el => ({traces: el.data.map(t => t.y.length), bands: el.layout.shapes.length})"
    )
    assert drawn == {"traces": [9, 1, 9, 1, 9, 1], "bands": 3}
    points = page.locator("#host-noise table[data-noise=points] tbody tr")
    expect(points).to_have_count(1)
    expect(points.first).to_contain_text("4.2 %")
    expect(points.first).to_contain_text("31.5 %")
    expect(page.locator("[data-noise=cpu-band]")).to_contain_text("ns per iteration")
    expect(page.locator("[data-noise=memory-band]")).to_contain_text("GB/s, usually")
    assert errors == []


def test_the_schedule_form_says_the_rounds_each_design_needs_on_the_chosen_host(
    signed_in_page, web
):
    measured, fresh = HostFactory(name="measured-vm"), HostFactory(name="fresh-vm")
    rounds_experiment(measured)
    PgBuildFactory(name="pg16")
    ConfigProfileFactory(name="defaults")
    WorkloadFactory(name="tpcb", scale=1)
    page = signed_in_page
    errors = page_errors(page)
    page.goto(f"{web.url}/experiments/new")

    page.check(f"input[data-host='{measured.name}']")
    page.check(f"input[data-host='{fresh.name}']")

    # The rounds' spread (tests/runs/noise_data.py): a round's log ratio 0.8 % paired, 62 %
    # unpaired (the host's speed moved a lot between rounds), a round 3 min.
    row = page.locator("#rounds-needed tr[data-rounds-host='measured-vm']")
    expect(row.locator("td[data-design=paired]")).to_have_text("3 ≈ 9 min")
    expect(row.locator("td[data-design=unpaired]")).to_have_text("more than 1000")
    expect(row.locator("td[data-design=duet]")).to_have_text("—")
    expect(page.locator("#rounds-needed tr[data-rounds-host='fresh-vm']")).to_contain_text(
        "no experiment in rounds on this host yet"
    )

    page.fill("#rounds-effect", "50")

    expect(row.locator("td[data-design=unpaired]")).to_have_text("20 ≈ 1 h 00 min")
    expect(row.locator("td[data-design=paired]")).to_have_text("3 ≈ 9 min")
    assert errors == []
