"""The answer for each compared cell: different, same within the margin, or undecided.

- faster/slower (latency: better/worse) by X % [95 % CI]: the cell's p-value,
  adjusted with the rest of its table (Benjamini-Hochberg), is at most FDR_Q and
  the estimate reaches the minimum effect;
- same within ±m %: otherwise, when the 1 - 2 ALPHA interval lies inside the
  user's margin (TOST, runs/inference/equivalence.py);
- undecided: neither, with about how many more rounds would decide it, sized at
  the effect asked about (no difference for "same", the minimum effect for
  "different"), never at the observed estimate.

The numbers come from Welch's t-test on log values (runs/inference/stats.py)
unless a side's repeats are not log-normal (an outlier or two groups,
runs/analysis/outliers.py): then from the rank-based answer (Hodges-Lehmann
shift with Mann-Whitney p, runs/inference/ranks.py), and the judgement says so.

Where both cells ran in the same rounds (a Question with the round of each
repeat), each repeat is compared with the baseline's repeat of its round
(runs/inference/paired.py): Student's t on the rounds' log ratios, or, where
those ratios are not log-normal, the Hodges-Lehmann estimate of the ratios with
the Wilcoxon signed-rank p. Rounds one side lacks are dropped and named; with
fewer than MIN_PAIRS complete rounds the cell is answered unpaired, and says so.
"""

import dataclasses
import functools
import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

from runs.analysis.outliers import find_outliers
from runs.inference import paired, ranks, stats
from runs.inference.equivalence import (
    DEFAULT_MARGIN_PCT,
    DIFFERENT_IF_MIN_EFFECT,
    SAME_IF_NONE,
    RoundsToDecide,
    Spread,
    rounds_to_decide,
    within_margin,
)
from runs.inference.stats import ALPHA, FDR_Q, MAX_REPEATS_ADVISED, MIN_REPEATS, POWER, Difference

ONE_REPEAT = "one repeat shows no spread"
NO_MIN_EFFECT = "with a minimum effect of 0 there is no difference to size the repeats for"


class Verdict(StrEnum):
    """The word a compared cell gets; stable values (API, exports, pages)."""

    FASTER = "faster"
    SLOWER = "slower"
    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNDECIDED = "undecided"
    TOO_FEW_REPEATS = "too few repeats"


class Method(StrEnum):
    """Which test a verdict used; stable values (API, exports)."""

    LOG_WELCH = "log-welch"
    RANK = "rank"
    PAIRED_T = "log-paired-t"
    SIGNED_RANK = "signed-rank"


DIRECTIONS = {Verdict.FASTER, Verdict.SLOWER, Verdict.BETTER, Verdict.WORSE}


@dataclass(frozen=True)
class Question:
    """One compared cell: the repeats of a run and of the baseline at the same point;
    where both ran in the same rounds, the round of each repeat (None: not in rounds
    shared with the baseline)."""

    values: Sequence[float]
    baseline: Sequence[float]
    higher_is_better: bool
    rounds: Sequence[int] | None = None
    baseline_rounds: Sequence[int] | None = None
    # Each round's two sides ran at the same time (a duet experiment, agents/duet.py).
    simultaneous: bool = False

    @functools.cached_property
    def pairing(self) -> paired.Pairing | None:
        """The repeats matched by round; None when the cells were not measured in rounds."""
        if self.rounds is None or self.baseline_rounds is None:
            return None
        return paired.pair_rounds(
            self.values, self.rounds, self.baseline, self.baseline_rounds, self.simultaneous
        )


@dataclass(frozen=True)
class RankAnswer:
    """The rank-based difference in percent (Hodges-Lehmann), its 95 % CI (None with too
    few repeats for one) and the Mann-Whitney p (paired rounds: Wilcoxon signed-rank)."""

    pct: float
    ci_low_pct: float | None
    ci_high_pct: float | None
    p: float

    def describe(self, outliers: str, method: "Method") -> str:
        test = "Wilcoxon signed-rank" if method is Method.SIGNED_RANK else "Mann-Whitney"
        return f"rank-based ({outliers}): median ratio {self.pct:+.1f} %, {test} p = {self.p:.2g}"


@dataclass(frozen=True)
class Answer:
    """What one testable cell's chosen method found, before the table's BH adjustment."""

    method: Method
    pct: float
    p: float
    equivalence: tuple[float, float] | None
    spread: Spread
    rank: RankAnswer | None = None
    # The outliers that made the answer rank-based, in words ("" for log-Welch and paired t).
    outliers: str = ""
    # Which design answered: "paired over 7 of 8 rounds; round 3 incomplete", "unpaired",
    # "duet over 6 rounds".
    design: str = paired.UNPAIRED
    # A paired answer from simultaneous windows (a duet).
    simultaneous: bool = False

    @property
    def is_paired(self) -> bool:
        return self.method in (Method.PAIRED_T, Method.SIGNED_RANK)


@dataclass(frozen=True)
class Judgement:
    """The answer to a Question, after the whole table's p-values were adjusted."""

    difference: Difference | None
    q: float | None
    verdict: Verdict | None
    repeats_needed: int | None = None
    # Why no number of repeats can be advised (too few repeats only), else "".
    unsized_because: str = ""
    margin_pct: float = DEFAULT_MARGIN_PCT
    answer: Answer | None = None
    min_effect_pct: float = 0.0

    @functools.cached_property
    def rounds_to_decide(self) -> RoundsToDecide | None:
        """Undecided: what more rounds could show and how many (None: not undecided)."""
        if self.verdict is not Verdict.UNDECIDED or not self.answer:
            return None
        return rounds_to_decide(self.answer.spread, self.margin_pct, self.min_effect_pct)

    @property
    def rounds_needed(self) -> int | None:
        """Undecided: about how many more rounds would decide it (None: none, or too many)."""
        return self.rounds_to_decide.rounds if self.rounds_to_decide else None

    @property
    def rounds_outcome(self) -> str | None:
        """What the rounds needed are sized for: "same" (as if there were no difference),
        "different" (as if the difference were the minimum effect) or "neither"."""
        return self.rounds_to_decide.outcome if self.rounds_to_decide else None

    @property
    def method(self) -> Method | None:
        return self.answer.method if self.answer else None

    @property
    def rank(self) -> RankAnswer | None:
        return self.answer.rank if self.answer else None

    @property
    def design(self) -> str | None:
        """ "duet", "paired" or "unpaired": which comparison answered (None: no answer)."""
        if not self.answer:
            return None
        if not self.answer.is_paired:
            return paired.UNPAIRED
        return paired.DUET if self.answer.simultaneous else paired.PAIRED

    @property
    def design_note(self) -> str:
        """The design in a short phrase: "paired over 8 rounds", "unpaired"."""
        return self.answer.design if self.answer else ""

    @property
    def paired_mde_pct(self) -> float | None:
        """The smallest difference the paired rounds detect (None: not paired)."""
        if not self.answer or not self.answer.is_paired:
            return None
        spread = self.answer.spread
        return paired.paired_detectable_effect_pct(spread.sd, spread.n)

    @property
    def equivalence_pct(self) -> tuple[float, float] | None:
        """The 1 - 2 ALPHA interval of the method used, in percent (the "same" test)."""
        if not self.answer or not self.answer.equivalence:
            return None
        low, high = self.answer.equivalence
        return math.expm1(low) * 100.0, math.expm1(high) * 100.0

    @property
    def sentence(self) -> str:
        """The verdict in words with its number, as the page shows it."""
        if self.verdict in DIRECTIONS and self.answer:
            return f"{self.verdict} by {abs(self.answer.pct):.1f} %{self._interval_text()}"
        if self.verdict is Verdict.SAME:
            return f"same within ±{self.margin_pct:g} %"
        if self.verdict is Verdict.UNDECIDED and self.rounds_to_decide:
            return f"undecided: {self._rounds_text(self.rounds_to_decide)}"
        return str(self.verdict or "")

    def _rounds_text(self, needed: RoundsToDecide) -> str:
        if needed.outcome == SAME_IF_NONE:
            shows = f"show it the same within ±{self.margin_pct:g} % if there is no difference"
        elif needed.outcome == DIFFERENT_IF_MIN_EFFECT:
            shows = f"show a difference of {self.min_effect_pct:g} % if there is one that large"
        else:
            return "between the margin and the minimum effect; more rounds would not decide it"
        if needed.rounds is None:
            return f"more than {MAX_REPEATS_ADVISED} more rounds would be needed to {shows}"
        plural = "s" if needed.rounds > 1 else ""
        return f"about {needed.rounds} more round{plural} would {shows}"

    def _interval_text(self) -> str:
        if self.answer and self.answer.rank:
            low, high = self.answer.rank.ci_low_pct, self.answer.rank.ci_high_pct
        elif self.difference:
            low, high = self.difference.ci_low_pct, self.difference.ci_high_pct
        else:
            return ""
        if low is None or high is None:
            return ""
        return f" [{low:+.1f}, {high:+.1f}] ({(1 - ALPHA) * 100:.0f} % interval)"

    @property
    def explanation(self) -> str:
        """What stands behind the verdict, in one line for the page."""
        if self.verdict is Verdict.TOO_FEW_REPEATS:
            return self._too_few_text()
        if not self.answer:
            return ""
        found = []
        if self.answer.rank:
            found.append(self.answer.rank.describe(self.answer.outliers, self.answer.method))
        interval = self.equivalence_pct
        if interval and self.verdict in (Verdict.SAME, Verdict.UNDECIDED):
            confidence = (1 - 2 * ALPHA) * 100
            found.append(f"{confidence:.0f} % interval [{interval[0]:+.1f}, {interval[1]:+.1f}] %")
        return "; ".join(found)

    def _too_few_text(self) -> str:
        if self.unsized_because:
            return f"needs at least {MIN_REPEATS} repeats per run; {self.unsized_because}"
        if self.repeats_needed is None:
            return f"needs more than {MAX_REPEATS_ADVISED} repeats per run at this spread"
        return (
            f"needs {self.repeats_needed} repeats per run to find a difference "
            f"of the minimum effect significant {POWER:.0%} of the time"
        )


def _welch_answer(question: Question, difference: Difference) -> Answer:
    log_estimate = math.log1p(difference.pct / 100.0)
    logs = [np.log(np.asarray(side, dtype=float)) for side in (question.values, question.baseline)]
    spread = Spread(
        log_estimate,
        float(logs[0].std(ddof=1)),
        logs[0].size,
        float(logs[1].std(ddof=1)),
        logs[1].size,
    )
    equivalence = difference.log_equivalence
    return Answer(Method.LOG_WELCH, difference.pct, difference.p, equivalence, spread)


def _rank_answer(question: Question, outliers: str) -> Answer:
    shift = ranks.rank_shift(question.values, question.baseline, ALPHA)
    low, high = (
        (math.expm1(end) * 100.0 for end in shift.interval) if shift.interval else (None, None)
    )
    pct = math.expm1(shift.log_shift) * 100.0
    spread = Spread(
        shift.log_shift,
        ranks.robust_log_sd(question.values),
        len(question.values),
        ranks.robust_log_sd(question.baseline),
        len(question.baseline),
    )
    rank = RankAnswer(pct, low, high, shift.p)
    return Answer(Method.RANK, pct, shift.p, shift.equivalence_interval, spread, rank, outliers)


def _paired_t_answer(pairing: paired.Pairing, difference: Difference) -> Answer:
    spread = paired.paired_spread(pairing.log_ratios())
    if spread is None:
        raise ValueError("a paired answer needs at least two complete rounds")
    as_spread = Spread(spread.log_estimate, spread.sd, spread.n, 0.0, spread.n, paired=True)
    return Answer(
        Method.PAIRED_T,
        difference.pct,
        difference.p,
        difference.log_equivalence,
        as_spread,
        design=pairing.describe(),
        simultaneous=pairing.simultaneous,
    )


def _signed_rank_answer(pairing: paired.Pairing, outliers: str) -> Answer:
    log_ratios = pairing.log_ratios()
    shift = ranks.signed_rank_shift(log_ratios, ALPHA)
    low, high = (
        (math.expm1(end) * 100.0 for end in shift.interval) if shift.interval else (None, None)
    )
    pct = math.expm1(shift.log_shift) * 100.0
    sd = ranks.robust_log_sd(np.exp(log_ratios))
    spread = Spread(shift.log_shift, sd, log_ratios.size, 0.0, log_ratios.size, paired=True)
    rank = RankAnswer(pct, low, high, shift.p)
    return Answer(
        Method.SIGNED_RANK,
        pct,
        shift.p,
        shift.equivalence_interval,
        spread,
        rank,
        outliers,
        pairing.describe(),
        pairing.simultaneous,
    )


def ratio_outliers(pairing: paired.Pairing) -> str:
    """What the outlier checks find in the rounds' ratios, naming rounds ("" when they
    are log-normal)."""
    checked = find_outliers(np.exp(pairing.log_ratios()))
    found = []
    if checked.outliers:
        rounds = ", ".join(str(pairing.rounds[i]) for i in checked.outliers)
        found.append(f"outlier round{'s' if len(checked.outliers) > 1 else ''} {rounds}")
    if checked.bimodal:
        found.append("in two groups")
    return f"round ratios: {'; '.join(found)}" if found else ""


def answer(question: Question, difference: Difference) -> Answer:
    """The numbers a testable cell is judged on: log-Welch, or ranks where a side's
    repeats are not log-normal; paired (t, or signed ranks) where the rounds pair."""
    pairing = question.pairing
    if pairing is not None and pairing.is_paired:
        odd_ratios = ratio_outliers(pairing)
        if not odd_ratios:
            return _paired_t_answer(pairing, difference)
        if ranks.signed_ranks_reach(len(pairing.rounds), ALPHA):
            return _signed_rank_answer(pairing, odd_ratios)
        ranked = _rank_answer(question, odd_ratios)
        return dataclasses.replace(ranked, design=paired.too_few_for_signed_ranks(pairing))
    design = pairing.describe() if pairing is not None else paired.UNPAIRED
    sides = {"this run": question.values, "baseline": question.baseline}
    checked = {side: find_outliers(values) for side, values in sides.items()}
    odd = [
        f"{side}: {found.describe()}" for side, found in checked.items() if not found.is_log_normal
    ]
    found = _rank_answer(question, "; ".join(odd)) if odd else _welch_answer(question, difference)
    return dataclasses.replace(found, design=design)


def decide(
    found: Answer, q: float, min_effect_pct: float, margin_pct: float, higher_is_better: bool
) -> Verdict:
    """The verdict word of a cell with at least MIN_REPEATS repeats on both sides."""
    if q <= FDR_Q and abs(found.pct) >= min_effect_pct:
        if higher_is_better:
            return Verdict.FASTER if found.pct > 0 else Verdict.SLOWER
        return Verdict.BETTER if found.pct < 0 else Verdict.WORSE
    if within_margin(found.equivalence, margin_pct):
        return Verdict.SAME
    return Verdict.UNDECIDED


def _too_few(question: Question, difference: Difference | None, min_effect_pct: float) -> Judgement:
    sides = [np.asarray(side, dtype=float) for side in (question.values, question.baseline)]
    log_vars = [float(np.log(side).var(ddof=1)) for side in sides if side.size >= 2]
    if not log_vars:
        return Judgement(difference, None, Verdict.TOO_FEW_REPEATS, None, ONE_REPEAT)
    if min_effect_pct <= 0:
        return Judgement(difference, None, Verdict.TOO_FEW_REPEATS, None, NO_MIN_EFFECT)
    needed = stats.repeats_needed(math.sqrt(sum(log_vars) / len(log_vars)), min_effect_pct)
    return Judgement(difference, None, Verdict.TOO_FEW_REPEATS, needed)


def is_comparable(question: Question) -> bool:
    """Every repeat on both sides is positive: the ratio of geometric means exists."""
    sides = (np.asarray(side, dtype=float) for side in (question.values, question.baseline))
    return all(side.size and bool(np.all(side > 0)) for side in sides)


def is_testable(question: Question) -> bool:
    """Enough repeats on both sides for a verdict."""
    return min(len(question.values), len(question.baseline)) >= MIN_REPEATS


def _differences(questions: Sequence[Question]) -> list[Difference | None]:
    """Each cell's difference: of its paired rounds where they pair, else Welch's."""
    found = stats.relative_differences([(q.values, q.baseline) for q in questions])
    for i, question in enumerate(questions):
        pairing = question.pairing
        if found[i] is not None and pairing is not None and pairing.is_paired:
            found[i] = paired.paired_difference(pairing.log_ratios())
    return found


def judge(
    questions: Sequence[Question], min_effect_pct: float, margin_pct: float = DEFAULT_MARGIN_PCT
) -> list[Judgement]:
    """Judge every cell of a table; BH runs over the cells that can get a verdict.

    Cells below MIN_REPEATS still get their difference (from two repeats a
    side) but no q-value and the verdict TOO_FEW_REPEATS with the repeats
    needed. A cell whose difference cannot be computed (non-positive values)
    gets no verdict, whatever its repeats.
    """
    differences = _differences(questions)
    answers = {
        i: answer(question, difference)
        for i, (question, difference) in enumerate(zip(questions, differences, strict=True))
        if difference is not None and is_testable(question)
    }
    q_values = dict(
        zip(answers, stats.adjust_p_values([a.p for a in answers.values()]), strict=True)
    )
    judgements = []
    for i, (question, difference) in enumerate(zip(questions, differences, strict=True)):
        if not is_comparable(question):
            judgements.append(Judgement(None, None, None, margin_pct=margin_pct))
        elif i not in answers:
            judgements.append(_too_few(question, difference, min_effect_pct))
        else:
            found, q = answers[i], q_values[i]
            verdict = decide(found, q, min_effect_pct, margin_pct, question.higher_is_better)
            judgements.append(
                Judgement(difference, q, verdict, None, "", margin_pct, found, min_effect_pct)
            )
    return judgements


VERDICT_DEFAULTS: dict[str, object] = {
    "verdict_text": "",
    "verdict_method": None,
    "same_ci_low_pct": None,
    "same_ci_high_pct": None,
    "same_ci_level": (1 - 2 * ALPHA) * 100.0,
    "rounds_needed": None,
    "rounds_outcome": None,
    "rank_diff_pct": None,
    "rank_ci_low_pct": None,
    "rank_ci_high_pct": None,
    "rank_p": None,
    "design": None,
    "design_note": "",
}


def record_fields(judgement: Judgement | None) -> dict[str, object]:
    """The answer of a cell as plain values (API, exports); VERDICT_DEFAULTS without one."""
    if judgement is None:
        return VERDICT_DEFAULTS
    same, rank = judgement.equivalence_pct, judgement.rank
    return {
        "verdict_text": judgement.sentence,
        "verdict_method": str(judgement.method) if judgement.method else None,
        "same_ci_low_pct": same[0] if same else None,
        "same_ci_high_pct": same[1] if same else None,
        "same_ci_level": (1 - 2 * ALPHA) * 100.0,
        "rounds_needed": judgement.rounds_needed,
        "rounds_outcome": judgement.rounds_outcome,
        "rank_diff_pct": rank.pct if rank else None,
        "rank_ci_low_pct": rank.ci_low_pct if rank else None,
        "rank_ci_high_pct": rank.ci_high_pct if rank else None,
        "rank_p": rank.p if rank else None,
        "design": judgement.design,
        "design_note": judgement.design_note,
    }
