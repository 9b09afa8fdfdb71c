"""Adaptive experiments: when the lab looks at the cells, and what each look may conclude.

An adaptive experiment measures every cell for its first rounds, then looks at each
compared point (a cell against the baseline cell at one client count) and adds
rounds only to cells with a point still undecided, until every point is decided or
the planned rounds are spent (runs/services/adaptive.py). Looking again and again
at growing data and stopping as soon as a test passes inflates its error rates; a
group-sequential design keeps them at ALPHA (docs/decisions.md says why this one):

- The looks are planned when the experiment starts (`look_rounds`): after the first
  rounds, each time the rounds double, and at the last round the budget allows.
  Their information fractions t_k = n_k / N fix the boundaries.
- Alpha spending (Lan-DeMets, Pocock type): by look k a share `spent(t_k)` of ALPHA
  is spent, and each look's boundary is the one a Brownian motion observed at the
  fractions first crosses with the look's part (`look_levels`, simulated once per
  plan with a fixed seed). "Same within ±m %" is TOST, each one-sided test spending
  its ALPHA the same way. Early looks get a usable part, so a large effect ends soon.
- A look's levels become Welch intervals on log values at the Welch-Satterthwaite
  df, as the fixed verdicts use (runs/analysis/verdicts.py); where a side's rounds
  are not log-normal (an outlier round, rounds in two groups: runs/analysis/shapes.py)
  the point's answer is rank-based at the same levels (Hodges-Lehmann shift,
  Mann-Whitney p: runs/inference/ranks.py) and says so. Benjamini-Hochberg runs over
  the look's points at the look's level. A decided point keeps its answer.
- A bisection step asks another question at the same looks: is the commit at good's
  level or at the bad ref's (`judge_between`, a sequential likelihood ratio:
  runs/inference/levels.py)?
"""

import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from runs.analysis.shapes import shape_of
from runs.analysis.verdicts import Question, Verdict
from runs.inference import levels, ranks, stats
from runs.inference.equivalence import margin_log
from runs.inference.stats import ALPHA, MIN_REPEATS

# Each look after the first comes when the rounds have doubled.
LOOK_GROWTH = 2
# Brownian paths simulated for a plan's boundary constants: their quantile is then
# within about 0.01 of the exact one (a nominal level off by well under 1 % of ALPHA).
SIMULATED_PATHS = 200_000
BOUNDARY_SEED = 20
# The log sd of a repeat assumed for the expected time when no rounds were measured.
ASSUMED_ROUND_LOG_SD = 0.05
EXPECTED_TIME_CELLS = 400


def look_rounds(first: int, last: int) -> tuple[int, ...]:
    """The rounds after which the lab looks: `first`, then doubling, then `last`."""
    if first < MIN_REPEATS:
        raise ValueError(f"an adaptive experiment starts with at least {MIN_REPEATS} rounds")
    if last < first:
        raise ValueError(f"the budget of {last} rounds is below the first {first} rounds")
    looks = []
    rounds = first
    while rounds < last:
        looks.append(rounds)
        rounds *= LOOK_GROWTH
    return (*looks, last)


@dataclass(frozen=True)
class LookLevel:
    """One planned look: after `rounds` rounds, "different" is tested at the two-sided
    level `alpha` and each one-sided test of "same" at `alpha_same`."""

    rounds: int
    alpha: float
    alpha_same: float


def spent(fraction: float) -> float:
    """The share of ALPHA spent by the information fraction `fraction` (Lan-DeMets'
    Pocock-type spending: early looks get a usable part, so a large effect ends soon)."""
    return math.log1p((math.e - 1) * fraction)


@functools.lru_cache(maxsize=64)
def look_levels(looks: tuple[int, ...]) -> tuple[LookLevel, ...]:
    """Each look's nominal levels: the boundaries that spend ALPHA as `spent` says,
    found on simulated Brownian paths observed at the looks' information fractions."""
    fractions = np.asarray(looks, dtype=float) / looks[-1]
    steps = np.diff(np.concatenate([[0.0], fractions]))
    rng = np.random.default_rng(BOUNDARY_SEED)
    paths = np.cumsum(rng.standard_normal((SIMULATED_PATHS, len(looks))) * np.sqrt(steps), axis=1)
    z = paths / np.sqrt(fractions)
    two_sided = _boundaries(np.abs(z), fractions, sides=2)
    one_sided = _boundaries(z, fractions, sides=1)
    return tuple(
        LookLevel(rounds, float(2 * scipy_stats.norm.sf(b)), float(scipy_stats.norm.sf(b_same)))
        for rounds, b, b_same in zip(looks, two_sided, one_sided, strict=True)
    )


def _boundaries(z: np.ndarray, fractions: np.ndarray, sides: int) -> list[float]:
    """Each look's boundary on `z` (paths x looks; |Z| for a two-sided test): a path
    first crosses at look k with probability ALPHA * (spent(t_k) - spent(t_k-1)). The
    first look's is the normal quantile; the later ones count the paths still inside."""
    boundaries = [float(scipy_stats.norm.isf(ALPHA * spent(fractions[0]) / sides))]
    inside = z[:, 0] < boundaries[0]
    for k in range(1, len(fractions)):
        share = ALPHA * (spent(fractions[k]) - spent(fractions[k - 1]))
        crossing = max(1, round(share * z.shape[0]))
        candidates = np.sort(z[inside, k])[::-1]
        boundary = float(candidates[min(crossing, candidates.size) - 1])
        boundaries.append(boundary)
        inside &= z[:, k] < boundary
    return boundaries


@dataclass(frozen=True)
class PointAnswer:
    """What one look found for one compared point; intervals in percent."""

    verdict: Verdict
    pct: float | None = None
    interval_pct: tuple[float, float] | None = None
    same_interval_pct: tuple[float, float] | None = None
    margin_pct: float = 0.0
    # Why the answer is rank-based (the sides' shapes); "" for log-Welch.
    rank_because: str = ""
    # A bisection step's answer (`judge_between`): the level the cell was placed at or
    # not, the change in % that level is against the first cell, and the log odds.
    between_pct: float = 0.0
    log_odds: float | None = None

    @property
    def sentence(self) -> str:
        ranked = f"; rank-based ({self.rank_because})" if self.rank_because else ""
        if self.between_pct:
            return self._sentence_between()
        if self.verdict is Verdict.SAME and self.same_interval_pct:
            bounds = _bounds(self.same_interval_pct)
            return f"same within ±{self.margin_pct:g} % {bounds}{ranked}"
        if self.pct is None or self.interval_pct is None:
            return f"{self.verdict}{ranked}"
        bounds = _bounds(self.interval_pct)
        if self.verdict is Verdict.UNDECIDED:
            return f"undecided: {self.pct:+.1f} % {bounds}{ranked}"
        return f"{self.verdict} by {abs(self.pct):.1f} % {bounds}{ranked}"

    def _sentence_between(self) -> str:
        """ "at the changed level (-7.3 %): -5.1 % [-7.9, -2.2]; odds 24:1", or "at the
        first cell's level", or "undecided between": the level, then the change against the
        first cell with its 95 % interval, then the odds of the changed level."""
        level = f"{self.between_pct:+.1f} %"
        where = {
            Verdict.SAME: f"at the first cell's level, not {level}",
            Verdict.UNDECIDED: f"undecided between the first cell's level and {level}",
        }.get(self.verdict, f"at the changed level ({level})")
        if self.pct is None or self.interval_pct is None or self.log_odds is None:
            return where
        return f"{where}: {self.pct:+.1f} % {_bounds(self.interval_pct)}; {_odds(self.log_odds)}"


def _odds(log_odds: float) -> str:
    """Log odds as "odds 24:1" (for the changed level) or "odds 1:40" (against it)."""
    ratio = math.exp(min(abs(log_odds), 50.0))
    shown = f"{ratio:,.0f}" if ratio < 1e6 else "over 1,000,000"
    return f"odds {shown}:1" if log_odds >= 0 else f"odds 1:{shown}"


def _bounds(interval: tuple[float, float]) -> str:
    """An interval in percent as the sentences write it; ranks over few rounds have none
    at an early look's level."""
    low, high = interval
    if not (math.isfinite(low) and math.isfinite(high)) or low <= -100.0:
        return "[no interval yet at this look's level]"
    return f"[{low:+.1f}, {high:+.1f}]"


@dataclass(frozen=True)
class _Looked:
    """A look's numbers for rows of points at once (log scale): the estimate, its p, its
    interval at the look's level and its equivalence interval (TOST at alpha_same)."""

    estimate: np.ndarray
    p: np.ndarray
    low: np.ndarray
    high: np.ndarray
    same_low: np.ndarray
    same_high: np.ndarray


def _moments(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(mean, variance, count) of each row's values; NaN pads a row with fewer rounds."""
    n = np.sum(~np.isnan(rows), axis=1)
    mean = np.nansum(rows, axis=1) / n
    return mean, np.nansum((rows - mean[:, None]) ** 2, axis=1) / (n - 1), n


def _look(logs: np.ndarray, base_logs: np.ndarray, level: LookLevel) -> _Looked:
    """Welch on log values of each row: `logs` and `base_logs` are (points, rounds)."""
    mean, var, n = _moments(logs)
    base_mean, base_var, base_n = _moments(base_logs)
    part, base_part = var / n, base_var / base_n
    se = np.sqrt(part + base_part)
    with np.errstate(divide="ignore", invalid="ignore"):
        df = (part + base_part) ** 2 / (part**2 / (n - 1) + base_part**2 / (base_n - 1))
        df = np.where(np.isfinite(df), df, n + base_n - 2)
        estimate = mean - base_mean
        t = np.where(se > 0, np.abs(estimate) / se, np.where(estimate == 0, 0.0, np.inf))
    half = scipy_stats.t.ppf(1 - level.alpha / 2, df) * se
    same_half = scipy_stats.t.ppf(1 - level.alpha_same, df) * se
    return _Looked(
        estimate,
        2 * scipy_stats.t.sf(t, df),
        estimate - half,
        estimate + half,
        estimate - same_half,
        estimate + same_half,
    )


def _rank_row(question: Question, level: LookLevel) -> tuple[float, ...]:
    """(estimate, p, low, high, same_low, same_high) of one point from ranks at the look's
    levels; an interval too wide for its repeats is unbounded."""
    shift = ranks.rank_shift(question.values, question.baseline, level.alpha)
    same = ranks.rank_shift(question.values, question.baseline, level.alpha_same)
    low, high = shift.interval or (-math.inf, math.inf)
    same_low, same_high = same.equivalence_interval or (-math.inf, math.inf)
    return shift.log_shift, shift.p, low, high, same_low, same_high


def _with_ranks(looked: _Looked, rows: dict[int, Question], level: LookLevel) -> _Looked:
    """`looked` with the rows in `rows` (row -> its question) answered from ranks."""
    columns = [np.array(column, dtype=float) for column in (
        looked.estimate, looked.p, looked.low, looked.high, looked.same_low, looked.same_high
    )]  # fmt: skip
    for row, question in rows.items():
        for column, value in zip(columns, _rank_row(question, level), strict=True):
            column[row] = value
    return _Looked(*columns)


def rank_because(question: Question) -> str:
    """Why a point's answer is rank-based: its sides' shapes that are not log-normal
    ("" when both are)."""
    shapes = {"this cell": shape_of(question.values), "first cell": shape_of(question.baseline)}
    return "; ".join(
        f"{side}: {shape.describe()}" for side, shape in shapes.items() if not shape.is_log_normal
    )


def _verdicts(
    looked: _Looked,
    q: np.ndarray,
    level: LookLevel,
    min_effect_pct: float,
    margin_pct: float,
    higher_is_better: np.ndarray,
) -> list[Verdict]:
    bound = margin_log(margin_pct)
    differ = (q <= level.alpha) & (np.abs(np.expm1(looked.estimate)) * 100 >= min_effect_pct)
    same = (looked.same_low >= -bound) & (looked.same_high <= bound)
    return [
        _direction(bool(up), bool(higher)) if d else Verdict.SAME if s else Verdict.UNDECIDED
        for up, d, s, higher in zip(
            looked.estimate > 0, differ, same, higher_is_better, strict=True
        )
    ]


def _direction(up: bool, higher_is_better: bool) -> Verdict:
    """The word for a significant change: tps up is faster, latency up is worse."""
    if higher_is_better:
        return Verdict.FASTER if up else Verdict.SLOWER
    return Verdict.WORSE if up else Verdict.BETTER


def _log_rows(rows: Sequence[Sequence[float]]) -> np.ndarray:
    """Logs of ragged rows, NaN-padded to the longest."""
    padded = np.full((len(rows), max(len(row) for row in rows)), np.nan)
    for i, row in enumerate(rows):
        padded[i, : len(row)] = np.log(np.asarray(row, dtype=float))
    return padded


def judge_look(
    questions: Sequence[Question],
    level: LookLevel,
    min_effect_pct: float,
    margin_pct: float,
) -> list[PointAnswer]:
    """The answer of each still undecided point at one look; BH over these points.

    Every question has the look's rounds on both sides (a failed round leaves one
    fewer); a point with fewer than two positive values a side stays undecided.
    """
    usable = [
        i
        for i, question in enumerate(questions)
        if min(len(question.values), len(question.baseline)) >= 2
        and min(*question.values, *question.baseline) > 0
    ]
    answers = [PointAnswer(Verdict.UNDECIDED) for _ in questions]
    if not usable:
        return answers
    logs = _log_rows([questions[i].values for i in usable])
    looked = _look(logs, _log_rows([questions[i].baseline for i in usable]), level)
    because = [rank_because(questions[i]) for i in usable]
    ranked = {row: questions[i] for row, i in enumerate(usable) if because[row]}
    looked = _with_ranks(looked, ranked, level) if ranked else looked
    q_values = np.asarray(stats.adjust_p_values(looked.p.tolist()))
    higher = np.asarray([questions[i].higher_is_better for i in usable])
    verdicts = _verdicts(looked, q_values, level, min_effect_pct, margin_pct, higher)
    estimates, lows, highs = looked.estimate.tolist(), looked.low.tolist(), looked.high.tolist()
    same_lows, same_highs = looked.same_low.tolist(), looked.same_high.tolist()
    for row, i in enumerate(usable):
        answers[i] = PointAnswer(
            verdicts[row],
            _pct(estimates[row]),
            (_pct(lows[row]), _pct(highs[row])),
            (_pct(same_lows[row]), _pct(same_highs[row])),
            margin_pct,
            because[row],
        )
    return answers


def judge_between(
    questions: Sequence[Question], change_pct: float, change_se: float = 0.0, alpha: float = ALPHA
) -> list[PointAnswer]:
    """Place each point at its baseline's level (SAME) or at that level moved by
    `change_pct` (measured with a standard error of `change_se` on the log scale; the
    change's direction: SLOWER for a drop in tps), by Wald's sequential likelihood ratio
    at error rates `alpha` each way (runs/inference/levels.py); a point between the
    bounds, or between the levels, is UNDECIDED. The interval shown is the plain 95 %
    one."""
    change_log = math.log1p(change_pct / 100.0)
    answers = []
    for question in questions:
        odds = levels.level_odds(question.values, question.baseline, change_log, change_se)
        if odds is None:
            answers.append(PointAnswer(Verdict.UNDECIDED, between_pct=change_pct))
            continue
        placed = levels.placement(odds, change_log, change_se, alpha)
        verdict = {
            levels.Placement.CHANGED: _direction(change_log > 0, question.higher_is_better),
            levels.Placement.FIRST: Verdict.SAME,
        }.get(placed, Verdict.UNDECIDED)
        difference = odds.difference
        half = float(scipy_stats.t.ppf(1 - ALPHA / 2, difference.df)) * difference.se
        interval = (_pct(difference.estimate - half), _pct(difference.estimate + half))
        answers.append(
            PointAnswer(
                verdict,
                _pct(difference.estimate),
                interval,
                between_pct=change_pct,
                log_odds=odds.log_odds,
            )
        )
    return answers


def _pct(log_ratio: float) -> float:
    """A log ratio as percent."""
    return math.expm1(log_ratio) * 100.0


@dataclass(frozen=True)
class Simulated:
    """Simulated compared points: each one's final verdict and the rounds it took."""

    verdicts: list[Verdict]
    rounds: np.ndarray


def simulate(
    values: np.ndarray,
    baseline: np.ndarray,
    looks: tuple[int, ...],
    min_effect_pct: float,
    margin_pct: float,
) -> Simulated:
    """Run the adaptive rule on points whose every round is drawn in advance: `values`
    and `baseline` are (points, looks[-1]) arrays of tps, each point its own table."""
    logs, base_logs = np.log(values), np.log(baseline)
    verdicts = [Verdict.UNDECIDED] * logs.shape[0]
    rounds = np.full(logs.shape[0], looks[-1])
    open_rows = np.arange(logs.shape[0])
    for level in look_levels(looks):
        looked = _look(logs[open_rows, : level.rounds], base_logs[open_rows, : level.rounds], level)
        higher = np.ones(open_rows.size, dtype=bool)
        found = _verdicts(looked, looked.p, level, min_effect_pct, margin_pct, higher)
        decided = np.asarray([verdict is not Verdict.UNDECIDED for verdict in found])
        for row, verdict in zip(open_rows[decided], np.asarray(found)[decided], strict=True):
            verdicts[row] = Verdict(verdict)
            rounds[row] = level.rounds
        open_rows = open_rows[~decided]
        if not open_rows.size:
            break
    return Simulated(verdicts, rounds)


def expected_rounds(
    first: int, last: int, margin_pct: float, min_effect_pct: float, log_sd: float | None
) -> float:
    """The mean rounds an A/A point takes to decide (or to spend the budget) when
    repeats spread by `log_sd` (ASSUMED_ROUND_LOG_SD when unknown): the usual case of
    a cell that differs little, and the slowest to settle."""
    sd = log_sd if log_sd and log_sd > 0 else ASSUMED_ROUND_LOG_SD
    rng = np.random.default_rng(BOUNDARY_SEED)
    shape = (EXPECTED_TIME_CELLS, last)
    values, baseline = np.exp(rng.normal(0, sd, shape)), np.exp(rng.normal(0, sd, shape))
    looks = look_rounds(first, last)
    return float(simulate(values, baseline, looks, min_effect_pct, margin_pct).rounds.mean())
