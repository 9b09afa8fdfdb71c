"""The execution plan: rounds in a seeded random order, blocks in matrix order."""

from collections import Counter

from runs.agentlink.execution import BLOCKS, ROUNDS, derived_seed, execution_plan


def test_the_same_seed_gives_the_same_order():
    assert execution_plan(5, 4, ROUNDS, 1234) == execution_plan(5, 4, ROUNDS, 1234)


def test_another_seed_gives_another_order():
    orders = {tuple(s.cell for s in execution_plan(6, 3, ROUNDS, seed)) for seed in range(20)}
    assert len(orders) == 20


def test_every_round_runs_every_cell_exactly_once():
    plan = execution_plan(7, 5, ROUNDS, 99)

    for round_number in range(1, 6):
        cells = [slot.cell for slot in plan if slot.round == round_number]
        assert sorted(cells) == list(range(7))


def test_rounds_run_one_after_another_and_positions_count_the_queue():
    plan = execution_plan(3, 4, ROUNDS, 5)

    assert [slot.round for slot in plan] == sorted(slot.round for slot in plan)
    assert [slot.position for slot in plan] == list(range(12))


def test_cells_are_not_always_in_matrix_order_inside_a_round():
    plan = execution_plan(4, 10, ROUNDS, 2024)

    orders = {tuple(s.cell for s in plan if s.round == r) for r in range(1, 11)}
    assert len(orders) > 1
    first_places = Counter(next(s.cell for s in plan if s.round == r) for r in range(1, 11))
    assert len(first_places) > 1


def test_blocks_keep_one_run_per_cell_in_matrix_order_whatever_the_seed():
    for seed in (0, 1, 77):
        plan = execution_plan(3, 5, BLOCKS, seed)
        assert [(s.position, s.cell, s.round) for s in plan] == [
            (0, 0, None),
            (1, 1, None),
            (2, 2, None),
        ]


def test_derived_seeds_are_fixed_by_the_experiment_seed_and_differ_between_runs():
    assert derived_seed(42, 3) == derived_seed(42, 3)
    assert len({derived_seed(42, position) for position in range(50)}) == 50
    assert derived_seed(42, 0) != derived_seed(43, 0)
