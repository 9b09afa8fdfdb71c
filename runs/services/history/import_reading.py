"""Reading an uploaded pgbench output: its runs, the version it states, what it lacks.

The parser is the agent's own (`agents.contract.pgbench_output.parse`, docs/decisions.md).
A file is split into one chunk per pgbench run (a sweep written to one log),
each chunk parsed on its own; a chunk that cannot become a point raises
FileRefused with a message naming the file, the lines and what is missing.
"""

import re
from dataclasses import dataclass

from agents.contract.pgbench_output.documents import PgbenchOutput
from agents.contract.pgbench_output.parse import PgbenchParseError, parse_output

# A line that begins the next pgbench run of a log once a summary has ended.
RUN_START = re.compile(r"(pgbench \(|starting vacuum|progress[: ]|transaction type:|\$ )")
SUMMARY_START = "transaction type:"
SUMMARY_END = re.compile(r"tps = ")
# Where an output states the PostgreSQL version besides pgbench's 14+ header (13 and
# older print none): `pgbench --version` or `psql --version` ("pgbench (PostgreSQL)
# 13.16"), `SELECT version()` ("PostgreSQL 13.16 on x86_64-pc-linux-gnu, compiled by
# ..."), psql's `SHOW server_version` (the name, a rule, the value) and a line such as
# "server_version: 13.16" or "server version = 13.16".
VERSION_STATEMENTS = (
    re.compile(r"^\s*(?:pgbench|psql) \(PostgreSQL\) (\d+(?:\.\d+)*)", re.MULTILINE),
    re.compile(r"^\s*PostgreSQL (\d+(?:\.\d+)+) on ", re.MULTILINE),
    re.compile(r"^\s*server_version\s*\n\s*-+\s*\n\s*(\d+(?:\.\d+)*)", re.MULTILINE),
    re.compile(r"^\s*server[_ ]version\s*[:=]\s*(\d+(?:\.\d+)*)", re.MULTILINE | re.IGNORECASE),
)


class FileRefused(ValueError):
    """A file of the batch that cannot be imported; the message names file and line."""


@dataclass(frozen=True)
class UploadedOutput:
    """One file of a batch: its name as uploaded and its bytes."""

    name: str
    content: bytes


def parse_points(upload: UploadedOutput) -> list[PgbenchOutput]:
    """The pgbench runs in one file, in order; FileRefused names the file and the line."""
    lines = file_text(upload).split("\n")
    return [_parse_chunk(upload.name, lines, first, last) for first, last in run_chunks(lines)]


def file_text(upload: UploadedOutput) -> str:
    try:
        return upload.content.decode("utf-8")
    except UnicodeDecodeError as error:
        raise FileRefused(f"{upload.name}: not UTF-8 text (byte {error.start})") from error


def run_chunks(lines: list[str]) -> list[tuple[int, int]]:
    """(first, end) line ranges of each pgbench run in a log, split between summaries."""
    summaries = [i for i, line in enumerate(lines) if line.startswith(SUMMARY_START)]
    starts = [0]
    for previous, following in zip(summaries, summaries[1:], strict=False):
        starts.append(_next_run_start(lines, previous, following))
    return list(zip(starts, [*starts[1:], len(lines)], strict=True))


def _next_run_start(lines: list[str], previous: int, following: int) -> int:
    tps_lines = [i for i in range(previous, following) if SUMMARY_END.match(lines[i])]
    after = tps_lines[-1] + 1 if tps_lines else previous + 1
    return next((i for i in range(after, following) if RUN_START.match(lines[i])), following)


def _parse_chunk(name: str, lines: list[str], first: int, end: int) -> PgbenchOutput:
    where = f"{name}: lines {first + 1}-{end}"
    try:
        parsed = parse_output("\n".join(lines[first:end]))
    except PgbenchParseError as error:
        if error.line_no is None:
            raise FileRefused(f"{where}: {error}") from error
        line_no = first + error.line_no
        raise FileRefused(f'{name}: line {line_no}: cannot read "{error.line}"') from error
    missing = summary_missing(parsed)
    if missing:
        raise FileRefused(f"{where}: {missing}")
    return parsed


def summary_missing(parsed: PgbenchOutput) -> str | None:
    """Why a parsed run cannot be a point, in the words of what the output holds; None if it can.

    pgbench prints its summary's first lines (clients, transactions processed)
    even when no transaction finished, and then no tps line (15+ stop the
    block there; a run whose clients all aborted): that output holds a summary.
    """
    if parsed["tps"] is not None and parsed["clients"] is not None:
        return None
    if parsed["clients"] is None:
        what = "no 'tps =' line either" if parsed["tps"] is None else "but a 'tps =' line"
        return (
            f"no pgbench summary: no 'number of clients' line, {what}; upload what pgbench "
            "printed, stdout and stderr"
        )
    processed = parsed["transactions"]
    planned = parsed["transactions_planned"]
    done = "no" if processed is None else f"{processed:,}"
    of = f" of {planned:,}" if planned else ""
    aborted = f" (last error: {parsed['errors'][-1]})" if parsed["errors"] else ""
    return (
        f"pgbench's summary shows {done}{of} transactions processed and no 'tps =' line: "
        f"the run measured nothing to import{aborted}"
    )


def stated_version(parsed: PgbenchOutput, text: str) -> str | None:
    """The server version the output states: pgbench's header (14+), else a
    `pgbench --version` or `SELECT version()` line kept in the file."""
    header = parsed["server_version"] or parsed["pgbench_version"]
    if header:
        return header
    for statement in VERSION_STATEMENTS:
        match = statement.search(text)
        if match:
            return match.group(1)
    return None


def derived_latency_ms(parsed: PgbenchOutput) -> float | None:
    """The average latency of a run whose pgbench printed none (9.2, 9.3), in ms: each
    client has one transaction in flight, so latency = clients / tps (Little's law, what
    9.4+ print without -P or -R); None when pgbench printed it or tps is 0."""
    if parsed["latency_avg_ms"] is not None or not parsed["tps"] or not parsed["clients"]:
        return None
    return 1000.0 * parsed["clients"] / parsed["tps"]
