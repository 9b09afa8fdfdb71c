"""The schedule form's live estimate counts a client host busy for every server host's runs
(the same rule as runs.services.experiments.experiment_estimate)."""

import pytest
from playwright.sync_api import expect

from tests.runs.factories import ConfigProfileFactory, HostFactory, PgBuildFactory, WorkloadFactory

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
    alone = page.locator("[data-estimate=time]").inner_text()

    page.select_option("select[name=client_host]", label="client-c")

    expect(page.locator("[data-estimate=runs]")).to_have_text("2")
    with_client = page.locator("[data-estimate=time]").inner_text()
    assert abs(seconds(with_client) - 2 * seconds(alone)) <= 1, (alone, with_client)


def seconds(shown: str) -> int:
    """`≈ 10 min 31 s` -> 631."""
    minutes, _, rest = shown.removeprefix("≈ ").partition(" min ")
    return int(minutes) * 60 + int(rest.removesuffix(" s"))
