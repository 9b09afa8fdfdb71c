"""A point's counters: read at the measured window's start and end, divided per transaction.

Both readings are taken outside the window: the start one before the samplers
and pgbench start, the end one after pgbench was reaped and the samplers
stopped. Statistics reach the views late, so each reading first lets them
settle (`settle`):

- pgbench's backends flush their statistics when they exit, which happens
  after pgbench has gone: the reading waits until the benchmark database has
  no client connection left (at most `CLIENTS_GONE_TIMEOUT_S`);
- the auxiliary processes (WAL writer, background writer, checkpointer) and,
  before 15, the statistics collector pass theirs on within a few hundred
  milliseconds: the reading waits `STATS_SETTLE_S` more, then reads in
  autocommit after `pg_stat_clear_snapshot()`, so nothing cached is read.
"""

import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from decimal import Decimal

import psycopg
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow, dict_row

from agents.contract.reports.counters import (
    Number,
    PointCounters,
    counter_deltas,
    per_transaction,
)
from agents.observe.os_counters import disk_counters, host_context_switches, server_counters
from agents.observe.pg_counters import (
    TIMING_SQL,
    clients_sql,
    counter_queries,
    tables_sql,
    timing_settings,
)
from agents.observe.pg_statements import (
    RESET_SQL,
    UNTRACKED_SETTING,
    read_statements,
    statement_counters,
)
from agents.observe.wait_counters import wait_counters

logger = logging.getLogger(__name__)

APPLICATION_NAME = "benchlab-counters"
CONNECT_TIMEOUT_S = 5
STATEMENT_TIMEOUT = "5s"
CLIENTS_GONE_TIMEOUT_S = 10.0
CLIENTS_POLL_S = 0.05
STATS_SETTLE_S = 0.6
# The point fields that are pgbench's own totals over the window (its wait4 rusage).
PGBENCH_TOTALS = {
    "pgbench_cpu_s": "os.pgbench_cpu_s",
    "pgbench_voluntary_switches": "os.pgbench_voluntary_switches",
    "pgbench_involuntary_switches": "os.pgbench_involuntary_switches",
}

Snapshot = dict[str, Number]


@dataclass
class CounterWindow:
    """The two readings of one point, what could not be read and, when the workload
    tracks statements, pg_stat_statements' rows at the end (None: not tracked)."""

    server_version_num: int
    before: Snapshot
    after: Snapshot = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    statements: list[DictRow] | None = None


@dataclass(frozen=True)
class TrackedStatements:
    """Whose statements pg_stat_statements counts for the point: the workload's role."""

    user: str


class CounterReader:
    """Reads a server's counters through a short-lived connection, its processes' CPU time
    and the bytes of the block devices named in `devices` (those behind data and WAL).

    A connection that fails (the server went away) leaves a note in the window
    and the readings so far: whether that fails the point is the runner's decision.
    With `statements`, pg_stat_statements is reset at the start reading and read
    at the end one.
    """

    def __init__(
        self,
        conninfo: str,
        server_version_num: int,
        dbname: str,
        postmaster_pid: int | None,
        devices: set[str],
        statements: TrackedStatements | None,
    ) -> None:
        self.conninfo = conninfo
        self.server_version_num = server_version_num
        self.dbname = dbname
        self.postmaster_pid = postmaster_pid
        self.devices = devices
        self.statements = statements

    def start(self) -> CounterWindow:
        """The window with its start reading."""
        window = CounterWindow(self.server_version_num, {})
        window.before = self.read(window, at_start=True)
        return window

    def finish(self, window: CounterWindow) -> CounterWindow:
        """The window with its end reading."""
        window.after = self.read(window, at_start=False)
        return window

    def read(self, window: CounterWindow, at_start: bool) -> Snapshot:
        """The settled counters now: the server's statistics, then its processes' and the host's."""
        snapshot: Snapshot = {}
        notes = window.notes
        try:
            with self._connect(self.conninfo) as connection:
                self._settle(connection, notes)
                snapshot.update(self._statistics(connection))
                if self.statements is not None:
                    self._statements(connection, window, at_start, self.statements)
            snapshot.update(self._tables())
        except psycopg.OperationalError as error:
            message = str(error).strip() or type(error).__name__
            logger.warning("reading the server's counters failed: %s", message)
            notes.append(f"the server's statistics could not be read: {message}")
        if self.postmaster_pid is not None:
            snapshot.update(server_counters(self.postmaster_pid))
        snapshot.update(disk_counters(self.devices))
        snapshot.update(host_context_switches())
        return snapshot

    def _connect(self, conninfo: str) -> psycopg.Connection[DictRow]:
        """A reading's connection, its settings given at connect time so that it runs no
        statement of its own (in the benchmark database each would be a commit in the
        window) and, when statements are tracked, none of its statements is counted."""
        options = f"-c statement_timeout={STATEMENT_TIMEOUT}"
        if self.statements is not None:
            options += f" -c {UNTRACKED_SETTING}"
        return psycopg.connect(
            conninfo,
            autocommit=True,
            application_name=APPLICATION_NAME,
            connect_timeout=CONNECT_TIMEOUT_S,
            row_factory=dict_row,
            options=options,
        )

    def _settle(self, connection: psycopg.Connection[DictRow], notes: list[str]) -> None:
        deadline = time.monotonic() + CLIENTS_GONE_TIMEOUT_S
        query = clients_sql(self.server_version_num)
        while _count(connection.execute(query, {"dbname": self.dbname}).fetchone()) > 0:
            if time.monotonic() > deadline:
                notes.append(
                    f"pgbench's connections were still open after {CLIENTS_GONE_TIMEOUT_S:.0f} s: "
                    "their last statistics may be missing"
                )
                break
            time.sleep(CLIENTS_POLL_S)
        time.sleep(STATS_SETTLE_S)
        connection.execute("SELECT pg_stat_clear_snapshot()")

    def _statements(
        self,
        connection: psycopg.Connection[DictRow],
        window: CounterWindow,
        at_start: bool,
        tracked: TrackedStatements,
    ) -> None:
        if at_start:
            connection.execute(RESET_SQL)
            return
        window.statements = read_statements(
            connection, self.server_version_num, self.dbname, tracked.user
        )

    def _statistics(self, connection: psycopg.Connection[DictRow]) -> Snapshot:
        values: Snapshot = {}
        for query in counter_queries(self.server_version_num):
            row = connection.execute(query, {"dbname": self.dbname}).fetchone()
            if row is not None:
                values.update({key: _number(value) for key, value in row.items()})
        for setting, keys in timing_settings(self.server_version_num).items():
            timing = connection.execute(TIMING_SQL, {"setting": setting}).fetchone()
            if timing is None or not timing["timed"]:
                for key in keys:
                    values.pop(key, None)
        return values

    def _tables(self) -> Snapshot:
        """The benchmark database's tables' counters, over a connection to that database
        (the start reading's two commits there, its connection's start and its query, are
        the only ones the window sees of the readings)."""
        with self._connect(make_conninfo(self.conninfo, dbname=self.dbname)) as connection:
            row = connection.execute(tables_sql(self.server_version_num)).fetchone()
        return {key: _number(value) for key, value in row.items()} if row is not None else {}


def _count(row: DictRow | None) -> int:
    return int(row["clients"]) if row is not None else 0


def _number(value: object) -> Number:
    """A statistics column as int, or float for times (psycopg gives Decimal for sums)."""
    if isinstance(value, Decimal) and value == value.to_integral_value():
        return int(value)
    if isinstance(value, int | float | Decimal):
        return value if isinstance(value, int) else float(value)
    raise TypeError(f"a statistics column read {value!r}, not a number")


def point_counters(window: CounterWindow, point: Mapping[str, object]) -> PointCounters:
    """The point's counters: the window's differences and pgbench's own totals, each
    divided by the transactions pgbench reported."""
    deltas = counter_deltas(window.before, window.after)
    deltas.update(wait_counters(point.get("server_samples")))
    for field_name, key in PGBENCH_TOTALS.items():
        total = point.get(field_name)
        if isinstance(total, int | float):
            deltas[key] = total
    transactions = point.get("transactions")
    counted = transactions if isinstance(transactions, int) else None
    counters: PointCounters = {
        "transactions": counted,
        "server_version_num": window.server_version_num,
        "deltas": deltas,
        "per_transaction": per_transaction(deltas, counted),
    }
    if window.notes:
        counters["notes"] = list(window.notes)
    if window.statements is not None:
        counters["statements"] = statement_counters(window.statements, counted)
    return counters
