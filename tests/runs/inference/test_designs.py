"""Rounds an effect needs per design (runs/inference/designs.py), checked against the
power of the t-tests the verdicts run."""

import math

import pytest

from runs.inference.designs import DUET, PAIRED, UNPAIRED, paired_rounds_needed, rounds_by_design
from runs.inference.stats import POWER, power, repeats_needed


@pytest.mark.parametrize(("ratio_sd", "effect_pct"), [(0.051, 5.0), (0.02, 2.0), (0.10, 10.0)])
def test_paired_rounds_are_the_fewest_with_the_power_asked(ratio_sd, effect_pct):
    rounds = paired_rounds_needed(ratio_sd, effect_pct)
    effect = math.log1p(effect_pct / 100)

    def reached(n: int) -> float:
        return power(effect / (ratio_sd / math.sqrt(n)), n - 1)

    assert reached(rounds) >= POWER > reached(rounds - 1)


def test_pairing_that_removes_the_rounds_share_needs_fewer_rounds():
    # The spreads measured on a shared VM (docs/benchmarks.md): a round's log ratio 5.1 %
    # paired, 8.0 % unpaired.
    unpaired, paired, duet = rounds_by_design(0.080**2, 0.051**2, None, 5.0)

    assert (unpaired.design, paired.design, duet.design) == (UNPAIRED, PAIRED, DUET)
    assert unpaired.rounds == repeats_needed(0.080 / math.sqrt(2), 5.0)
    assert paired.rounds == paired_rounds_needed(0.051, 5.0)
    assert paired.rounds < unpaired.rounds
    assert (duet.rounds, duet.measured) == (None, False)


def test_without_a_shared_part_pairing_gains_nothing():
    unpaired, paired, _duet = rounds_by_design(0.08**2, 0.08**2, None, 5.0)
    # Paired t has n - 1 degrees of freedom where Welch has about 2n - 2: a round or so more.
    assert unpaired.rounds <= paired.rounds <= unpaired.rounds + 2


def test_an_effect_beyond_the_cap_needs_more_rounds_than_advised():
    assert paired_rounds_needed(0.5, 0.1) is None
    assert paired_rounds_needed(0.0, 5.0) == 3


def test_duet_rounds_are_sized_from_the_spread_of_simultaneous_windows():
    # A duet round's ratio spread measured here (docs/benchmarks.md, "Duet rounds"), far
    # under the back-to-back rounds' 5.1 %.
    _unpaired, paired, duet = rounds_by_design(0.080**2, 0.051**2, 0.02**2, 5.0)

    assert (duet.design, duet.measured) == (DUET, True)
    assert duet.rounds == paired_rounds_needed(0.02, 5.0)
    assert duet.rounds < paired.rounds


def test_a_host_with_duet_rounds_only_has_its_other_designs_unmeasured():
    unpaired, paired, duet = rounds_by_design(None, None, 0.03**2, 5.0)

    assert [(d.rounds, d.measured) for d in (unpaired, paired)] == [(None, False)] * 2
    assert duet.measured and duet.rounds == paired_rounds_needed(0.03, 5.0)
