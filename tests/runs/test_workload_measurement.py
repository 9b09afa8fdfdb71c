"""A workload's measurement options (latency log, -P 1, -r): from the lab's
definition through the job spec to the pgbench command the agent builds."""

from pathlib import Path

import pytest

from agents.contract.spec.document import validate_spec
from agents.pgbench.command import Connection, reporting_args, run_argv, workload_args
from runs import services
from runs.models import Workload
from tests.runs.factories import ExperimentFactory, WorkloadFactory

pytestmark = pytest.mark.django_db

PGBENCH = Path("/usr/lib/postgresql/16/bin/pgbench")
CONNECTION = Connection(host="/tmp/benchlab-socket", port=5432)


def lab_command(spec: dict, clients: int = 2) -> list[str]:
    """The measured point's argv as the agent builds it (no transaction log arguments)."""
    normalised = validate_spec(spec)
    workload = workload_args(PGBENCH, 16, normalised, clients, clients, {})
    reporting = reporting_args(normalised["workload"], 16)
    return run_argv(workload, reporting, [], CONNECTION)


def test_a_workload_asking_for_statement_latencies_runs_pgbench_with_r(lab_redis):
    workload = WorkloadFactory(statement_latencies=True, latency_log="full", progress=True)

    (run,) = services.experiment_start(ExperimentFactory(workloads=[workload]))

    assert run.spec["workload"]["statement_latencies"] is True
    assert run.spec["workload"]["latency_log"] == "full"
    assert run.spec["workload"]["progress"] is True
    argv = lab_command(run.spec)
    assert "-r" in argv
    assert argv[argv.index("-P") + 1] == "1"


def test_a_workload_left_at_the_defaults_runs_without_p_and_r(lab_redis):
    """Its timeline comes from the sampled log: `-P 1` would cost ~3 % of select-only tps."""
    (run,) = services.experiment_start(ExperimentFactory(workloads=[WorkloadFactory()]))

    assert run.spec["workload"]["latency_log"] == "sampled"
    argv = lab_command(run.spec)
    assert "-P" not in argv and "-r" not in argv


def test_measurement_options_round_trip_through_the_api(api_client):
    payload = {
        "name": "diagnosis",
        "scripts": [{"builtin": "select-only", "weight": 1}],
        "latency_log": "aggregate",
        "statement_latencies": True,
        "progress": False,
    }

    created = api_client.post("/api/workloads/", payload, format="json")

    assert created.status_code == 201, created.json()
    read = api_client.get(f"/api/workloads/{created.json()['id']}/").json()
    assert read["latency_log"] == "aggregate"
    assert read["statement_latencies"] is True
    assert read["progress"] is False
    stored = Workload.objects.get(name="diagnosis")
    assert (stored.latency_log, stored.statement_latencies, stored.progress) == (
        "aggregate",
        True,
        False,
    )


def test_a_workload_created_by_the_api_without_the_options_gets_the_defaults(api_client):
    payload = {"name": "plain", "scripts": [{"builtin": "tpcb-like", "weight": 1}]}

    body = api_client.post("/api/workloads/", payload, format="json").json()

    assert (body["latency_log"], body["progress"], body["statement_latencies"]) == (
        "sampled",
        False,
        False,
    )


def test_an_unknown_latency_log_answers_400_naming_the_field_and_the_choices(api_client, user):
    workload = WorkloadFactory(created_by=user)

    answer = api_client.patch(
        f"/api/workloads/{workload.pk}/", {"latency_log": "everything"}, format="json"
    )

    assert answer.status_code == 400
    fields = answer.json()["error"]["fields"]
    assert list(fields) == ["latency_log"]
    assert "sampled, aggregate, full, none" in fields["latency_log"][0]
    workload.refresh_from_db()
    assert workload.latency_log == "sampled"


def test_statement_latencies_as_a_string_answers_400_naming_the_field(api_client, user):
    workload = WorkloadFactory(created_by=user)

    answer = api_client.patch(
        f"/api/workloads/{workload.pk}/", {"statement_latencies": "yes"}, format="json"
    )

    assert answer.status_code == 400
    assert list(answer.json()["error"]["fields"]) == ["statement_latencies"]
