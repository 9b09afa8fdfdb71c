"""Reading the stderr lines of `pgbench -i`: tuples loaded, the steps, the final timings."""

import re

from agents.contract.pgbench_output.documents import InitProgress

INIT_TUPLES = re.compile(
    r"(\d+) of (\d+) tuples \((\d+)%\)(?: of (\w+))? done"
    r" \(elapsed ([\d.]+) s, remaining ([\d.]+) s\)\.?"
)
INIT_DONE = re.compile(r"done in ([\d.]+) s \((.*)\)\.")
INIT_STEP = re.compile(
    r"(?:dropping old tables|creating tables|creating \d+ partitions"
    r"|generating data(?: \((?:client|server)-side\))?|vacuum(?:ing)?|creating primary keys"
    r"|set primary keys|creating foreign keys|set foreign keys)\.\.\.|done\."
)
STEP_TIME = re.compile(r"(.+?) ([\d.]+) s")


def parse_init_progress(line: str) -> InitProgress | None:
    """Read one stderr line of `pgbench -i`; None when the line is not an init message.

    Returns {"percent", "table", "message", "step_seconds"}: percent is the
    share of tuples loaded (100 on the final done line, None for step
    messages); table is the table being loaded (pgbench_accounts before 17,
    which only report that table); step_seconds maps step names to seconds on
    the 13+ "done in" line, with "total" for the whole run.
    """
    segments = [part.strip() for part in line.split("\r")]
    message = next((part for part in reversed(segments) if part), "")
    progress: InitProgress = {
        "percent": None,
        "table": None,
        "message": message,
        "step_seconds": {},
    }
    tuples = INIT_TUPLES.fullmatch(message)
    if tuples:
        done, total = int(tuples.group(1)), int(tuples.group(2))
        progress["percent"] = 100.0 * done / total if total else 100.0
        progress["table"] = tuples.group(4) or "pgbench_accounts"
        return progress
    finished = INIT_DONE.fullmatch(message)
    if finished:
        parts = (STEP_TIME.fullmatch(part) for part in finished.group(2).split(", "))
        steps = {part.group(1): float(part.group(2)) for part in parts if part}
        progress["step_seconds"] = {**steps, "total": float(finished.group(1))}
        progress["percent"] = 100.0
        return progress
    if INIT_STEP.fullmatch(message):
        progress["percent"] = 100.0 if message == "done." else None
        return progress
    return None
