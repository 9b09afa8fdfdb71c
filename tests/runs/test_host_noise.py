"""The host's noise on the lab's side: each point's steal and foreign CPU stored as sent."""

import pytest

from runs import services
from runs.models import Result
from tests.runs import events
from tests.runs.factories import RunFactory

pytestmark = pytest.mark.django_db

NOISE = {
    "window_s": 2.01,
    "cpus": 2,
    "cpu_steal_percent": 3.5,
    "host_busy_cpu_s": 3.2,
    "job_cpu_s": 2.1,
    "job_cpu_source": "cgroup",
    "agent_cpu_s": 0.02,
    "foreign_cpu_s": 1.08,
    "foreign_cpu_percent": 26.87,
}


def test_a_points_noise_is_stored_with_its_result():
    run = RunFactory()
    point = {**events.point(0), "noise": NOISE}

    services.run_record_event(events.run_event(run, 1, "point", point))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent) == (3.5, 26.87)
    assert result.noise == NOISE


def test_a_point_of_an_agent_before_noise_stores_none():
    run = RunFactory()

    services.run_record_event(events.run_event(run, 1, "point", events.point(0)))

    result = Result.objects.get(run=run, index=0)
    assert (result.cpu_steal_percent, result.foreign_cpu_percent, result.noise) == (None, None, {})
