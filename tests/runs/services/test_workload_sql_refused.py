"""The lab refuses workload SQL that plainly needs superuser rights, naming the field (400)."""

import pytest

from agents.contract.errors import JobError
from runs import services
from runs.models import Run, Workload
from tests.runs.factories import ExperimentFactory, WorkloadFactory


def test_a_workload_whose_setup_sql_copies_from_a_program_is_refused_by_the_api(api_client):
    payload = {
        "name": "sneaky",
        "scale": 1,
        "setup_sql": "CREATE TABLE t (x text);\nCOPY t FROM PROGRAM 'id';",
        "scripts": [{"builtin": "tpcb-like", "weight": 1}],
    }

    answer = api_client.post("/api/workloads/", payload, format="json")

    assert answer.status_code == 400
    body = answer.json()
    assert "dataset.setup_sql" in str(body)
    assert "statement 2 (line 2)" in str(body)
    assert not Workload.objects.filter(name="sneaky").exists()


def test_an_experiment_with_a_script_writing_a_server_file_queues_nothing(lab_redis):
    workload = WorkloadFactory(
        scripts=[{"name": "dump", "text": "COPY pgbench_accounts TO '/tmp/x';\n", "weight": 1}]
    )
    experiment = ExperimentFactory(workloads=[workload])

    with pytest.raises(JobError) as refused:
        services.experiment_start(experiment)

    assert refused.value.code == "refused_sql"
    assert refused.value.field == "workload.scripts[0].text"
    assert not Run.objects.exists()
