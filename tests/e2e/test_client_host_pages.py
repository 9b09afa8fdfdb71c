"""A client host in the browser: the schedule form's live estimate, asked of the server
(runs.services.experiments.draft_estimate), counts it busy for every server host's runs,
and the live run page extends its CPU traces, found by their traces' names."""

import pytest
from playwright.sync_api import expect

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
    alone = page.locator("[data-estimate=time]").inner_text()

    page.select_option("select[name=client_host]", label="client-c")

    expect(answered).to_be_visible()
    expect(page.locator("[data-estimate=runs]")).to_have_text("2")
    with_client = page.locator("[data-estimate=time]").inner_text()
    assert abs(seconds(with_client) - 2 * seconds(alone)) <= 1, (alone, with_client)


def seconds(shown: str) -> int:
    """`≈ 10 min 31 s` -> 631."""
    minutes, _, rest = shown.removeprefix("≈ ").partition(" min ")
    return int(minutes) * 60 + int(rest.removesuffix(" s"))


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
