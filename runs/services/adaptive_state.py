"""What an adaptive experiment records as it goes (`Experiment.adaptive_state`, JSON):
its plan, each look, each compared point's answer (runs/services/adaptive.py)."""

import math
from typing import NotRequired, TypedDict

from runs.analysis.verdicts import Verdict


class ShownAnswer(TypedDict):
    """The numbers a point's sentence shows: the change in % and its interval at `level`
    percent (the look's; for "same", the equivalence interval). A report reads these, so
    its verdict and numbers are the look's (runs/verdict_report/document.py)."""

    pct: float
    low: float
    high: float
    level: float


class PointState(TypedDict):
    """One compared point: a cell against the first cell at one client count."""

    cell: int
    clients: int
    verdict: str
    sentence: str
    rounds: int
    # The change against the first cell in %, by the estimator that answered (log-Welch,
    # or Hodges-Lehmann when the answer is rank-based); absent before it was looked at.
    pct: NotRequired[float | None]
    # The standard error of that change on the log scale, by the design that answered
    # (the paired rounds' log ratios, or Welch's; None without spread).
    log_se: NotRequired[float | None]
    # Which design answered: "paired over 6 rounds", "unpaired" (absent before it was
    # looked at, or looked at before answers said).
    design: NotRequired[str]
    # The level in percent of the interval the sentence shows (the look's adjusted one,
    # e.g. 98.6); None: the sentence shows none. Absent on points looked at before.
    ci_level: NotRequired[float | None]
    # The sentence's numbers; absent where it shows none, and on points looked at before.
    shown: NotRequired[ShownAnswer]


class LookRecord(TypedDict):
    rounds: int
    alpha: float
    alpha_same: float
    decided: int
    at: str
    # Why this look was the last, unplanned one (the time limit ended the plan before
    # its next look); absent on planned looks.
    ended: NotRequired[str]


class Lengthened(TypedDict):
    """From `from_round` on, points run `factor` times as long, for `advice`'s reason."""

    from_round: int
    factor: int
    advice: str


class AdaptiveState(TypedDict, total=False):
    looks: list[int]
    points: list[PointState]
    looked: list[LookRecord]
    lengthened: Lengthened
    ended: str
    ended_at: str
    # Each cell is placed at the first cell's level or at that level moved by this
    # change in % (`adaptive_judge_between`, a bisection step); absent: each cell is
    # judged against the first cell.
    between_pct: float
    # The standard error (log scale) the change was measured with.
    between_se: float
    # A decided point is measured on until its change's standard error (log scale) is at
    # most this share of the change, or the budget is spent (`adaptive_require_precision`:
    # a bisection's step 0 measures the change later commits are placed against).
    precise_to: float
    # The experiments that answer one question together (a patch try's battery, one exit
    # code): each plan spends ALPHA / shared_by (`adaptive_share_alpha`); absent: 1.
    shared_by: int


def imprecise(point: PointState, share: float | None) -> bool:
    """Whether a point found to differ has its change still known to less than `share` of
    itself (a point undecided or the same has no change to know)."""
    if share is None or point["verdict"] in (Verdict.UNDECIDED, Verdict.SAME):
        return False
    pct, log_se = point.get("pct"), point.get("log_se")
    if pct is None or log_se is None or pct <= -100.0:
        return True
    return log_se > share * abs(math.log1p(pct / 100.0))


def still_open(point: PointState, share: float | None) -> bool:
    """Whether a look still judges the point and rounds are still added for it: it is
    undecided, or its change is not yet known to `share` of itself."""
    return point["verdict"] == Verdict.UNDECIDED or imprecise(point, share)
