"""`benchlab`'s exit codes, from a report's outcome (runs/verdict_report/outcome.py)."""

SAME_OR_FASTER = 0
ERROR = 1
UNDECIDED = 2
SLOWER = 3
DETACHED = 130

OUTCOME_EXITS = {"same_or_faster": SAME_OR_FASTER, "undecided": UNDECIDED, "slower": SLOWER}

HELP = """\
exit codes:
  0  every cell is the same within the margin, or faster
  2  a cell is still undecided at the budget (none slower)
  3  a cell is slower beyond the minimum effect
  1  an error (the lab refused, a run failed, nothing compared)
  130  detached with Ctrl-C: the experiment goes on (`benchlab status ID`)
"""


def exit_code(outcome: str | None, failed_runs: int = 0) -> int:
    """The exit code of a report's outcome; failed runs or no outcome make it an error."""
    if failed_runs or outcome not in OUTCOME_EXITS:
        return ERROR
    return OUTCOME_EXITS[outcome]
