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
  plan with a fixed seed: runs/inference/spending.py). "Same within ±m %" is TOST,
  each one-sided test spending its ALPHA the same way. Early looks get a usable part,
  so a large effect ends soon.
- A look's levels become Welch intervals on log values at the Welch-Satterthwaite
  df, as the fixed verdicts use (runs/analysis/verdicts.py); where a side's rounds
  are not log-normal (an outlier round, rounds in two groups: runs/analysis/outliers.py)
  the point's answer is rank-based at the same levels (Hodges-Lehmann shift,
  Mann-Whitney p: runs/inference/ranks.py) and says so. Benjamini-Hochberg runs over
  the look's points at the look's level. A decided point keeps its answer.
- The rounds of an adaptive experiment pair: each cell's round is compared with the
  first cell's run of the same round (runs/inference/paired.py), so a look's
  standard errors, df and intervals, hence when it stops, come from the rounds' log
  ratios (mean, sd / sqrt(n), n - 1 df), and from their Hodges-Lehmann estimate with
  the Wilcoxon signed-rank p where those ratios are not log-normal. The boundaries stay
  those of the planned rounds: the information of a paired look grows with its rounds
  as an unpaired one's does. Below MIN_PAIRS complete rounds a point is answered
  unpaired, and says so.
- A bisection step asks another question at the same looks: is the commit at good's
  level or at the bad ref's (`judge_between`, a sequential likelihood ratio:
  runs/inference/levels.py)?
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats as scipy_stats

from runs.analysis.outliers import find_outliers
from runs.analysis.verdicts import Question, Verdict, ratio_outliers
from runs.inference import levels, paired, ranks, stats
from runs.inference.equivalence import margin_log
from runs.inference.look_tests import (
    Looked,
    paired_look,
    row_of,
    signed_rank_row,
    welch_look,
    with_rows,
)
from runs.inference.spending import BOUNDARY_SEED, LookLevel, look_levels, look_rounds
from runs.inference.stats import ALPHA

# The log sd of a repeat assumed for the expected time when no rounds were measured.
ASSUMED_ROUND_LOG_SD = 0.05
EXPECTED_TIME_CELLS = 400


@dataclass(frozen=True)
class PointAnswer:
    """What one look found for one compared point; intervals in percent."""

    verdict: Verdict
    pct: float | None = None
    interval_pct: tuple[float, float] | None = None
    same_interval_pct: tuple[float, float] | None = None
    margin_pct: float = 0.0
    # Why the answer is rank-based (the sides' outliers); "" for log-Welch.
    rank_because: str = ""
    # A bisection step's answer (`judge_between`): the level the cell was placed at or
    # not, the change in % that level is against the first cell, and the log odds.
    between_pct: float = 0.0
    log_odds: float | None = None
    # Which design answered: "paired over 6 rounds", "unpaired".
    design: str = paired.UNPAIRED
    # The standard error of the estimate on the log scale, by the design that answered.
    log_se: float | None = None
    # The levels in percent of `interval_pct` and `same_interval_pct`: a look's adjusted
    # ones (98.6 % at an early look), so that no interval is shown without its level.
    interval_level_pct: float = (1 - ALPHA) * 100.0
    same_level_pct: float = (1 - 2 * ALPHA) * 100.0

    @property
    def _shows_same_interval(self) -> bool:
        same = self.verdict is Verdict.SAME and self.same_interval_pct is not None
        return same and not self.between_pct

    @property
    def shown_interval_pct(self) -> tuple[float, float] | None:
        """The interval the sentence shows: the equivalence one for "same", else the
        difference's (None: it shows none)."""
        return self.same_interval_pct if self._shows_same_interval else self.interval_pct

    @property
    def shown_level_pct(self) -> float | None:
        """The level of the interval the sentence shows (None: it shows none)."""
        if self._shows_same_interval:
            return self.same_level_pct
        return self.interval_level_pct if self.interval_pct is not None else None

    @property
    def sentence(self) -> str:
        ranked = f"; rank-based ({self.rank_because})" if self.rank_because else ""
        if self.between_pct:
            return self._sentence_between()
        if self.verdict is Verdict.SAME and self.same_interval_pct:
            bounds = _bounds(self.same_interval_pct, self.same_level_pct)
            return f"same within ±{self.margin_pct:g} % {bounds}{ranked}"
        if self.pct is None or self.interval_pct is None:
            return f"{self.verdict}{ranked}"
        bounds = _bounds(self.interval_pct, self.interval_level_pct)
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
        bounds = _bounds(self.interval_pct, self.interval_level_pct)
        return f"{where}: {self.pct:+.1f} % {bounds}; {_odds(self.log_odds)}"


def _odds(log_odds: float) -> str:
    """Log odds as "odds 24:1" (for the changed level) or "odds 1:40" (against it)."""
    ratio = math.exp(min(abs(log_odds), 50.0))
    shown = f"{ratio:,.0f}" if ratio < 1e6 else "over 1,000,000"
    return f"odds {shown}:1" if log_odds >= 0 else f"odds 1:{shown}"


def level_text(level_pct: float) -> str:
    """A confidence level as the pages write it: "95 %", "98.6 %"."""
    return f"{float(f'{level_pct:.1f}'):g} %"


def _bounds(interval: tuple[float, float], level_pct: float) -> str:
    """An interval in percent with its level, as the sentences write it ("[-7.9, -2.2]
    (98.6 % interval)"); ranks over few rounds have none at an early look's level."""
    low, high = interval
    if not (math.isfinite(low) and math.isfinite(high)) or low <= -100.0:
        return f"[no {level_text(level_pct)} interval yet at this look's level]"
    return f"[{low:+.1f}, {high:+.1f}] ({level_text(level_pct)} interval)"


def _rank_row(question: Question, level: LookLevel) -> tuple[float, ...]:
    """(estimate, p, low, high, same_low, same_high) of one point from ranks at the look's
    levels; an interval too wide for its repeats is unbounded."""
    shift = ranks.rank_shift(question.values, question.baseline, level.alpha)
    same = ranks.rank_shift(question.values, question.baseline, level.alpha_same)
    low, high = shift.interval or (-math.inf, math.inf)
    same_low, same_high = same.equivalence_interval or (-math.inf, math.inf)
    return shift.log_shift, shift.p, low, high, same_low, same_high


@dataclass(frozen=True)
class _PairedRows:
    """Paired rows' six numbers, why each is rank-based ("" for the t-test), and the
    design of those whose rounds were too few for signed ranks."""

    numbers: dict[int, tuple[float, ...]]
    because: dict[int, str]
    designs: dict[int, str]


def _paired_rows(questions: dict[int, Question], level: LookLevel) -> _PairedRows:
    """Each paired row's numbers: paired t; signed ranks where its ratios are not
    log-normal; the unpaired ranks where its rounds are too few for signed ranks to
    reach the look's level (runs/inference/ranks.py, `signed_ranks_reach`)."""
    pairings = [(row, p) for row, question in questions.items() if (p := question.pairing)]
    looked = paired_look(_pad([pairing.log_ratios() for _row, pairing in pairings]), level)
    found = _PairedRows({}, {}, {})
    for position, (row, pairing) in enumerate(pairings):
        log_ratios = pairing.log_ratios()
        found.because[row] = ratio_outliers(pairing)
        if not found.because[row]:
            found.numbers[row] = row_of(looked, position)
        elif ranks.signed_ranks_reach(log_ratios.size, level.alpha):
            found.numbers[row] = signed_rank_row(log_ratios, level)
        else:
            found.numbers[row] = _rank_row(questions[row], level)
            found.designs[row] = paired.too_few_for_signed_ranks(pairing)
    return found


def rank_because(question: Question) -> str:
    """Why a point's answer is rank-based: the outliers of its sides that are not
    log-normal ("" when both are)."""
    sides = {"this cell": question.values, "first cell": question.baseline}
    checked = {side: find_outliers(values) for side, values in sides.items()}
    return "; ".join(
        f"{side}: {found.describe()}" for side, found in checked.items() if not found.is_log_normal
    )


def _verdicts(
    looked: Looked,
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
    return _pad([np.log(np.asarray(row, dtype=float)) for row in rows])


def _pad(rows: Sequence[np.ndarray]) -> np.ndarray:
    """Ragged rows NaN-padded to the longest."""
    padded = np.full((len(rows), max(row.size for row in rows)), np.nan)
    for i, row in enumerate(rows):
        padded[i, : row.size] = row
    return padded


def design_difference(question: Question) -> tuple[levels.LogDifference | None, str]:
    """The point's difference on the log scale by the design that answers it (its paired
    rounds' ratios where they pair, else Welch's) and that design in words."""
    pairing = question.pairing
    if pairing is not None and pairing.is_paired:
        return levels.paired_log_difference(pairing.log_ratios()), pairing.describe()
    design = pairing.describe() if pairing is not None else paired.UNPAIRED
    return levels.log_difference(question.values, question.baseline), design


def judge_look(
    questions: Sequence[Question],
    level: LookLevel,
    min_effect_pct: float,
    margin_pct: float,
) -> list[PointAnswer]:
    """The answer of each still undecided point at one look; BH over these points.

    Every question has the look's rounds on both sides (a failed round leaves one
    fewer); a point with fewer than two positive values a side stays undecided. A
    question with its rounds is answered from its paired rounds where MIN_PAIRS pair.
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
    looked = welch_look(logs, _log_rows([questions[i].baseline for i in usable]), level)
    designs = [design_difference(questions[i]) for i in usable]
    in_pairs = {
        row: questions[i]
        for row, i in enumerate(usable)
        if (pairing := questions[i].pairing) is not None and pairing.is_paired
    }
    found = _paired_rows(in_pairs, level) if in_pairs else _PairedRows({}, {}, {})
    because = [
        found.because[row] if row in in_pairs else rank_because(questions[i])
        for row, i in enumerate(usable)
    ]
    numbers = found.numbers | {
        row: _rank_row(questions[i], level)
        for row, i in enumerate(usable)
        if because[row] and row not in in_pairs
    }
    looked = with_rows(looked, numbers) if numbers else looked
    q_values = np.asarray(stats.adjust_p_values(looked.p.tolist()))
    higher = np.asarray([questions[i].higher_is_better for i in usable])
    verdicts = _verdicts(looked, q_values, level, min_effect_pct, margin_pct, higher)
    estimates, lows, highs = looked.estimate.tolist(), looked.low.tolist(), looked.high.tolist()
    same_lows, same_highs = looked.same_low.tolist(), looked.same_high.tolist()
    for row, i in enumerate(usable):
        difference, design = designs[row]
        design = found.designs.get(row, design)
        answers[i] = PointAnswer(
            verdicts[row],
            _pct(estimates[row]),
            (_pct(lows[row]), _pct(highs[row])),
            (_pct(same_lows[row]), _pct(same_highs[row])),
            margin_pct,
            because[row],
            design=design,
            log_se=difference.se if difference is not None else None,
            interval_level_pct=(1 - level.alpha) * 100.0,
            same_level_pct=(1 - 2 * level.alpha_same) * 100.0,
        )
    return answers


def judge_between(
    questions: Sequence[Question], change_pct: float, change_se: float = 0.0, alpha: float = ALPHA
) -> list[PointAnswer]:
    """Place each point at its baseline's level (SAME) or at that level moved by
    `change_pct` (measured with a standard error of `change_se` on the log scale; the
    change's direction: SLOWER for a drop in tps), by Wald's sequential likelihood ratio
    at error rates `alpha` each way (runs/inference/levels.py); a point between the
    bounds, or between the levels, is UNDECIDED. A question with its rounds is placed
    by its paired rounds' log ratios where MIN_PAIRS pair. The interval shown is the
    plain 95 % one."""
    change_log = math.log1p(change_pct / 100.0)
    answers = []
    for question in questions:
        difference, design = design_difference(question)
        if difference is None:
            answers.append(PointAnswer(Verdict.UNDECIDED, between_pct=change_pct, design=design))
            continue
        odds = levels.level_odds(difference, change_log, change_se)
        placed = levels.placement(odds, change_log, change_se, alpha)
        verdict = {
            levels.Placement.CHANGED: _direction(change_log > 0, question.higher_is_better),
            levels.Placement.FIRST: Verdict.SAME,
        }.get(placed, Verdict.UNDECIDED)
        half = float(scipy_stats.t.ppf(1 - ALPHA / 2, difference.df)) * difference.se
        interval = (_pct(difference.estimate - half), _pct(difference.estimate + half))
        answers.append(
            PointAnswer(
                verdict,
                _pct(difference.estimate),
                interval,
                between_pct=change_pct,
                log_odds=odds.log_odds,
                design=design,
                log_se=difference.se,
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
    in_pairs: bool = False,
) -> Simulated:
    """Run the adaptive rule on points whose every round is drawn in advance: `values`
    and `baseline` are (points, looks[-1]) arrays of tps, each point its own table;
    `in_pairs`: column k of both was measured in round k, and the looks pair them."""
    logs, base_logs = np.log(values), np.log(baseline)
    verdicts = [Verdict.UNDECIDED] * logs.shape[0]
    rounds = np.full(logs.shape[0], looks[-1])
    open_rows = np.arange(logs.shape[0])
    for level in look_levels(looks):
        taken = logs[open_rows, : level.rounds], base_logs[open_rows, : level.rounds]
        looked = paired_look(taken[0] - taken[1], level) if in_pairs else welch_look(*taken, level)
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
    a cell that differs little, and the slowest to settle. The looks pair the rounds;
    the rounds are drawn sharing nothing, so where a round's runs share the host's
    moment the experiment ends sooner than this."""
    sd = log_sd if log_sd and log_sd > 0 else ASSUMED_ROUND_LOG_SD
    rng = np.random.default_rng(BOUNDARY_SEED)
    shape = (EXPECTED_TIME_CELLS, last)
    values, baseline = np.exp(rng.normal(0, sd, shape)), np.exp(rng.normal(0, sd, shape))
    looks = look_rounds(first, last)
    found = simulate(values, baseline, looks, min_effect_pct, margin_pct, in_pairs=True)
    return float(found.rounds.mean())
