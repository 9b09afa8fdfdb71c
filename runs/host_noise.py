"""A host's noise, read from what the lab stored: its canaries and their usual spread, the
steal and foreign CPU of its recent points, the spread of its experiments' rounds, and
the rounds an effect needs on it in each design (runs/inference/designs.py).

The rounds' spread pools the host's last SPREAD_EXPERIMENTS experiments run in
rounds: at each client count, every cell against the experiment's first cell on
this host, round by round (runs/inference/variance.py `paired_variance`), so an
A/A and an A/B count alike (a real difference moves the mean log ratio, not its
spread). Duet experiments (both cells in one window, agents/duet.py) make the host's
duet spread, apart: their ratios are of simultaneous windows, and a duet round takes
one window of wall time where a round of the other designs takes two.
"""

import statistics
from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime

from runs.inference.designs import DesignRounds, rounds_by_design
from runs.inference.usual import UsualBand, usual_band
from runs.inference.variance import PairedVariance, paired_variance
from runs.models import Experiment, Host, HostCanary, Result, Run

# The canaries a new one is compared with: the host's recent ones, so a host whose speed
# changed for good (a new VM size) has a new usual spread within a day or two of runs.
HISTORY = 20
# The narrowest band on the log scale, as a standard deviation: a loop's median of runs
# repeats within about a percent, an fsync's median within several.
CPU_FLOOR_SD = 0.02
FSYNC_FLOOR_SD = 0.10
# A memory copy's median of runs moves with what else the machine's memory serves.
MEMORY_FLOOR_SD = 0.05
# What the host page shows: its last canaries and its last points with noise.
SHOWN_CANARIES = 60
SHOWN_POINTS = 20
# The experiments whose rounds make the host's spread.
SPREAD_EXPERIMENTS = 10


@dataclass(frozen=True)
class CanaryBands:
    """A host's usual CPU loop and fsync times and memory copy rate (None: too few
    canaries yet)."""

    cpu_loop_ns: UsualBand | None
    fsync_ms: UsualBand | None
    memory_gbps: UsualBand | None
    canaries: int


def canary_bands(host: Host, before: datetime | None = None) -> CanaryBands:
    """The usual spread of the host's last HISTORY canaries (taken before `before`)."""
    canaries = HostCanary.objects.filter(host=host)
    if before is not None:
        canaries = canaries.filter(at__lt=before)
    recent = list(
        canaries.order_by("-at").values_list("cpu_loop_ns", "fsync_ms", "memory_gbps")[:HISTORY]
    )
    memory = [gbps for _cpu, _fsync, gbps in recent if gbps is not None]
    return CanaryBands(
        cpu_loop_ns=usual_band([cpu for cpu, _fsync, _gbps in recent], CPU_FLOOR_SD),
        fsync_ms=usual_band([fsync for _cpu, fsync, _gbps in recent], FSYNC_FLOOR_SD),
        memory_gbps=usual_band(memory, MEMORY_FLOOR_SD),
        canaries=len(recent),
    )


def recent_canaries(host: Host) -> list[HostCanary]:
    """The host's last SHOWN_CANARIES canaries, oldest first."""
    latest = HostCanary.objects.filter(host=host).order_by("-at")[:SHOWN_CANARIES]
    return sorted(latest, key=lambda canary: canary.at)


def recent_noisy_points(host: Host) -> list[Result]:
    """The host's last SHOWN_POINTS points that carry their noise, newest first."""
    return list(
        Result.objects.filter(run__host=host)
        .exclude(foreign_cpu_percent=None, cpu_steal_percent=None)
        .select_related("run")
        .order_by("-run__finished_at", "-run_id", "-index")[:SHOWN_POINTS]
    )


@dataclass(frozen=True)
class RoundsSpread:
    """The spread of a host's rounds: the pooled variances, from how many experiments, and
    a round's median wall time (its runs' median, twice for two cells run one after the
    other, once for a duet's two at once)."""

    variance: PairedVariance
    experiments: int
    round_seconds: float | None

    @property
    def paired_sd_pct(self) -> float:
        return 100.0 * self.variance.paired**0.5

    @property
    def unpaired_sd_pct(self) -> float:
        return 100.0 * self.variance.unpaired**0.5


def rounds_spread(host: Host, duet: bool = False) -> RoundsSpread | None:
    """The spread of the host's recent experiments' rounds (`duet`: of its duet
    experiments, else of the others); None without enough rounds."""
    experiments = list(
        Experiment.objects.filter(
            execution=Experiment.Execution.ROUNDS,
            duet=duet,
            runs__host=host,
            runs__status=Run.Status.SUCCEEDED,
        )
        .distinct()
        .order_by("-pk")[:SPREAD_EXPERIMENTS]
    )
    runs = list(
        Run.objects.filter(
            experiment__in=experiments, host=host, status=Run.Status.SUCCEEDED
        ).exclude(round=None)
    )
    by_point: dict[tuple[int, int], dict[int, dict[int, float]]] = defaultdict(
        lambda: defaultdict(dict)
    )
    results = Result.objects.filter(run__in=runs).exclude(tps=None).select_related("run")
    for result in results:
        run = result.run
        if result.tps and run.round is not None:
            cells = by_point[(run.experiment_id, result.clients)]
            cells[run.cell][run.round] = result.tps
    pairs = []
    for cells in by_point.values():
        baseline, *others = sorted(cells)
        pairs += [(cells[cell], cells[baseline]) for cell in others]
    variance = paired_variance(pairs)
    if variance is None:
        return None
    seconds = [
        (run.finished_at - run.started_at).total_seconds()
        for run in runs
        if run.started_at and run.finished_at
    ]
    return RoundsSpread(
        variance=variance,
        experiments=len({experiment for experiment, _clients in by_point}),
        round_seconds=(1 if duet else 2) * statistics.median(seconds) if seconds else None,
    )


def rounds_needed(
    spread: RoundsSpread | None, duet_spread: RoundsSpread | None, effect_pct: float
) -> list[DesignRounds]:
    """Each design's rounds for an effect of `effect_pct` on a host whose rounds spread
    by `spread` and its duet rounds by `duet_spread` (None: none measured)."""
    return rounds_by_design(
        None if spread is None else spread.variance.unpaired,
        None if spread is None else spread.variance.paired,
        None if duet_spread is None else duet_spread.variance.paired,
        effect_pct,
    )
