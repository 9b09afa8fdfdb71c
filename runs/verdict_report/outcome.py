"""What a report's cells add up to, the answer `benchlab` turns into its exit code.

`slower` when any cell is slower (or worse) beyond the minimum effect; else `undecided`
when any cell has no verdict at the budget (undecided, too few repeats); else
`same_or_faster`. `nothing_compared` when the report has no compared cell.
"""

from collections.abc import Iterable
from enum import StrEnum

from runs.analysis.verdicts import Verdict


class Outcome(StrEnum):
    """A report's answer; stable values (the API, `benchlab`'s exit codes)."""

    SAME_OR_FASTER = "same_or_faster"
    UNDECIDED = "undecided"
    SLOWER = "slower"
    NOTHING_COMPARED = "nothing_compared"


LOSING = {Verdict.SLOWER.value, Verdict.WORSE.value}
SETTLED = {Verdict.SAME.value, Verdict.FASTER.value, Verdict.BETTER.value, *LOSING}


def outcome_of(verdicts: Iterable[str | None]) -> Outcome:
    """The outcome of the compared cells' verdicts (None: the cell has none yet)."""
    given = list(verdicts)
    if not given:
        return Outcome.NOTHING_COMPARED
    if any(verdict in LOSING for verdict in given):
        return Outcome.SLOWER
    if any(verdict not in SETTLED for verdict in given):
        return Outcome.UNDECIDED
    return Outcome.SAME_OR_FASTER
