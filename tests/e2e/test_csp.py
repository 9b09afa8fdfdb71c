"""The pages under the lab's Content-Security-Policy in a real browser: charts drawn,
filters submitted, the API docs drawn from the lab's own files, no violation reported and
no request to another host."""

from urllib.parse import urlsplit

import pytest
from playwright.sync_api import expect

from tests.runs.pages.conftest import finished_run

pytestmark = pytest.mark.e2e


def test_the_pages_work_under_the_content_security_policy(signed_in_page, web):
    page = signed_in_page
    violations: list[str] = []
    page.on(
        "console",
        lambda message: (
            violations.append(message.text) if "Content Security Policy" in message.text else None
        ),
    )
    page.on("pageerror", lambda error: violations.append(str(error)))
    lab_host = urlsplit(web.url).netloc
    elsewhere: list[str] = []
    page.on(
        "request",
        lambda request: (
            elsewhere.append(request.url)
            if urlsplit(request.url).scheme in ("http", "https")
            and urlsplit(request.url).netloc != lab_host
            else None
        ),
    )
    run = finished_run([(1, 1, 1234.5678, 0.8101), (2, 1, 2345.25, 0.8529)])

    page.goto(f"{web.url}/runs/{run.pk}/")
    page.wait_for_function("() => document.documentElement?.dataset.chartsReady === '1'")
    page.goto(f"{web.url}/")
    page.select_option("select[name=status]", "succeeded")
    expect(page).to_have_url(f"{web.url}/?status=succeeded&host=")
    page.goto(f"{web.url}/api/docs/")
    expect(page.locator(".swagger-ui .info .title")).to_contain_text("BenchLab API")

    assert violations == []
    assert elsewhere == []
