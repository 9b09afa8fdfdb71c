"""A bisection names the planted regression, through the real lab.

The repository is PostgreSQL 15.18 as released with 8 commits on top (tests/bisect_repo.py);
commit 5 adds a busy loop to every simple-protocol statement. Started from the form in
Chromium; the agent builds each commit in its kept tree (the first run on a machine
compiles 15.18 at -O0 once, a few minutes; later runs find every build in its cache), the
control worker measures each against the good build in adaptive rounds of 2 s
select-only points, and the page shows the steps while it runs and the culprit at the end.
The control worker is killed once mid-bisection and started again: no round is queued
or measured twice.

BENCHLAB_BISECT_CLONE=COMMITS,GRAMMAR_AT bisects a repository shaped as a real clone
instead (tests/bisect_repo.py `clone_shaped_repository`: no generated parser or scanner,
so every build runs bison and flex; commit GRAMMAR_AT changes gram.y so that parsing a
SELECT spins EIGHT_SPIN times).

BENCHLAB_BISECT_SHAPE=COMMITS,REGRESSION_AT,SPIN[,BROKEN_AT] runs the same test on another
repository (docs/benchmarks.md: 64 commits, one of which does not compile), and
BENCHLAB_BISECT_CELL=DURATION_S,MAX_ROUNDS,MARGIN_PCT[,REPEATS[,CLIENTS]] measures it with
longer points and more rounds, the first look after REPEATS rounds, at CLIENTS clients (a
5 % regression needs them: one client's tps is bimodal on a 2-CPU VM, docs/benchmarks.md).
BENCHLAB_BISECT_DUET=1 ticks the form's duet box: each step's rounds run the commit and the
good build at once, each on its half of the CPUs (agents/duet.py).
"""

import json
import math
import os

import pytest
from playwright.sync_api import expect

from runs.models import Bisection, BisectionStep, Run, Workload
from tests.bisect_repo import (
    EIGHT_COMMITS,
    EIGHT_REGRESSION_AT,
    EIGHT_SPIN,
    bisect_repository,
    clone_shaped_repository,
    commit_subjects,
)
from tests.e2e.conftest import PASSWORD, Web, sign_in
from tests.integration.conftest import running_lab
from tests.integration.faults import assert_measured_once
from tests.runs.factories import ConfigProfileFactory, UserFactory
from tests.source_builds import SMALL_FLAGS, UNOPTIMISED, sources_dir
from tests.waiting import wait_for

SHAPE = os.environ.get(
    "BENCHLAB_BISECT_SHAPE", f"{EIGHT_COMMITS},{EIGHT_REGRESSION_AT},{EIGHT_SPIN}"
)
COMMITS, REGRESSION_AT, SPIN, *BROKEN = (int(number) for number in SHAPE.split(","))
BROKEN_AT = BROKEN[0] if BROKEN else None
CLONE = os.environ.get("BENCHLAB_BISECT_CLONE")
if CLONE:
    COMMITS, REGRESSION_AT = (int(number) for number in CLONE.split(","))
    SPIN, BROKEN_AT = EIGHT_SPIN, None
CELL = os.environ.get("BENCHLAB_BISECT_CELL", "2,6,5").split(",")
DUET = os.environ.get("BENCHLAB_BISECT_DUET") == "1"
# REPEATS and CLIENTS default to 3 and 1.
DURATION_S, MAX_ROUNDS, MARGIN_PCT, REPEATS, CLIENTS = CELL + ["3", "1"][len(CELL) - 3 :]
# A run is about 8 s besides its point; the default cell's budget scales with its rounds.
SLOWER = max(1.0, (int(DURATION_S) + 8) * int(MAX_ROUNDS) / ((2 + 8) * 6))

# The waits last minutes: polling the database 20 times a second would take CPU from the
# points being measured.
POLL_S = 1.0

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(1500 * SLOWER)]


@pytest.fixture
def bisect_stack(transactional_db, tmp_path):
    repository = (
        clone_shaped_repository(sources_dir(), SPIN, COMMITS, REGRESSION_AT)
        if CLONE
        else bisect_repository(sources_dir(), COMMITS, REGRESSION_AT, SPIN, BROKEN_AT)
    )
    agent_args = ["--allow-source-builds", "--build-source", str(repository)]
    with running_lab(tmp_path, agent_args=agent_args) as lab:
        web = Web(tmp_path, {"REDIS_URL": lab.env["REDIS_URL"]})
        try:
            yield lab, web, repository
        finally:
            web.close()


def start_from_the_form(page, web: Web, host_name: str, repository: str) -> None:
    page.goto(f"{web.url}/bisections/new")
    page.fill("input[name=name]", "planted spin")
    page.select_option("select[name=host]", label=host_name)
    page.fill("input[name=repository]", repository)
    page.fill("input[name=good_ref]", "base")
    page.fill("input[name=bad_ref]", "head")
    page.fill("input[name=version]", "15")
    page.fill("textarea[name=configure_flags]", json.dumps(SMALL_FLAGS))
    page.fill("input[name=cflags]", UNOPTIMISED)
    page.select_option("select[name=config_profile]", label="defaults")
    page.select_option("select[name=workload]", label="select-only")
    page.fill("input[name=clients]", CLIENTS)
    page.fill("input[name=duration_s]", DURATION_S)
    page.fill("input[name=repeats]", REPEATS)
    page.fill("input[name=max_rounds]", MAX_ROUNDS)
    page.fill("input[name=margin_pct]", MARGIN_PCT)
    if DUET:
        page.check("input[name=duet]")
    page.click("button[name=start]")
    expect(page.locator(".messages")).to_contain_text("step 0 queued")


def test_a_bisection_names_the_commit_that_planted_the_regression(bisect_stack, page, tmp_path):
    lab, web, repository = bisect_stack
    ConfigProfileFactory(name="defaults", settings={})
    Workload.objects.create(
        name="select-only", scale=1, scripts=[{"builtin": "select-only", "weight": 1}]
    )
    sign_in(page, web.url, UserFactory(password=PASSWORD).username)
    start_from_the_form(page, web, lab.name, str(repository))
    bisection = Bisection.objects.get()
    expect(page.locator("#bisection-steps tr[data-step='0']")).to_have_attribute(
        "data-outcome", "measuring"
    )

    def measured_a_commit() -> bool:
        return bisection.steps.filter(number=1).exists()

    wait_for(measured_a_commit, 900 * SLOWER, "step 0 to end", lab.logs, POLL_S)
    page.reload()  # while it runs: the range, step 0's verdict, what is left
    expect(page.locator("#bisection-steps tr[data-step='0']")).to_have_attribute(
        "data-outcome", "bad"
    )
    expect(page.locator("#range")).to_contain_text(f"{COMMITS} commits after the good ref")
    page.screenshot(path=str(tmp_path / "bisection-running.png"), full_page=True)
    # The control worker dies mid-bisection (step 1 measuring); the restarted one goes on.
    lab.kill_control()
    lab.start_control()

    def ended() -> bool:
        bisection.refresh_from_db()
        return bisection.status != Bisection.Status.RUNNING

    wait_for(ended, 1200 * SLOWER, "the bisection to end", lab.logs, POLL_S)
    assert bisection.status == Bisection.Status.SUCCEEDED, (bisection.error_message, lab.logs())
    culprit_sha, culprit_subject = commit_subjects(repository)[REGRESSION_AT - 1]
    steps = [
        (step.number, step.commit_index, step.outcome, step.sentence, step.note)
        for step in bisection.steps.order_by("number")
    ]
    assert bisection.commits[bisection.culprit_index]["sha"] == culprit_sha, steps
    measured = bisection.steps.exclude(number=0)
    # A bisection halves the range at each step: at most log2(n) + 2 measured steps, one
    # more with a commit that does not build.
    assert measured.count() <= math.log2(COMMITS) + 2 + (BROKEN_AT is not None)
    broken = measured.filter(commit_index=(BROKEN_AT or 0) - 1).first()
    if broken is not None:
        assert broken.outcome == BisectionStep.Outcome.SKIPPED
        assert broken.note.startswith("build_failed: source build failed at make")
    built = measured.exclude(outcome=BisectionStep.Outcome.SKIPPED)
    assert not built.filter(build_seconds__isnull=True).exists()
    runs = Run.objects.filter(experiment__bisection_step__bisection=bisection)
    assert not runs.filter(status__in=[Run.Status.QUEUED, Run.Status.RUNNING]).exists()
    measured_rounds = runs.filter(status=Run.Status.SUCCEEDED)
    rounds = list(measured_rounds.values_list("experiment", "cell", "round"))
    assert len(rounds) == len(set(rounds)), "a round was measured twice"
    assert_measured_once(lab, runs)

    page.reload()
    expect(page.locator("[data-culprit]")).to_have_text(culprit_sha)
    expect(page.locator("#culprit")).to_contain_text(culprit_subject)
    expect(page.locator("#culprit-table")).to_contain_text("slower by")
    page.screenshot(path=str(tmp_path / "bisection-ended.png"), full_page=True)
    script = page.request.get(f"{web.url}/bisections/{bisection.pk}/reproduce.sh").text()
    assert culprit_sha in script and "base64 -d" in script
