"""Duet experiments in the lab (runs/services/duet.py): refused before the start where the
host cannot be shared fairly, one job per round carrying both cells, the estimate
counting a round once, and answers saying "duet"."""

import base64
import json

import numpy as np
import pytest

from agents.contract.errors import JobError
from agents.contract.signing import unsigned, verify
from agents.contract.wire import agent_queue
from runs import services
from runs.analysis.verdicts import Question, answer
from runs.inference.paired import DUET, pair_rounds, paired_difference
from runs.models import Experiment, StorageTarget
from runs.services import adaptive
from runs.services.jobs.dispatch import run_redispatch
from tests.runs.factories import (
    ConfigProfileFactory,
    ExperimentFactory,
    HostFactory,
    UserFactory,
    WorkloadFactory,
)

pytestmark = pytest.mark.django_db

FOUR_CPUS = {"cpu": {"threads": 4}, "memory": {"total_bytes": 8 * 2**30}}


def duet_experiment(cells: int = 2, host_facts: dict | None = None, **fields) -> Experiment:
    values = {"execution": "rounds", "repeats": 3, "duet": True, "clients": [2], **fields}
    host = HostFactory(facts=host_facts or FOUR_CPUS)
    profiles = [ConfigProfileFactory() for _ in range(cells)]
    return ExperimentFactory(hosts=[host], config_profiles=profiles, **values)


def queued_tasks(lab_redis, host_name: str) -> list[dict]:
    messages = [json.loads(raw) for raw in lab_redis.lrange(agent_queue(host_name), 0, -1)]
    return [json.loads(base64.b64decode(m["body"]))[0][0] for m in messages]


def test_each_round_is_one_job_carrying_both_cells_their_cpu_halves_swapped_every_round(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment = duet_experiment(order="random")
    host = experiment.hosts.get()

    with django_capture_on_commit_callbacks(execute=True):
        runs = services.experiment_start(experiment, UserFactory())

    assert len(runs) == 6
    tasks = list(reversed(queued_tasks(lab_redis, host.name)))  # LPUSH: newest first
    assert len(tasks) == 3
    for round_number, task in enumerate(tasks, start=1):
        assert verify("job", task, host.secret)
        document = unsigned(task)
        sides = document["sides"]
        by_round = sorted((r for r in runs if r.round == round_number), key=lambda r: r.cell)
        assert [side["run_id"] for side in sides] == [run.run_id for run in by_round]
        assert [side["token"] for side in sides] == [run.token for run in by_round]
        assert document["run_id"] == by_round[0].run_id
        assert document["swapped"] is (round_number % 2 == 0)
        assert sides[0]["sweep"] == sides[1]["sweep"], "the same points in the same order"
        assert len({run.celery_task_id for run in by_round}) == 1


@pytest.mark.parametrize(
    ("fields", "cells", "field"),
    [
        ({"execution": "blocks"}, 2, "execution"),
        ({}, 3, "duet"),
        ({"duration_s": None, "transactions": 1000}, 2, "sweep.duration_s"),
        ({"cpu_profile": True}, 2, "sweep.cpu_profile"),
        ({"threads": 3}, 2, "sweep.threads"),
    ],
)
def test_a_duet_that_cannot_share_its_host_is_refused_before_the_start(
    lab_redis, fields, cells, field
):
    experiment = duet_experiment(cells, **fields)

    with pytest.raises(JobError) as refused:
        services.experiment_start(experiment, UserFactory())

    assert refused.value.field == field
    assert not experiment.runs.exists()


def test_a_host_of_one_cpu_is_refused_and_one_of_two_is_a_warning(lab_redis):
    with pytest.raises(JobError) as refused:
        services.experiment_check(duet_experiment(host_facts={"cpu": {"threads": 1}}))
    assert (refused.value.code, refused.value.field) == ("duet_refused", "hosts")

    checked = services.experiment_check(duet_experiment(host_facts={"cpu": {"threads": 2}}))

    assert any("compete with each other" in note for note in checked[0].notes)


def test_both_sides_writing_to_one_device_is_a_warning_and_two_devices_are_not(lab_redis):
    writes = WorkloadFactory(scripts=[{"builtin": "tpcb-like", "weight": 1}])
    shared = duet_experiment(workloads=[writes])
    notes = services.experiment_check(shared)[0].notes
    assert any("one device" in note for note in notes)

    host = HostFactory(facts=FOUR_CPUS)
    for name, device in (("nvme0", "/dev/nvme0n1"), ("nvme1", "/dev/nvme1n1")):
        StorageTarget.objects.create(host=host, name=name, device=device)
    apart = ExperimentFactory(
        hosts=[host],
        workloads=[writes],
        storage_layouts=[{"data": "nvme0", "wal": None}, {"data": "nvme1", "wal": None}],
        execution="rounds",
        repeats=3,
        duet=True,
        clients=[2],
    )
    assert not any("one device" in note for note in services.experiment_check(apart)[0].notes)


def test_the_api_refuses_a_duet_of_three_cells_naming_the_field(api_client, experiment_payload):
    payload = experiment_payload(duet=True, execution="rounds", repeats=3)
    payload["config_profiles"] = [ConfigProfileFactory().pk for _ in range(3)]

    response = api_client.post("/api/experiments/", payload, format="json")

    assert response.status_code == 400, response.content
    assert "duet" in json.dumps(response.json())


def test_the_estimate_counts_a_duet_round_as_one_window(lab_redis):
    duet = services.experiment_estimate(duet_experiment(duration_s=60))
    apart = services.experiment_estimate(duet_experiment(duration_s=60, duet=False))

    assert duet["runs"] == apart["runs"] == 6
    assert duet["estimated_seconds"] is not None and apart["estimated_seconds"] is not None
    assert duet["estimated_seconds"] * 2 == pytest.approx(apart["estimated_seconds"], abs=2)


def test_simultaneous_rounds_answer_as_a_duet():
    rng = np.random.default_rng(7)
    host = rng.normal(0, 0.1, 6)
    baseline = list(10_000 * np.exp(host))
    values = list(10_000 * np.exp(host + 0.05 + rng.normal(0, 0.005, 6)))
    rounds = list(range(1, 7))
    pairing = pair_rounds(values, rounds, baseline, rounds, simultaneous=True)
    difference = paired_difference(pairing.log_ratios())
    assert difference is not None

    found = answer(Question(values, baseline, True, rounds, rounds, simultaneous=True), difference)

    assert pairing.describe() == "duet over 6 rounds"
    assert found.design == "duet over 6 rounds" and found.simultaneous
    assert pairing.design == DUET


def test_an_adaptive_duet_adds_its_rounds_as_one_job_each(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment = duet_experiment(adaptive=True, max_rounds=6, margin_pct=5.0)
    host = experiment.hosts.get()
    with django_capture_on_commit_callbacks(execute=True):
        services.experiment_start(experiment, UserFactory())
    lab_redis.delete(agent_queue(host.name))

    with django_capture_on_commit_callbacks(execute=True):
        queued = adaptive._queue_round(experiment, [0, 1], 4, 1)

    assert sorted(run.cell for run in queued) == [0, 1]
    (task,) = queued_tasks(lab_redis, host.name)
    document = unsigned(task)
    assert [side["run_id"] for side in document["sides"]] == [
        run.run_id for run in sorted(queued, key=lambda run: run.cell)
    ]
    assert document["swapped"] is True


def test_a_lost_duet_is_sent_again_as_one_duet_with_new_tokens(
    lab_redis, django_capture_on_commit_callbacks
):
    experiment = duet_experiment(repeats=1)
    host = experiment.hosts.get()
    with django_capture_on_commit_callbacks(execute=True):
        first, second = sorted(services.experiment_start(experiment), key=lambda run: run.cell)
    lab_redis.delete(agent_queue(host.name))  # Redis lost the job
    old_tokens = [first.token, second.token]

    with django_capture_on_commit_callbacks(execute=True):
        assert run_redispatch(first)
    # The reaper's second look, at the other side it loaded before: already sent again.
    assert not run_redispatch(second)

    (task,) = queued_tasks(lab_redis, host.name)
    sides = unsigned(task)["sides"]
    first.refresh_from_db()
    second.refresh_from_db()
    assert [side["token"] for side in sides] == [first.token, second.token]
    assert not {first.token, second.token} & set(old_tokens)
    assert first.celery_task_id == second.celery_task_id
    assert (first.dispatches, second.dispatches) == (2, 2)
