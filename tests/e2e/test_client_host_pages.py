"""A client host in the browser: the schedule form's live estimate, asked of the server
(runs.services.experiments.draft_estimate), counts it busy for every server host's runs,
and the live run page extends its CPU traces, found by their traces' names. The estimate
never shows an answer to a form the user has since changed."""

import re

import pytest
from playwright.sync_api import Page, Route, expect

from runs.models import HostSample, Run
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    RunFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.e2e


def test_picking_a_client_host_makes_the_estimate_the_sum_of_the_server_hosts(signed_in_page, web):
    servers = [HostFactory(name="server-a"), HostFactory(name="server-b")]
    HostFactory(name="client-c")
    PgBuildFactory(name="pg16")
    ConfigProfileFactory(name="defaults")
    WorkloadFactory(name="tpcb", scale=1)
    page = signed_in_page
    page.goto(f"{web.url}/experiments/new")
    for host in servers:
        page.check(f"input[data-host='{host.name}']")
    page.check("label:has-text('pg16') input")
    page.check("label:has-text('defaults') input")
    page.check("label:has-text('tpcb') input")
    page.fill("input[name=clients]", "1")
    page.fill("input[name=duration_s]", "600")
    answered = page.locator("#estimate[aria-busy=false]")
    expect(answered).to_be_visible()
    time = page.locator("[data-estimate=time]")
    expect(time).to_have_text(re.compile(r"^≈ \d+ min \d+ s$"))
    alone = time.inner_text()

    page.select_option("select[name=client_host]", label="client-c")

    expect(answered).to_be_visible()
    expect(page.locator("[data-estimate=runs]")).to_have_text("2")
    expect(time).not_to_have_text(alone)
    with_client = time.inner_text()
    assert abs(seconds(with_client) - 2 * seconds(alone)) <= 1, (alone, with_client)


def seconds(shown: str) -> int:
    """`≈ 10 min 31 s` -> 631."""
    minutes, _, rest = shown.removeprefix("≈ ").partition(" min ")
    return int(minutes) * 60 + int(rest.removesuffix(" s"))


def test_an_answer_to_a_form_changed_since_is_not_shown(signed_in_page: Page, web) -> None:
    """The estimate's request is sent a debounce after the last change; an answer that
    arrives after a newer change (its request not sent yet) leaves the estimate busy."""
    HostFactory(name="server-a")
    PgBuildFactory(name="pg16")
    ConfigProfileFactory(name="defaults")
    WorkloadFactory(name="tpcb", scale=1)
    page = signed_in_page
    page.clock.install()
    page.goto(f"{web.url}/experiments/new")
    # Paused: an installed clock still flows in real time, and on a loaded host the
    # debounce of a change could then pass before the test has let the held answer go.
    page.clock.pause_at(page.evaluate("Date.now()") / 1000 + 1)
    for label in ("server-a", "pg16", "defaults", "tpcb"):
        page.check(f"label:has-text('{label}') input")
    page.fill("input[name=duration_s]", "60")
    page.fill("input[name=repeats]", "1")
    held: list[Route] = []

    def hold(route: Route) -> None:
        """The first request is held until the test lets it go; the others pass."""
        if held:
            route.continue_()
        else:
            held.append(route)

    page.route("**/schedule/estimate*", hold)
    page.fill("input[name=clients]", "1 2")
    page.clock.run_for(1000)
    page.wait_for_timeout(200)
    assert held, "the estimate for clients 1 2 was not asked"

    page.fill("input[name=clients]", "1 2 3")
    with page.expect_response("**/schedule/estimate*"):
        held[0].continue_()
    page.wait_for_timeout(200)

    expect(page.locator("#estimate")).to_have_attribute("aria-busy", "true")
    expect(page.locator("[data-estimate=points]")).not_to_have_text("2")
    page.clock.run_for(1000)
    expect(page.locator("#estimate[aria-busy=false]")).to_be_visible()
    expect(page.locator("[data-estimate=points]")).to_have_text("3")


def test_live_run_page_extends_the_client_host_cpu_traces(signed_in_page, web):
    run = RunFactory(
        status=Run.Status.RUNNING,
        client_host=HostFactory(name="client-live"),
        spec={"sweep": {"clients": [1], "repeats": 1, "duration_s": 3}},
    )
    page = signed_in_page
    page.goto(f"{web.url}/runs/{run.pk}/")
    page.wait_for_function("() => window.benchlabLive && window.benchlabLive.readyState === 1")
    for t in (1.0, 2.0):
        HostSample.objects.create(
            run=run,
            role=HostSample.Role.CLIENT,
            point=0,
            t=t,
            data={"t": t, "cpu_user": 90.0, "cpu_system": 5.0},
        )

    client_user = (
        "document.getElementById('chart-host').data"
        ".find((trace) => trace.meta.trace === 'client.cpu_user')"
    )
    page.wait_for_function(f"() => {client_user}.x.length === 2")
    assert page.evaluate(f"{client_user}.y") == [90.0, 90.0]
