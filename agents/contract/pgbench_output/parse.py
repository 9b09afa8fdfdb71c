"""Read pgbench output of every version from 9.2 to 18.

`parse_output` reads the stdout and stderr of one benchmark run (concatenated
or interleaved in any order) and returns one `PgbenchOutput`
(agents/contract/pgbench_output/documents.py): the summary block, the per-script blocks, the
`-r` per-statement rows, the `-P` progress lines, and the error and abort
lines seen on stderr. What it counts on in those formats is in docs/pgbench.md.

Only the summary block is read strictly: a line that starts like one of its
lines (`latency average = `, a statement row inside the `-r` block, ...) but
does not read is an error that names the line. Any other line it does not
know (threads interleaving their stderr mid-line, the tab-indented lines of a
multi-line server message, wording of a future release) is kept verbatim in
`messages`, so a message never costs a point its numbers.

The summary and per-script lines are read by the rules of summary_lines.py;
`pgbench -i` progress lines (init_progress.py) count as notices.
"""

import re

from agents.contract.pgbench_output.documents import (
    PgbenchOutput,
    ScriptSummary,
    empty_output,
    empty_script,
)
from agents.contract.pgbench_output.init_progress import parse_init_progress
from agents.contract.pgbench_output.summary_lines import (
    HEADER,
    NUM,
    SCRIPT_LINE_START,
    SCRIPT_RULES,
    STATEMENT_ROW_START,
    SUMMARY_LINE_START,
    SUMMARY_RULES,
    int_or_none,
)


class PgbenchParseError(ValueError):
    """A line of pgbench output that could not be read (`line_no` is 1-based)."""

    def __init__(self, line_no: int | None, line: str | None, reason: str = "cannot read"):
        self.line_no = line_no
        self.line = line
        if line_no is None:
            super().__init__(reason)
        else:
            super().__init__(f'line {line_no}: {reason} "{line}"')


def _float_or_none(text: str | None) -> float | None:
    return None if text is None else float(text)


SCRIPT_HEADER = re.compile(r"SQL script (\d+): (.*)|script statistics:")
STATEMENTS_HEADING = re.compile(
    r"( - )?statement latencies in milliseconds"
    r"(?:, file (\d+)|( and failures)|(, failures and retries))?:"
)
TAB_ROW = re.compile(r"\t" + NUM + r"\t(.*)")
PROGRESS = re.compile(
    r"progress(?: \d+)?: "
    + NUM
    + " s, "
    + NUM
    + " tps, lat "
    + NUM
    + " ms stddev "
    + NUM
    + r"(?:, (\d+) failed)?(?:, lag "
    + NUM
    + r" ms)?(?:, (\d+) skipped)?"
    r"(?:, (\d+) retried, (\d+) retries)?"
)

# Threads write a message's parts ("pgbench: ", "error: ", the text) separately, so
# the parts of messages printed at the same moment interleave: prefixes repeat.
PREFIXES = r"(?:(?:pgbench|error|fatal): )*"
SERVER_ERROR = re.compile(r"(?:ERROR|FATAL|PANIC):\s")
SERVER_MESSAGE = re.compile(
    r"(?:ERROR|FATAL|PANIC|WARNING|NOTICE|INFO|LOG|DEBUG\d?|DETAIL|HINT|CONTEXT|QUERY|STATEMENT"
    r"|LOCATION):\s|LINE \d+: |\s*\^\s*$|\tIs the server running"
)
PGBENCH_ERROR = re.compile(r"pgbench: (?:(?:pgbench|error|fatal): )*?(?:error|fatal): ")
CLIENT_ABORT = re.compile(PREFIXES + r"[Cc]lient \d+ .*aborted")
RUN_ABORTED = re.compile(PREFIXES + r"Run was aborted")
PLAIN_ERROR = re.compile(
    r"(?:[Cc]onnection to database \".*\" failed|could not |Perhaps you need to do initialization)"
)
PLAIN_NOTICE = re.compile(
    r"pgbench: |[Cc]lient \d+ |\(ignoring this error and continuing anyway\)$|end\.$"
    r"|scale option ignored, using count from pgbench_branches table"
)
VACUUM = re.compile(r"starting vacuum\.\.\.(.*)")


class _Reader:
    """Walks the lines once; remembers which block (summary, script, statements) it is in."""

    def __init__(self) -> None:
        self.result = empty_output()
        self.seen_summary = False
        self.script: ScriptSummary | None = None
        self.statement_columns = 0
        self.statement_script: int | None = None

    def read(self, line_no: int, line: str) -> None:
        readers = (
            self._blank,
            self._progress,
            self._statement_row,
            self._header,
            self._summary,
            self._script_line,
            self._statements_heading,
            self._stderr_message,
        )
        if any(reader(line) for reader in readers):
            return
        if self._claims_summary(line):
            raise PgbenchParseError(line_no, line)
        self.result["messages"].append(line)

    def _claims_summary(self, line: str) -> bool:
        """True for a line that starts like a summary, per-script or statement line."""
        if SUMMARY_LINE_START.match(line):
            return True
        if self.script is not None and line.startswith(" - "):
            return bool(SCRIPT_LINE_START.match(line))
        return bool(self.statement_columns and STATEMENT_ROW_START.match(line))

    def _blank(self, line: str) -> bool:
        return not line.strip()

    def _progress(self, line: str) -> bool:
        match = PROGRESS.fullmatch(line)
        if not match:
            return False
        t, tps, lat, stddev, failed, lag, skipped, retried, retries = match.groups()
        self.result["progress"].append(
            {
                "t": float(t),
                "tps": float(tps),
                "latency_ms": float(lat),
                "stddev_ms": float(stddev),
                "failed": int_or_none(failed),
                "lag_ms": _float_or_none(lag),
                "skipped": int_or_none(skipped),
                "retried": int_or_none(retried),
                "retries": int_or_none(retries),
            }
        )
        return True

    def _header(self, line: str) -> bool:
        match = HEADER.fullmatch(line)
        if not match:
            return False
        self.result["pgbench_version"] = match.group(1)
        self.result["server_version"] = match.group(2) or _plain_version(match.group(1))
        return True

    def _summary(self, line: str) -> bool:
        for pattern, store in SUMMARY_RULES:
            match = pattern.fullmatch(line)
            if match:
                store(self.result, match)
                self.seen_summary = True
                self.statement_columns = 0
                return True
        return False

    def _script_line(self, line: str) -> bool:
        header = SCRIPT_HEADER.fullmatch(line)
        if header:
            number, name = header.groups()
            self.script = empty_script(int(number) if number else 1, name)
            self.result["scripts"].append(self.script)
            self.statement_columns = 0
            return True
        if self.script is None or not line.startswith(" - "):
            return False
        for pattern, store in SCRIPT_RULES:
            match = pattern.fullmatch(line)
            if match:
                store(self.script, match)
                return True
        return False

    def _statements_heading(self, line: str) -> bool:
        match = STATEMENTS_HEADING.fullmatch(line)
        if not match:
            return False
        in_script, file_no, failures, retries = match.groups()
        self.statement_columns = 3 if retries else 2 if failures else 1
        if file_no is not None:
            self.statement_script = int(file_no)
        elif in_script and self.script is not None:
            self.statement_script = self.script["number"]
        else:
            self.statement_script = 1
        return True

    def _statement_row(self, line: str) -> bool:
        if not self.statement_columns:
            return False
        tab_row = TAB_ROW.fullmatch(line)
        if tab_row:
            self._add_statement(float(tab_row.group(1)), None, None, tab_row.group(2))
            return True
        fields = line.split(None, self.statement_columns)
        if len(fields) <= self.statement_columns or not line.startswith("   "):
            return False
        try:
            latency = float(fields[0])
            counts: list[int | None] = [int(value) for value in fields[1 : self.statement_columns]]
        except ValueError:
            return False
        failures, retries = [*counts, None, None][:2]
        self._add_statement(latency, failures, retries, fields[-1])
        return True

    def _add_statement(
        self, latency: float, failures: int | None, retries: int | None, command: str
    ) -> None:
        self.result["statements"].append(
            {
                "latency_ms": latency,
                "command": command,
                "failures": failures,
                "retries": retries,
                "script": self.statement_script,
            }
        )

    def _stderr_message(self, line: str) -> bool:
        vacuum = VACUUM.fullmatch(line)
        if vacuum:
            rest = vacuum.group(1)
            if rest and rest != "end.":
                self._stderr_message(rest)
            return True
        is_abort = bool(CLIENT_ABORT.match(line) or RUN_ABORTED.match(line))
        if is_abort or SERVER_ERROR.match(line) or PGBENCH_ERROR.match(line):
            self.result["aborted"] = self.result["aborted"] or is_abort
            self.result["aborted_clients"] += bool(CLIENT_ABORT.match(line))
            self.result["errors"].append(line)
            return True
        if PLAIN_ERROR.match(line):
            self.result["errors"].append(line)
            return True
        if SERVER_MESSAGE.match(line) or PLAIN_NOTICE.match(line):
            self.result["notices"].append(line)
            return True
        if parse_init_progress(line) is not None:
            self.result["notices"].append(line)
            return True
        return False


def _plain_version(version: str) -> str:
    """The server version when the header shows only one: pgbench and server match exactly."""
    return version.split(" ", 1)[0]


def _major(version: str | None) -> int | None:
    match = re.match(r"(\d+)", version or "")
    return int(match.group(1)) if match else None


def _fill_known_failures(result: PgbenchOutput) -> None:
    """18 stops the summary after "processed" when nothing ran: then no transaction failed."""
    counts_failures = (_major(result["pgbench_version"]) or 0) >= 15 or result["max_tries"]
    if result["failed"] is None and counts_failures and result["transactions"] == 0:
        result["failed"] = 0


def parse_output(text: str) -> PgbenchOutput:
    """Parse one pgbench run's stdout and stderr; raise PgbenchParseError on a bad summary line.

    `tps` excludes the initial connection time: the "excluding connections
    establishing" value up to 13, "without initial connection time" from 14,
    or "including reconnection times" with -C (`tps_including_connections`
    keeps the other value of 13 and older). `transactions` is "actually
    processed" (successful ones), `transactions_planned` the total of -t runs.
    Values a version or run does not print are None, except `failed`, which
    is 0 on an 18 run that stopped its summary because nothing ran.

    Lists: `statements` ({latency_ms, command, failures, retries, script},
    script numbered from 1 as in "SQL script N"), `scripts` (one dict per
    per-script block), `progress` ({t, tps, latency_ms, stddev_ms, failed,
    lag_ms, skipped, retried, retries}), `errors` (server ERROR/FATAL lines,
    `pgbench: error|fatal:` lines, client aborts, "Run was aborted"),
    `notices` (every other known stderr line) and `messages` (lines of no
    known kind, verbatim). `aborted` is True when a client or the run was
    aborted. A line that starts like a summary line but does not read raises
    PgbenchParseError naming it, as does input with neither a summary nor
    progress lines (with `line_no` None).
    """
    reader = _Reader()
    for line_no, raw in enumerate(text.split("\n"), start=1):
        reader.read(line_no, raw.rstrip("\r"))
    result = reader.result
    if not reader.seen_summary and not result["progress"]:
        last_error = f" (last error: {result['errors'][-1]})" if result["errors"] else ""
        raise PgbenchParseError(None, None, f"no pgbench summary or progress lines{last_error}")
    _fill_known_failures(result)
    return result
