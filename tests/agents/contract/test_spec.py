import pytest

from agents.contract.errors import JobError
from agents.contract.spec.document import (
    STATEMENTS_BEFORE_POINT,
    statements_before_point,
    sweep_points,
    validate_spec,
)
from agents.contract.vocabulary import BETWEEN_POINTS


def spec(**sections):
    doc = {"version": 1, "sweep": {"clients": [1, 2], "duration_s": 5}}
    doc.update(sections)
    return doc


def test_defaults_are_filled_in():
    result = validate_spec(spec())
    assert result["postgres"] == {"version": "16", "source": "auto", "build": None}
    assert result["workload"]["scripts"] == [{"builtin": "tpcb-like", "weight": 1}]
    assert result["sweep"]["repeats"] == 1
    assert result["storage"] == {"data": "default", "wal": None}


@pytest.mark.parametrize(
    ("section", "field"),
    [
        ({"sweep": {"clients": [], "duration_s": 5}}, "sweep.clients"),
        ({"sweep": {"clients": [1], "duration_s": 5, "transactions": 10}}, "sweep.duration_s"),
        ({"sweep": {"clients": [0], "duration_s": 5}}, "sweep.clients[0]"),
        ({"postgres": {"version": "sixteen"}}, "postgres.version"),
        ({"workload": {"scripts": [{"builtin": "tpcc"}]}}, "workload.scripts[0].builtin"),
        ({"workload": {"query_mode": "fast"}}, "workload.query_mode"),
        ({"dataset": {"scale": 0}}, "dataset.scale"),
        ({"dataset": {"init_steps": "dtx"}}, "dataset.init_steps"),
        ({"storage": {"data": "../etc"}}, "storage.data"),
        ({"settings": {"work_mem": "4MB\ninclude '/etc/passwd'"}}, "settings.work_mem"),
        ({"sweeps": {}}, "sweeps"),
    ],
)
def test_bad_fields_are_named(section, field):
    with pytest.raises(JobError) as error:
        validate_spec(spec(**section))
    assert error.value.code == "invalid_spec"
    assert error.value.field == field
    assert error.value.category == "user"


def test_sweep_order_ascending_runs_repeats_of_a_count_together():
    sweep = {"clients": [1, 4], "repeats": 2, "order": "ascending"}
    assert sweep_points(sweep) == [(1, 1), (1, 2), (4, 1), (4, 2)]


def test_sweep_order_interleaved_runs_the_whole_list_per_repeat():
    sweep = {"clients": [1, 4], "repeats": 2, "order": "interleaved"}
    assert sweep_points(sweep) == [(1, 1), (4, 1), (1, 2), (4, 2)]


def test_every_between_points_action_has_its_statements_and_a_document_without_one_checkpoints():
    assert set(STATEMENTS_BEFORE_POINT) == set(BETWEEN_POINTS)
    assert statements_before_point(validate_spec(spec())["sweep"]) == ("CHECKPOINT",)
    assert statements_before_point({}) == ("CHECKPOINT",)
    assert statements_before_point({"between_points": "vacuum_checkpoint"}) == (
        "VACUUM",
        "CHECKPOINT",
    )
    assert statements_before_point({"between_points": "flush"}) == ()
