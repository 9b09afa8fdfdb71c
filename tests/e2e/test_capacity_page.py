"""A comparison of capacities in a real browser against the real stack: set up from the
Schedule form's capacity panel with two workloads (select-only -M simple, the baseline,
and -M prepared), each probe measured by a real agent with pgbench -R and its logged
latencies' histogram, each round (a probe of both cells) queued by the real control
worker, the page live while it runs, and both curves, both answers, the ratio's verdict
and the probes once it has ended by itself.

Select-only at scale 1 on one client, probes of 3 s: the lowest rate (200 tps) holds a
p99 within 100 ms on any machine, the highest (200,000 tps) cannot be reached, and a
budget of three probes a cell ends each search after one probe between them.
"""

import re

import pytest
from playwright.sync_api import expect

from runs.models import Experiment, PgBuild, Run, Workload
from tests.e2e.conftest import PASSWORD, sign_in
from tests.runs.factories import ConfigProfileFactory, UserFactory
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(600)]


def test_a_capacity_search_from_the_form_ends_with_its_curve_and_answer(stack, page, tmp_path):
    lab, web = stack
    PgBuild.objects.create(name="pg16", version="16", source="prebuilt")
    ConfigProfileFactory(name="defaults", settings={})
    for name, mode in (("select-only", "simple"), ("select-only prepared", "prepared")):
        scripts = [{"builtin": "select-only", "weight": 1}]
        Workload.objects.create(name=name, scale=1, scripts=scripts, query_mode=mode)
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)

    page.goto(f"{web.url}/experiments/new")
    page.fill("input[name=name]", "capacity")
    page.check(f"input[data-host='{lab.name}']")
    page.check("label:has-text('pg16') input")
    page.check("label:has-text('defaults') input")
    page.check("label:has-text('select-only') input >> nth=0")
    page.check("label:has-text('select-only prepared') input")
    page.fill("input[name=clients]", "1")
    page.fill("input[name=duration_s]", "3")
    page.fill("input[name=repeats]", "1")
    page.check("input[name=capacity]")
    page.fill("input[name=capacity_limit_ms]", "100")
    page.fill("input[name=capacity_low_tps]", "200")
    page.fill("input[name=capacity_high_tps]", "200000")
    page.fill("input[name=capacity_probes]", "3")
    # A budget of 3: the search is expected to take all of them (no search on the host yet).
    expect(page.locator("[data-estimate=time]")).to_contain_text("(about 3 probes), at most")
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("2 run(s) queued")
    expect(page.locator("[data-capacity-objective]")).to_contain_text("p99 <= 100 ms")
    expect(page.locator("#capacity-state")).to_contain_text("Running")
    expect(page.locator("#capacity[data-reload-s]")).to_have_count(1)

    experiment = Experiment.objects.get()

    def ended() -> bool:
        experiment.refresh_from_db()
        return bool(experiment.capacity_state.get("ended"))

    wait_for(ended, 600, "the capacity search to end", lab.logs, interval=3)
    runs = list(experiment.runs.order_by("position"))
    assert [run.status for run in runs] == [Run.Status.SUCCEEDED] * 6, lab.logs()
    for cell in (0, 1):
        probes = [run for run in runs if run.cell == cell]
        rates = [run.spec["workload"]["rate_tps"] for run in probes]
        assert rates[:2] == [200.0, 200000.0]
        # The third where the latency curve reaches the limit, short of the throughput
        # the highest rate reached (runs/inference/capacity_search.py `_split`).
        throughput = probes[1].results.get().tps
        assert throughput is not None and 200.0 < rates[2] < throughput, (rates, throughput)
    # Interleaved: each round holds one probe of each cell.
    assert [run.round for run in runs] == [1, 1, 2, 2, 3, 3]
    first = runs[0].results.get()
    assert first.percentiles["histogram"] and first.percentiles["sampled_transactions"] >= 500

    # The page reloads itself once the search has ended (it reloads while running).
    expect(page.locator("#capacity-state")).to_contain_text(
        "Ended: budget of probes spent", timeout=30_000
    )
    expect(page.locator("#capacity[data-reload-s]")).to_have_count(0)
    compared = page.locator("#capacity-compared tbody tr")
    expect(compared).to_have_count(2)
    capacity = re.compile(r"([\d,]+ tps \[[\d,]+, [\d,]+\]|at least [\d,]+ tps) at p99 <= 100 ms")
    for row in (compared.first, compared.nth(1)):
        expect(row.locator("td").nth(1)).to_have_text(capacity)
    expect(compared.first).to_contain_text("baseline")
    verdict = compared.nth(1).locator("[data-capacity-verdict]")
    expect(verdict).to_have_attribute(
        "data-capacity-verdict", re.compile("^(faster|slower|same|undecided|no ratio)$")
    )
    expect(verdict).to_have_text(
        re.compile(r"^(faster by|slower by|same within|undecided:|no ratio: this cell)")
    )
    assert verdict.inner_text() in experiment.capacity_state["answer"]
    expect(page.locator("#capacity-closed-loop")).to_contain_text("Closed-loop verdict")
    for cell in (0, 1):
        probes = page.locator(f"#capacity-probes-{cell} tbody tr")
        expect(probes).to_have_count(3)
        expect(probes.first).to_have_attribute("data-decision", "pass")
        expect(probes.nth(1)).to_have_attribute("data-decision", re.compile("^(fail|undecided)$"))
        expect(probes.nth(1)).to_contain_text("rate not reached")
    first_probe = page.locator("#capacity-probes-0 a:has-text('probe 1')")
    href = first_probe.get_attribute("href") or ""
    assert re.search(r"/runs/\d+/$", href), href
    first_probe.click()
    expect(page).to_have_url(re.compile(re.escape(href) + "$"))
    page.go_back()
    for cell in (0, 1):
        chart = page.locator(f"[data-figure=fig-capacity-{cell}] .main-svg").first
        expect(chart).to_be_visible()
        expect(page.locator(f"[data-figure=fig-capacity-{cell}] .legendtext")).to_contain_text(
            ["p50", "p95", "p99", "p99.9", "objective: p99 <= 100 ms"]
        )
    page.screenshot(path=str(tmp_path / "capacity-compared.png"), full_page=True)
