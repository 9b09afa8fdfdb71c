"""A profiled experiment through the whole lab: scheduled through the API with its declared
switch, sent through Redis to a real agent worker, which profiles its real server with perf
after the measured points; the control worker stores the profile from the event stream."""

import pytest

from agents.contract.reports.profiles import parse_folded
from runs.models import Profile, Run
from tests.integration.test_lab import experiment, start

pytestmark = pytest.mark.integration


def test_a_profiled_experiment_stores_the_servers_stacks_beside_its_measured_points(api, lab):
    exp = experiment(api, lab, [{}], [2], duration_s=2, profile=True)
    assert exp["profile"] is True
    (run_id,) = start(api, exp["id"])

    run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.SUCCEEDED, lab.logs()
    assert run.spec["sweep"]["profile"] is True
    assert run.results.count() == 1
    [profile] = Profile.objects.filter(run=run)
    assert profile.error == "" and profile.clients == 2
    stacks = parse_folded(profile.folded)
    assert any("PostgresMain" in stack for stack in stacks)
    [answered] = api.get(f"/api/runs/{run_id}/profiles/").json()
    assert answered["folded"] == profile.folded
    assert [step["name"] for step in run.steps].count("pgbench_profiled") == 1
