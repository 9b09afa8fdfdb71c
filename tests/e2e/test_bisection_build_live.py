"""A bisection while its step's build compiles, and its cancel, through the real lab.

The repository is a small release-shaped tree (tests/source_builds.py) whose make compiles
its C files one at a time, a second apart. A real agent builds step 0's first round; the
bisection page, in Chromium, shows the build's progress (make's files compiled, as the
agent reports them) changing without a reload, beside the experiment page's. Cancel ends
the bisection, its open step as cancelled and every run of it cancelled, and the agent
stops the build: no make of it is left.
"""

import subprocess
from pathlib import Path

import psutil
import pytest
from playwright.sync_api import expect

from runs.bisection.services import bisection_start
from runs.models import Bisection, BisectionStep, Host, Run, RunEvent
from tests.e2e.conftest import PASSWORD, Web, sign_in
from tests.integration.conftest import running_lab
from tests.runs.factories import ConfigProfileFactory, UserFactory, WorkloadFactory
from tests.source_builds import SMALL_FLAGS, fake_release
from tests.waiting import wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(400)]

FILES = 60
# The pause before each file: an argument no other program on the machine runs with, so
# the test finds this build's programs by it.
PAUSE = "1.0137"
SLOW_MAKEFILE = f"""include Makefile.global
all:
\tfor f in src/backend/*.c; do sleep {PAUSE}; cc -c $$f -o $${{f%.c}}.o; done
install:
\tsh ./install.sh $(prefix) "$(CFLAGS)"
"""


def slow_repository(directory: Path) -> Path:
    """The fake release with FILES C files and the slow make, tagged `base`, then a commit
    tagged `head`."""
    tree = fake_release(directory, "postgres")
    (tree / "GNUmakefile").write_text(SLOW_MAKEFILE)
    for number in range(FILES):
        (tree / "src" / "backend" / f"f{number}.c").write_text(f"int f{number}(void);\n")
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tree)]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "base"],
                 ["tag", "base"], ["commit", "-q", "--allow-empty", "-m", "head"],
                 ["tag", "head"]):  # fmt: skip
        subprocess.run([*git, *args], check=True)
    return tree


def slow_build_programs() -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter(["cmdline"]):
        if (process.info["cmdline"] or [])[-1:] == [PAUSE]:
            found.append(process)
    return found


@pytest.fixture
def live_stack(transactional_db, tmp_path):
    repository = slow_repository(Path(tmp_path) / "sources")
    agent_args = ["--allow-source-builds", "--build-source", str(repository)]
    with running_lab(tmp_path, agent_args=agent_args) as lab:
        web = Web(tmp_path, {"REDIS_URL": lab.env["REDIS_URL"]})
        try:
            yield lab, web, repository
        finally:
            web.close()


def test_a_building_step_shows_its_progress_live_and_a_cancel_ends_it(live_stack, page):
    lab, web, repository = live_stack
    owner = UserFactory(password=PASSWORD)
    bisection = bisection_start(
        owner,
        {
            "name": "slow build",
            "host": Host.objects.get(name=lab.name),
            "repository": str(repository),
            "good_ref": "base",
            "bad_ref": "head",
            "version": "15",
            "configure_flags": SMALL_FLAGS,
            "cflags": "",
            "config_profile": ConfigProfileFactory(),
            "workload": WorkloadFactory(),
            "clients": 1,
            "duration_s": 2,
            "repeats": 3,
            "max_rounds": 6,
            "margin_pct": 10.0,
        },
    )
    sign_in(page, web.url, owner.username)
    page.goto(f"{web.url}/bisections/{bisection.pk}")
    building = page.locator("#bisection-steps tr[data-step='0'] [data-running-steps] li")
    expect(building).to_contain_text(f"/{FILES + 1} files)", timeout=120_000)
    seen = building.inner_text()
    # Live: the next files compiled show up without a reload.
    expect(building).not_to_have_text(seen, timeout=20_000)
    expect(building).to_contain_text("compiling (")
    experiment = bisection.steps.get().experiment
    page.goto(f"{web.url}/experiments/{experiment.pk}")
    expect(page.locator("#experiment-now li")).to_contain_text("compiling (")

    page.goto(f"{web.url}/bisections/{bisection.pk}")
    building_run = Run.objects.get(experiment=experiment, status=Run.Status.RUNNING)
    page.click("button[name=cancel]")
    expect(page.locator("#bisection-steps tr[data-step='0']")).to_have_attribute(
        "data-outcome", "cancelled"
    )
    bisection.refresh_from_db()
    assert bisection.status == Bisection.Status.CANCELLED
    assert bisection.steps.get().outcome == BisectionStep.Outcome.CANCELLED
    statuses = set(experiment.runs.values_list("status", flat=True))
    assert statuses == {Run.Status.CANCELLED}, statuses

    def agent_ended_the_job() -> bool:
        return RunEvent.objects.filter(run=building_run, type="result").exists()

    wait_for(agent_ended_the_job, 60, "the agent to end the cancelled build", lab.logs, 1.0)
    assert slow_build_programs() == [], "the cancelled build's programs were left running"

    def experiment_ended() -> str:
        experiment.refresh_from_db()
        return experiment.adaptive_state.get("ended", "")

    ended = wait_for(experiment_ended, 30, "the step's experiment to end", lab.logs, 1.0)
    assert ended == "a run was cancelled"
