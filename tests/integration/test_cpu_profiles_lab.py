"""An experiment with a CPU profile through the whole lab: scheduled through the API with
its declared switch, sent through Redis to a real agent worker, which records its real
server's CPU profile with perf after the measured points; the control worker stores the
CPU profile from the event stream."""

import pytest

from agents.contract.reports.cpu_profiles import parse_folded
from runs.models import CpuProfile, Run
from tests.integration.test_lab import experiment, start

pytestmark = pytest.mark.integration


def test_a_cpu_profile_stores_the_servers_stacks_beside_the_measured_points(api, lab):
    exp = experiment(api, lab, [{}], [2], duration_s=2, cpu_profile=True)
    assert exp["cpu_profile"] is True
    (run_id,) = start(api, exp["id"])

    run = lab.wait_terminal(run_id)

    assert run.status == Run.Status.SUCCEEDED, lab.logs()
    assert run.spec["sweep"]["cpu_profile"] is True
    assert run.results.count() == 1
    [cpu_profile] = CpuProfile.objects.filter(run=run)
    assert cpu_profile.error == "" and cpu_profile.clients == 2
    stacks = parse_folded(cpu_profile.folded)
    assert any("PostgresMain" in stack for stack in stacks)
    [answered] = api.get(f"/api/runs/{run_id}/cpu-profiles/").json()
    assert answered["folded"] == cpu_profile.folded
    assert [step["name"] for step in run.steps].count("pgbench_cpu_profile") == 1
