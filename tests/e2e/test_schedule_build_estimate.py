"""The schedule form's live estimate in Chromium says what compiling a source build the
host has not built adds to the cluster setups, and that it is a guess on a host that has
built none (runs/estimates.py, frontend/schedule.js)."""

import pytest
from playwright.sync_api import expect

from tests.e2e.test_host_noise import page_errors
from tests.runs.factories import (
    ConfigProfileFactory,
    HostFactory,
    PgBuildFactory,
    WorkloadFactory,
)
from tests.runs.test_estimates_builds import DEFINITION

pytestmark = pytest.mark.e2e


def test_the_form_says_the_compile_a_new_source_build_adds(signed_in_page, web):
    host = HostFactory(name="builder-vm", facts={"cpu": {"threads": 2}})
    PgBuildFactory(name="15.18 from source", version="15", source="build", definition=DEFINITION)
    ConfigProfileFactory(name="defaults")
    WorkloadFactory(name="tpcb", scale=1)
    page = signed_in_page
    errors = page_errors(page)
    page.goto(f"{web.url}/experiments/new")

    page.check(f"input[data-host='{host.name}']")
    page.check("label:has-text('15.18 from source') input")
    page.check("label:has-text('defaults') input")
    page.check("label:has-text('tpcb') input")
    page.fill("input[name=clients]", "1")
    page.fill("input[name=duration_s]", "10")

    expect(page.locator("[data-estimate=setups]")).to_contain_text(
        "of which ≈ 3 min 30 s compiling source builds (guessed: no build on the host yet)"
    )
    assert errors == []
