"""A random client order within a sweep: seeded, replayable, every count once per repeat."""

import pytest

from agents.contract.errors import JobError
from agents.contract.spec.document import sweep_points, validate_spec


def sweep(**values) -> dict:
    return {"clients": [1, 2, 4, 8, 16], "repeats": 3, "order": "random", "seed": 7, **values}


def test_the_same_seed_replays_the_same_order():
    assert sweep_points(sweep()) == sweep_points(sweep())


def test_each_repeat_runs_every_client_count_once_in_its_own_order():
    points = sweep_points(sweep())

    passes = [[clients for clients, repeat in points if repeat == r] for r in (1, 2, 3)]
    assert all(sorted(counts) == [1, 2, 4, 8, 16] for counts in passes)
    assert [repeat for _clients, repeat in points] == [1] * 5 + [2] * 5 + [3] * 5
    orders = {tuple(sweep_points(sweep(seed=seed))[:5]) for seed in range(10)}
    assert len(orders) > 1


def test_repeats_are_numbered_from_the_first_repeat():
    points = sweep_points(sweep(repeats=1, first_repeat=3))

    assert {repeat for _clients, repeat in points} == {3}


def test_ascending_and_interleaved_orders_are_unchanged():
    base = {"clients": [1, 4], "repeats": 2}
    assert sweep_points({**base, "order": "ascending"}) == [(1, 1), (1, 2), (4, 1), (4, 2)]
    assert sweep_points({**base, "order": "interleaved"}) == [(1, 1), (4, 1), (1, 2), (4, 2)]


def test_a_spec_with_random_order_keeps_its_seed_and_defaults_the_first_repeat():
    spec = validate_spec({"version": 1, "sweep": {"clients": [1], "duration_s": 1, **sweep()}})

    assert spec["sweep"]["seed"] == 7
    assert spec["sweep"]["first_repeat"] == 1


@pytest.mark.parametrize(
    ("field", "value"), [("seed", -1), ("seed", "7"), ("first_repeat", 0), ("order", "shuffled")]
)
def test_bad_order_fields_are_refused_naming_the_field(field, value):
    doc = {"version": 1, "sweep": {"clients": [1], "duration_s": 1, field: value}}

    with pytest.raises(JobError) as raised:
        validate_spec(doc)

    assert raised.value.field == f"sweep.{field}"
