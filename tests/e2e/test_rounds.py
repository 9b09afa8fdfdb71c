"""Rounds from the form to a verdict, in a real browser against the real stack.

uvicorn, the control worker, one agent running real PostgreSQL and pgbench,
Redis: schedule 2 configs x 3 repeats in rounds from the form with a given
seed, see the recorded order (round, position, cell) on the experiment page,
let the six cluster lifecycles run in that order, compare the two cells and
read a confidence interval and a verdict word.
"""

import re

import pytest
from playwright.sync_api import expect

from runs.agentlink.execution import execution_plan
from runs.models import Experiment, Run
from runs.presets import load_presets
from tests.e2e.conftest import PASSWORD, Web, sign_in
from tests.runs.factories import ConfigProfileFactory, UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(360)]

SEED = 7
# A direction is written with its interval and the interval's confidence.
VERDICTS = re.compile(
    r"^((faster|slower|better|worse) by \d+\.\d % \[[+-]\d+\.\d, [+-]\d+\.\d\]"
    r" \(\d+(\.\d+)? % interval\)|same within ±5 %|undecided: .+)$"
)
INTERVAL = re.compile(r"^[+-]\d+\.\d % \[[+-]\d+\.\d, [+-]\d+\.\d\]")


def schedule_rounds(page, web: Web, host_name: str) -> None:
    """The smoke preset plus a second profile, one client count, 2 s points, 3 rounds."""
    page.goto(f"{web.url}/experiments/new?preset=smoke")
    expect(page.locator(f"input[data-host='{host_name}']")).to_be_checked()
    page.check("label:has-text('small buffers') input")
    page.fill("input[name=clients]", "1")
    page.fill("input[name=duration_s]", "2")
    page.fill("input[name=repeats]", "3")
    page.select_option("select[name=execution]", "rounds")
    page.fill("input[name=seed]", str(SEED))
    expect(page.locator("[data-estimate=runs]")).to_have_text("6")
    expect(page.locator("[data-estimate=points]")).to_have_text("6")
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("6 run(s) queued")


def shown_order(page) -> list[tuple[int, int, int]]:
    rows = page.locator("#run-order tbody tr")
    expect(rows).to_have_count(6)
    return [
        tuple(int(row.get_attribute(f"data-{key}")) for key in ("position", "cell", "round"))
        for row in rows.all()
    ]


def test_rounds_run_in_the_recorded_order_and_compare_as_cells(stack, page):
    lab, web = stack
    load_presets()
    ConfigProfileFactory(name="small buffers", settings={"shared_buffers": "64MB"})
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)

    schedule_rounds(page, web, lab.name)

    experiment = Experiment.objects.get()
    planned = [(s.position, s.cell, s.round) for s in execution_plan(2, 3, "rounds", SEED)]
    expect(page.locator("[data-seed]")).to_have_text(str(SEED))
    assert shown_order(page) == planned

    runs = list(Run.objects.filter(experiment=experiment).order_by("position"))
    finished = [lab.wait_terminal(run.pk, timeout=120) for run in runs]
    assert [run.status for run in finished] == [Run.Status.SUCCEEDED] * 6, lab.logs()
    started = [run.started_at for run in finished]
    assert started == sorted(started), "the agent ran the rounds out of the recorded order"

    page.reload()
    page.click("button:has-text('Compare the cells')")
    expect(page).to_have_url(re.compile(r"/comparisons/\d+/$"))
    # One row per cell, each with the three rounds as its repeats.
    expect(page.locator("#compare-table tbody tr [data-col=n]")).to_have_text(["3", "3"])
    compared = page.locator("#compare-table tbody tr:not(.baseline)")
    expect(compared.locator(".diff-ci").first).to_have_text(INTERVAL)
    expect(compared.locator(".verdict").first).to_have_text(VERDICTS)
