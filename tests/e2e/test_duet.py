"""A duet from the Schedule form to its answer, in a real browser against the real stack.

uvicorn, the control worker, one agent running real PostgreSQL and pgbench, Redis:
the Schedule form's duet option (its line saying what it does, the estimate halving),
two configs x 3 rounds started as duets, each round's two runs measured at the same
time, the experiment page saying "duet", and the comparison of the cells answering
from the rounds' simultaneous windows ("duet over 3 rounds").
"""

import pytest
from playwright.sync_api import expect

from runs.models import Experiment, Run
from runs.presets import load_presets
from tests.e2e.conftest import PASSWORD, sign_in
from tests.runs.factories import ConfigProfileFactory, UserFactory

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(360)]


def test_a_duet_runs_each_round_s_two_cells_at_once_and_answers_as_a_duet(stack, page):
    lab, web = stack
    load_presets()
    ConfigProfileFactory(name="small buffers", settings={"shared_buffers": "64MB"})
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)

    page.goto(f"{web.url}/experiments/new?preset=smoke")
    expect(page.locator(f"input[data-host='{lab.name}']")).to_be_checked()
    page.check("label:has-text('small buffers') input")
    page.fill("input[name=clients]", "1")
    page.fill("input[name=duration_s]", "2")
    page.fill("input[name=repeats]", "3")
    page.select_option("select[name=execution]", "rounds")
    expect(page.locator("#field-duet")).to_contain_text("at the same time on one host")
    apart = page.locator("[data-estimate=time]").inner_text()
    page.check("input[name=duet]")
    expect(page.locator("[data-estimate=runs]")).to_have_text("6")
    expect(page.locator("[data-estimate=time]")).not_to_have_text(apart)
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("6 run(s) queued")
    expect(page.locator("[data-duet]")).to_contain_text("duet: both cells at once")

    experiment = Experiment.objects.get()
    assert experiment.duet
    runs = list(Run.objects.filter(experiment=experiment).order_by("round", "cell"))
    finished = [lab.wait_terminal(run.pk, timeout=150) for run in runs]
    assert [run.status for run in finished] == [Run.Status.SUCCEEDED] * 6, lab.logs()
    for first, second in zip(finished[::2], finished[1::2], strict=True):
        assert first.round == second.round
        assert first.started_at < second.finished_at and second.started_at < first.finished_at, (
            "a round's two cells ran at the same time"
        )

    page.reload()
    page.click("button:has-text('Compare the cells')")
    design = page.locator("#compare-table tbody tr:not(.baseline) [data-col$='-design']")
    expect(design.first).to_have_text("duet over 3 rounds")
