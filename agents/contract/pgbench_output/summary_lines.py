"""The lines of pgbench's summary and per-script blocks, every version from 9.2 to 18.

Each line is a (regex, store) rule: the regex reads the line whole, the store puts
its values into the `PgbenchOutput` (agents/contract/pgbench_output/documents.py)
or into one `ScriptSummary` under keys typed as `Literal` unions. The line starts
derived from the rules tell the reader (parse.py) which lines claim to be summary
lines and so must read. How the lines differ by version: docs/pgbench.md.
"""

import re
from collections.abc import Callable, Sequence

from agents.contract.pgbench_output.documents import (
    PgbenchOutput,
    ScriptSummary,
    SharedCount,
    SharedTime,
    SummaryCountKey,
    SummaryText,
    SummaryTimeKey,
    TpsKey,
)

NUM = r"(-?(?:\d+(?:\.\d+)?|(?i:nan|inf)))"
PCT = r"\(" + NUM + r" ?%\)"
INT = r"(\d+)"
# The failure counters both the summary and a per-script block print (the latter after " - ").
FAILURE_LINES: dict[SharedCount, str] = {
    "failed": r"number of failed transactions: " + INT + " " + PCT,
    "serialization_failures": r"number of serialization failures: " + INT + " " + PCT,
    "deadlock_failures": r"number of deadlock failures: " + INT + " " + PCT,
    "retried": r"number of transactions retried: " + INT + " " + PCT,
    "retries": r"total number of retries: " + INT,
    "skipped": r"number of transactions skipped: " + INT + " " + PCT,
}


def int_or_none(text: str | None) -> int | None:
    """The integer a regex group read, or None when the group did not match."""
    return None if text is None else int(text)


SummaryStore = Callable[[PgbenchOutput, re.Match[str]], None]
ScriptStore = Callable[[ScriptSummary, re.Match[str]], None]


HEADER = re.compile(r"pgbench \((.+?)(?:, server ([^,]+))?\)")

TPS_KEYS: dict[str, TpsKey] = {
    "including connections establishing": "tps_including_connections",
    "excluding connections establishing": "tps",
    "without initial connection time": "tps",
    "including reconnection times": "tps",
}


def summary_count(key: SummaryCountKey) -> SummaryStore:
    """A store that puts the first group of the match, an integer, under `key`."""

    def store(result: PgbenchOutput, match: re.Match[str]) -> None:
        result[key] = int(match.group(1))

    return store


def summary_time(key: SummaryTimeKey) -> SummaryStore:
    """A store that puts the first group of the match, milliseconds, under `key`."""

    def store(result: PgbenchOutput, match: re.Match[str]) -> None:
        result[key] = float(match.group(1))

    return store


def summary_text(key: SummaryText) -> SummaryStore:
    """A store that puts the first group of the match, as it reads, under `key`."""

    def store(result: PgbenchOutput, match: re.Match[str]) -> None:
        result[key] = match.group(1)

    return store


def script_count(key: SharedCount) -> ScriptStore:
    """A per-script store that puts the first group of the match, an integer, under `key`."""

    def store(script: ScriptSummary, match: re.Match[str]) -> None:
        script[key] = int(match.group(1))

    return store


def script_time(key: SharedTime) -> ScriptStore:
    """A per-script store that puts the first group of the match, milliseconds, under `key`."""

    def store(script: ScriptSummary, match: re.Match[str]) -> None:
        script[key] = float(match.group(1))

    return store


def _summary_rules() -> list[tuple[re.Pattern[str], SummaryStore]]:
    """(regex, store) pairs for the lines of the summary block, all versions together."""

    def processed(result: PgbenchOutput, match: re.Match[str]) -> None:
        result["transactions"] = int(match.group(1))
        result["transactions_planned"] = int_or_none(match.group(2))

    def late(result: PgbenchOutput, match: re.Match[str]) -> None:
        result["latency_limit_ms"] = float(match.group(1))
        result["late"] = int(match.group(2))

    def latency(result: PgbenchOutput, match: re.Match[str]) -> None:
        result["latency_avg_ms"] = float(match.group(1))
        result["latency_includes_failures"] = match.group(2) is not None

    def lag(result: PgbenchOutput, match: re.Match[str]) -> None:
        result["lag_avg_ms"] = float(match.group(1))
        result["lag_max_ms"] = float(match.group(2))

    def tps(result: PgbenchOutput, match: re.Match[str]) -> None:
        result[TPS_KEYS[match.group(2)]] = float(match.group(1))

    rules: list[tuple[str, SummaryStore]] = [
        (r"transaction type: (.+)", summary_text("transaction_type")),
        (r"scaling factor: " + INT, summary_count("scale")),
        (r"partition method: (\w+)", summary_text("partition_method")),
        (r"partitions: " + INT, summary_count("partitions")),
        (r"query mode: (\w+)", summary_text("query_mode")),
        (r"number of clients: " + INT, summary_count("clients")),
        (r"number of threads: " + INT, summary_count("threads")),
        (r"maximum number of tries: " + INT, summary_count("max_tries")),
        (r"number of transactions per client: " + INT, summary_count("transactions_per_client")),
        (r"duration: " + INT + " s", summary_count("duration_s")),
        (r"number of transactions actually processed: " + INT + r"(?:/(\d+))?", processed),
        *[(pattern, summary_count(key)) for key, pattern in FAILURE_LINES.items()],
        (
            r"number of transactions above the "
            + NUM
            + r" ms latency limit: "
            + INT
            + r"(?:/\d+)? "
            + PCT,
            late,
        ),
        (
            r"zipfian cache array overflowed " + INT + r" time\(s\)",
            summary_count("zipfian_overflows"),
        ),
        (r"latency average(?::|\s=) " + NUM + r" ms( \(including failures\))?", latency),
        (r"latency stddev(?::|\s=) " + NUM + " ms", summary_time("latency_stddev_ms")),
        (r"rate limit schedule lag: avg " + NUM + r" \(max " + NUM + r"\) ms", lag),
        (r"initial connection time = " + NUM + " ms", summary_time("initial_connection_ms")),
        (r"average connection time = " + NUM + " ms", summary_time("average_connection_ms")),
        (r"tps = " + NUM + r" \((" + "|".join(TPS_KEYS) + r")\)", tps),
    ]
    return [(re.compile(pattern), store) for pattern, store in rules]


def _script_rules() -> list[tuple[re.Pattern[str], ScriptStore]]:
    """(regex, store) pairs for the ` - ` lines of a per-script block."""

    def weight(script: ScriptSummary, match: re.Match[str]) -> None:
        script["weight"] = int(match.group(1))
        script["weight_percent"] = float(match.group(2))

    def transactions(script: ScriptSummary, match: re.Match[str]) -> None:
        script["transactions"] = int(match.group(1))
        script["percent_of_total"] = float(match.group(2))
        if match.group(3) is not None:
            script["tps"] = float(match.group(3))

    def processed(script: ScriptSummary, match: re.Match[str]) -> None:
        script["processed"] = int(match.group(1))
        script["tps"] = float(match.group(2))

    rules: list[tuple[str, ScriptStore]] = [
        (r"weight: " + INT + r" \(targets " + NUM + "% of total\\)", weight),
        (INT + r" transactions \(" + NUM + r"% of total(?:, tps = " + NUM + r")?\)", transactions),
        (
            r"number of transactions actually processed: " + INT + r" \(tps = " + NUM + r"\)",
            processed,
        ),
        *[(pattern, script_count(key)) for key, pattern in FAILURE_LINES.items()],
        (r"latency average = " + NUM + " ms", script_time("latency_avg_ms")),
        (r"latency stddev = " + NUM + " ms", script_time("latency_stddev_ms")),
    ]
    return [(re.compile(r" - " + pattern), store) for pattern, store in rules]


SUMMARY_RULES = _summary_rules()
SCRIPT_RULES = _script_rules()


def _line_starts(rules: Sequence[tuple[re.Pattern[str], object]]) -> list[str]:
    """How the lines of `rules` begin: the literal words before each rule's first value."""
    starts = {re.match(r"(?: - )?[A-Za-z][- A-Za-z:=]*", rule.pattern) for rule, _ in rules}
    return [re.escape(start.group()) for start in starts if start]


# A line starting like this claims to be a summary or per-script line: it must read.
SUMMARY_LINE_START = re.compile("|".join(_line_starts(SUMMARY_RULES)))
SCRIPT_LINE_START = re.compile("|".join([*_line_starts(SCRIPT_RULES), r" - \d+ transactions "]))
STATEMENT_ROW_START = re.compile(r"(?: {3,}|\t)" + NUM + r"\s")
