"""A duet from the Schedule form to its answer, in a real browser against the real stack.

uvicorn, the control worker, one agent running real PostgreSQL and pgbench, Redis:
the Schedule form's duet option (its line saying what it does, the estimate halving),
two configs x 3 rounds started as duets, each round's two runs measured at the same
time, the experiment page saying "duet" and how long each point's two sides ran
together, and the comparison of the cells answering
from the rounds' simultaneous windows ("duet over 3 rounds").
"""

import pytest
from playwright.sync_api import expect

from runs.models import Experiment, Result, Run
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
    # Each point's two sides ran together for most of their 2 s: the barrier, then each
    # side's launch (at most 0.7 s apart on a loaded machine, tests/agents/test_duet.py).
    together = page.locator("#duet-windows [data-together]")
    expect(together).to_contain_text("over 3 points measured on both sides")
    median = float(together.locator("strong").inner_text().rstrip(" %"))
    assert 60.0 <= median <= 100.0, together.inner_text()
    for result in Result.objects.filter(run__experiment=experiment):
        assert result.started_epoch is not None and result.ended_epoch is not None
        assert result.ended_epoch - result.started_epoch >= 2.0, "the window lies within"
    page.click("button:has-text('Compare the cells')")
    design = page.locator("#compare-table tbody tr:not(.baseline) [data-col$='-design']")
    expect(design.first).to_have_text("duet over 3 rounds")
