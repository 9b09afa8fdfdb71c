"""How long an experiment's cells keep its busiest host: the one estimate the schedule
form's live answer and Review show (runs.estimates for a run's time and what a host
learned)."""

import itertools
from collections.abc import Iterable, Mapping
from typing import NamedTuple, TypedDict

from agents.contract.spec.document import SweepSpec
from runs.agentlink.execution import ROUNDS
from runs.analysis.capacity import probes_expected
from runs.estimates import (
    RATE_SOURCES,
    Learned,
    adaptive_seconds,
    learned_rates,
    learned_timings,
    timed_sweep_seconds,
)
from runs.inference.capacity_spread import spread_widens
from runs.models import Experiment
from runs.services.adaptive import LONGER_POINTS_FACTOR
from runs.services.queueing import Cell


class Estimate(TypedDict):
    """What starting an experiment queues and roughly how long the busiest host is busy.

    `runs` is also the number of cluster setups: one run is one cluster
    lifecycle. `setup_seconds` is the part of `estimated_seconds` the busiest
    host spends on setups (initdb, start, `pgbench -i`). A `transactions` sweep's
    points last transactions x clients / tps at the rates its hosts measured
    (runs.estimates.Rates): `transaction_rates` is "learned", "borrowed" when some
    cell's rate came from the same scripts at another scale or client count, or
    "guessed" when some had none; null for a sweep by duration. `build_seconds` is the
    part of `setup_seconds` the busiest host spends compiling source builds it has not
    built yet, `build_times` "learned" from its earlier builds or "guessed" (null when
    nothing is compiled: binaries, or builds in its cache). An adaptive
    experiment queues its first rounds (these figures), then adds rounds:
    `expected_seconds` and `max_seconds` say how long in all
    (runs.estimates.adaptive_seconds); null for the others. A capacity search's
    `expected_seconds` is for `capacity_probes` probes a cell, more where the hosts'
    windows at one rate spread `window_spread_pct` % in their latest searches with probes
    as long (null where that did not widen an interval or was not learned), or as many
    more than a steady host's schedule as those searches took, `probes_beyond_schedule`
    (their median; null where none ended): runs.analysis.capacity.probes_expected. All
    three null for other experiments.
    """

    execution: str
    runs: int
    points: int
    setup_seconds: int | None
    estimated_seconds: int | None
    expected_seconds: int | None
    max_seconds: int | None
    transaction_rates: str | None
    build_seconds: int | None
    build_times: str | None
    capacity_probes: int | None
    window_spread_pct: float | None
    probes_beyond_schedule: int | None


def cells_estimate(experiment: Experiment, cells: list[Cell], sweep: SweepSpec) -> Estimate:
    """The estimate of an experiment's cells whose job sweep is `sweep`.

    Hosts work in parallel and each runs its own runs one after another, so
    the time is the busiest host's. Every run is one cluster setup: rounds
    pay a setup (and a warm-up) per repeat of each cell, blocks one per cell.
    """
    lifecycles = experiment.repeats if experiment.execution == ROUNDS else 1
    clients = len(experiment.clients)
    estimate: Estimate = {
        "execution": experiment.execution,
        "runs": len(cells) * lifecycles,
        "points": len(cells) * clients * experiment.repeats,
        "setup_seconds": None,
        "estimated_seconds": None,
        "expected_seconds": None,
        "max_seconds": None,
        "transaction_rates": None,
        "build_seconds": None,
        "build_times": None,
        "capacity_probes": None,
        "window_spread_pct": None,
        "probes_beyond_schedule": None,
    }
    if not cells or not (experiment.duration_s or experiment.transactions):
        return estimate
    learned = learned_timings({cell.host.pk for cell in cells})
    lengths = _point_lengths(experiment, cells, estimate)
    busiest = _busiest(experiment, cells, lifecycles, learned, lengths, sweep)
    estimate["setup_seconds"] = round(busiest.setup)
    estimate["estimated_seconds"] = round(busiest.total)
    if busiest.build_times is not None:
        estimate["build_seconds"] = round(busiest.build)
        estimate["build_times"] = busiest.build_times
    # Compiling happens once, before the first run: rounds and probes repeat the rest.
    repeated = busiest.total - busiest.build
    if experiment.adaptive and experiment.max_rounds:
        first_rounds = max(experiment.repeats, 1)
        # After a look, rounds may run longer points (runs.services.adaptive).
        longer_s = {index: length * LONGER_POINTS_FACTOR for index, length in lengths.items()}
        longer = _busiest(experiment, cells, lifecycles, learned, longer_s, sweep)
        per_round = repeated / first_rounds
        longer_round = (longer.total - longer.build) / first_rounds
        hosts = {cell.host.pk for cell in cells}
        expected, most = adaptive_seconds(experiment, hosts, per_round, longer_round)
        estimate["expected_seconds"] = round(expected + busiest.build)
        estimate["max_seconds"] = round(most + busiest.build)
    if experiment.capacity and experiment.capacity_low_tps and experiment.capacity_high_tps:
        # A round of one probe a cell at a time; a cell's search takes about `searched.probes`
        # rounds of its budget (the busiest host runs its cells' probes of each round).
        estimate["runs"] = estimate["points"] = len(cells)
        searched = probes_expected(experiment, len(cells), {cell.host.pk for cell in cells})
        estimate["capacity_probes"] = searched.probes
        estimate["probes_beyond_schedule"] = searched.beyond_schedule
        if spread_widens(searched.spread):
            assert searched.spread is not None
            estimate["window_spread_pct"] = round(searched.spread.percent, 1)
        estimate["expected_seconds"] = round(repeated * searched.probes + busiest.build)
        estimate["max_seconds"] = round(repeated * experiment.capacity_probes + busiest.build)
    return estimate


def _point_lengths(
    experiment: Experiment, cells: list[Cell], estimate: Estimate
) -> dict[int, float]:
    """Cell index -> the seconds of its points: the duration, or for a sweep by transactions
    the mean length at the rates learned on the cell's host (estimate's transaction_rates
    says whether every one was learned)."""
    if experiment.duration_s:
        return {cell.index: float(experiment.duration_s) for cell in cells}
    transactions = experiment.transactions or 0
    rates = learned_rates({cell.host.pk for cell in cells}, {cell.workload.pk for cell in cells})
    lengths = {
        cell.index: rates.point_length(
            cell.host.pk, cell.workload.pk, experiment.clients, transactions
        )
        for cell in cells
    }
    sources = [length.source for length in lengths.values()]
    estimate["transaction_rates"] = max(sources, key=RATE_SOURCES.index)
    return {index: length.seconds for index, length in lengths.items()}


class HostTime(NamedTuple):
    """Seconds one host spends on its runs: in cluster setups, and in all; of the setups,
    compiling the source builds it has not built, and whether that was learned or
    guessed (None: nothing to compile)."""

    setup: float
    total: float
    build: float = 0.0
    build_times: str | None = None


def _busiest(
    experiment: Experiment,
    cells: list[Cell],
    lifecycles: int,
    learned: Learned,
    lengths: Mapping[int, float],
    sweep: SweepSpec,
) -> HostTime:
    """The busiest host's time on its cells, with points of `lengths` (cell index -> s)."""
    host_times = [
        _host_time(experiment, host_cells, lifecycles, learned, lengths, sweep)
        for _host, host_cells in itertools.groupby(cells, key=lambda cell: cell.host.pk)
    ]
    if experiment.client_host is not None:
        # The client host is busy for every run of every server host, one after another.
        host_times.append(
            HostTime(
                sum(t.setup for t in host_times),
                sum(t.total for t in host_times),
                sum(t.build for t in host_times),
                _worst([t.build_times for t in host_times]),
            )
        )
    return max(host_times, key=lambda time: time.total)


def _host_time(
    experiment: Experiment,
    cells: Iterable[Cell],
    lifecycles: int,
    learned: Learned,
    lengths: Mapping[int, float],
    sweep: SweepSpec,
) -> HostTime:
    """A host's seconds on its cells, each run the time of its job's sweep with points of
    its length in `lengths` at the timings learned on the host (runs.estimates.timed_sweep_seconds):
    a cell's first run with the CPU-profile pass, its later rounds without. A duet's cells
    run at the same time: the host is busy for the longer of them. Each source build the
    host has not built compiles once, before its first run."""
    cells = list(cells)
    first = {**sweep, "first_repeat": 1}
    later = {**first, "first_repeat": 2}
    times = []
    for cell in cells:
        timings = learned.for_cell(cell.host.pk, cell.build.pk)
        scale, duration_s = cell.workload.scale, lengths[cell.index]
        first_s = timed_sweep_seconds(first, duration_s, scale, timings)
        later_s = timed_sweep_seconds(later, duration_s, scale, timings)
        setup_s = lifecycles * timings.setup_seconds(scale)
        times.append(HostTime(setup_s, first_s + (lifecycles - 1) * later_s))
    builds = {cell.build.pk: (cell.host, cell.build) for cell in cells}
    compiles = [
        time for host, build in builds.values() if (time := learned.build_seconds(host, build))
    ]
    build_s = sum(time.seconds for time in compiles)
    build_times = _worst([time.source for time in compiles])
    if experiment.duet:
        # A duet round is one window: its two cells run at the same time.
        setup, total = max(t.setup for t in times), max(t.total for t in times)
    else:
        setup, total = sum(t.setup for t in times), sum(t.total for t in times)
    return HostTime(setup + build_s, total + build_s, build_s, build_times)


def _worst(sources: Iterable[str | None]) -> str | None:
    """The least sure of `sources`: "guessed" when any is, else "learned", else None."""
    found = {source for source in sources if source}
    return "guessed" if "guessed" in found else ("learned" if found else None)
