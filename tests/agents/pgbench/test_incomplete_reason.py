"""Why a point whose pgbench ended is not complete (agents/sweep/local.py): the error a
run fails with names the cause, not an exit code of 0 and pgbench's vacuum line."""

from typing import Any

from agents.pgbench.process import Finished
from agents.sweep.local import incomplete_reason

VACUUM = "starting vacuum...end.\n"


def finished(exit_code: int = 0, stdout: str = "", stopped_early: bool = False) -> Finished:
    return Finished(["pgbench"], exit_code, stdout, VACUUM, 2.0, stopped_early, 0.1)


def point(**fields: Any) -> dict[str, Any]:
    return {"parse_error": None, "tps": None, "aborted": False, **fields}


def test_an_exit_0_without_a_tps_line_says_so_and_shows_stdout() -> None:
    reason = incomplete_reason(point(), finished(stdout="transaction type: <builtin>\n"))
    assert reason == (
        "its output gives no tps; stdout: transaction type: <builtin>; "
        "stderr: starting vacuum...end."
    )


def test_a_point_stopped_or_aborted_or_unreadable_says_which() -> None:
    assert incomplete_reason(point(tps=5.0), finished(stopped_early=True)) == (
        "stopped before its end"
    )
    aborted = incomplete_reason(point(tps=5.0, aborted=True), finished())
    assert aborted == "a client aborted: starting vacuum...end."
    unreadable = point(parse_error="no 'tps =' line")
    assert incomplete_reason(unreadable, finished()) == "no 'tps =' line"
    assert incomplete_reason(point(), finished(exit_code=2)) == "starting vacuum...end."
