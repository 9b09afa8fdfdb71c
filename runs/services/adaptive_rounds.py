"""What an adaptive experiment's rounds measured, read for its looks and its page: each
point's tps per round (the newest run of a round), the question a point asks against the
first cell, and where the experiment's spread comes from. The steps that act on them
are runs/services/adaptive.py; a bisection's steps read them too."""

from collections.abc import Sequence

from django.db.models import Q

from runs.agentlink.execution import ROUNDS
from runs.analysis.verdicts import Question
from runs.estimates import learned_timings
from runs.inference.variance import (
    PairedVariance,
    PointSeconds,
    VarianceSplit,
    paired_variance,
    variance_split,
)
from runs.models import Experiment, ProgressSample, Result

# The cell every other is compared with.
BASELINE_CELL = 0
# (cell, clients) -> (round, tps) of each of its rounds' clean points.
PointRounds = dict[tuple[int, int], list[tuple[int, float]]]


def point_question(
    by_round: PointRounds, key: tuple[int, int], simultaneous: bool = False
) -> Question:
    """A point against the first cell at its client count, with the round of each tps;
    `simultaneous`: each round's two sides ran at the same time (a duet)."""
    mine, theirs = by_round.get(key, []), by_round.get((BASELINE_CELL, key[1]), [])
    return Question(
        [tps for _round, tps in mine],
        [tps for _round, tps in theirs],
        True,
        [round_number for round_number, _tps in mine],
        [round_number for round_number, _tps in theirs],
        simultaneous,
    )


def tps_by_round(experiment: Experiment, rounds: int | None = None) -> PointRounds:
    """(cell, clients) -> (round, tps) of each of its rounds (up to `rounds`), in round
    order: the newest run of a round counts (a re-run replaces it); points pgbench did
    not finish cleanly do not."""
    newest: dict[tuple[int, int], int] = {}
    runs = experiment.runs.filter(round__isnull=False)
    if rounds is not None:
        runs = runs.filter(round__lte=rounds)
    for pk, cell, round_number in runs.order_by("pk").values_list("pk", "cell", "round"):
        newest[(cell, round_number or 0)] = pk
    run_of = {pk: key for key, pk in newest.items()}
    values: PointRounds = {}
    clean = Q(exit_code=0) | Q(exit_code__isnull=True)
    results = Result.objects.filter(clean, run_id__in=run_of, tps__gt=0, aborted_clients=0)
    for run_id, clients, tps in results.order_by("run_id", "index").values_list(
        "run_id", "clients", "tps"
    ):
        cell, round_number = run_of[run_id]
        values.setdefault((cell, clients), []).append((round_number, float(tps or 0.0)))
    return {key: sorted(found) for key, found in values.items()}


def experiment_split(
    experiment: Experiment, repeats: Sequence[Sequence[float]]
) -> VarianceSplit | None:
    """Where `experiment`'s spread comes from (runs/inference/variance.py); `repeats`: the
    tps of each repeat at each cell and client count. In rounds, each cell's rounds
    paired with the first cell's (`tps_by_round`) say what pairing removes. None without
    two repeats of a point or per-second samples. The experiment page shows it;
    runs/services/adaptive.py's `_consider_longer_points` acts on it."""
    by_point: dict[tuple[int, int], tuple[list[float], list[int | None]]] = {}
    rows = ProgressSample.objects.filter(run__experiment=experiment, tps__isnull=False)
    for run_id, point, tps, sampled in rows.order_by("run_id", "point", "t").values_list(
        "run_id", "point", "tps", "sampled"
    ):
        values, counts = by_point.setdefault((run_id, point), ([], []))
        values.append(tps or 0.0)
        counts.append(sampled)
    points = [PointSeconds(values, counts) for values, counts in by_point.values()]
    first = experiment.runs.order_by("position").first()
    setup = learned_timings([first.host_id]).for_run(first).setup_s if first else 0.0
    in_rounds = experiment.execution == ROUNDS
    pairing = _paired_variance(tps_by_round(experiment)) if in_rounds else None
    return variance_split(repeats, points, setup, in_rounds, pairing)


def _paired_variance(by_round: PointRounds) -> PairedVariance | None:
    """What pairing each cell's rounds with the first cell's removes from the variance of
    their differences (runs/inference/variance.py)."""
    pairs = [
        (dict(found), dict(by_round[(BASELINE_CELL, clients)]))
        for (cell, clients), found in by_round.items()
        if cell != BASELINE_CELL and (BASELINE_CELL, clients) in by_round
    ]
    return paired_variance(pairs)
