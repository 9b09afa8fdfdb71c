"""Per-second server samples: checkpoints, buffer writes and allocations, WAL volume and wait
events.

One psycopg connection (autocommit, so every statement sees fresh statistics)
runs one small query per interval: the counters and the active backends by wait
event in one round trip (each trip costs the agent CPU while pgbench measures).
The counters live in different views depending on the major version, so the
SQL is chosen by major, explicitly.
"""

import logging

import psycopg
from psycopg.rows import DictRow, dict_row

from agents.contract.reports.results import Sample
from agents.observe.clock import SYSTEM_CLOCK, Clock
from agents.observe.periodic import PeriodicSampler, SampleCallback

logger = logging.getLogger(__name__)

APPLICATION_NAME = "benchlab-sampler"
OLDEST_SUPPORTED = 90200  # pg_stat_activity.state appeared in 9.2
FIRST_WITH_WAIT_EVENTS = 90600
CONNECT_TIMEOUT_S = 5
SAMPLE_INTERVAL_S = 1.0
STATEMENT_TIMEOUT = "5s"

# Before 14 there is no pg_stat_wal: WAL volume is the WAL position in bytes
# (the function was called pg_current_xlog_location before 10).
COUNTERS_SQL_10_TO_13 = """
SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint, buffers_clean, buffers_backend,
       buffers_alloc, pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint AS wal_bytes
FROM pg_stat_bgwriter
"""

COUNTERS_SQL_9 = """
SELECT checkpoints_timed, checkpoints_req, buffers_checkpoint, buffers_clean, buffers_backend,
       buffers_alloc, pg_xlog_location_diff(pg_current_xlog_location(), '0/0')::bigint AS wal_bytes
FROM pg_stat_bgwriter
"""

# Up to 16 every checkpoint and buffer counter is in pg_stat_bgwriter.
COUNTERS_SQL_14_TO_16 = """
SELECT b.checkpoints_timed, b.checkpoints_req,
       b.buffers_checkpoint, b.buffers_clean, b.buffers_backend, b.buffers_alloc,
       w.wal_bytes
FROM pg_stat_bgwriter b, pg_stat_wal w
"""

# 17 moved checkpoint counters to pg_stat_checkpointer and dropped buffers_backend:
# its counterpart is the writes of shared relation buffers by every process other
# than the checkpointer and the background writer in pg_stat_io. (The old counter
# also counted relation extensions; pg_stat_io keeps those apart, as `extends`.)
# 18 moved wal_write/wal_sync out of pg_stat_wal but kept wal_bytes.
COUNTERS_SQL_17_PLUS = """
SELECT c.num_timed AS checkpoints_timed, c.num_requested AS checkpoints_req,
       c.buffers_written AS buffers_checkpoint, b.buffers_clean,
       (SELECT coalesce(sum(io.writes), 0) FROM pg_stat_io io
         WHERE io.object = 'relation'
           AND io.backend_type NOT IN ('checkpointer', 'background writer')) AS buffers_backend,
       b.buffers_alloc, w.wal_bytes
FROM pg_stat_checkpointer c, pg_stat_bgwriter b, pg_stat_wal w
"""

# Before 9.6 pg_stat_activity has no wait events: only the active backends are counted.
ACTIVE_BACKENDS_SQL = """
SELECT count(*) AS backends FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid()
"""

WAIT_EVENTS_SQL = """
SELECT coalesce(wait_event_type || ':' || wait_event, 'CPU') AS wait_event, count(*) AS backends
FROM pg_stat_activity
WHERE state = 'active' AND pid <> pg_backend_pid()
GROUP BY 1
ORDER BY 1
"""

COUNTERS = (
    "checkpoints_timed",
    "checkpoints_req",
    "buffers_checkpoint",
    "buffers_clean",
    "buffers_backend",
    "buffers_alloc",
    "wal_bytes",
)
# Buffers allocated: read into shared buffers (pg_stat_bgwriter.buffers_alloc in every version).
RATED_COUNTERS = (
    "buffers_checkpoint",
    "buffers_clean",
    "buffers_backend",
    "buffers_alloc",
    "wal_bytes",
)


def counters_sql(server_version_num: int) -> str:
    """The query that reads the cumulative counters of this version (`server_version_num`)."""
    if server_version_num < OLDEST_SUPPORTED:
        raise ValueError("server sampling needs PostgreSQL 9.2 or later")
    if server_version_num < 100000:
        return COUNTERS_SQL_9
    if server_version_num < 140000:
        return COUNTERS_SQL_10_TO_13
    if server_version_num < 170000:
        return COUNTERS_SQL_14_TO_16
    return COUNTERS_SQL_17_PLUS


def sample_sql(server_version_num: int) -> str:
    """One sample's query: the counters, and the active backends by wait event as a JSON
    object (`wait_events`, 9.6 and later) or their count (`backends`, before)."""
    counters = counters_sql(server_version_num)
    if server_version_num < FIRST_WITH_WAIT_EVENTS:
        return f"SELECT c.*, ({ACTIVE_BACKENDS_SQL}) AS backends FROM ({counters}) c"
    as_object = "coalesce(json_object_agg(w.wait_event, w.backends), '{}')"
    events = f"SELECT {as_object} FROM ({WAIT_EVENTS_SQL}) w"
    return f"SELECT c.*, ({events}) AS wait_events FROM ({counters}) c"


def unavailable_measurements(server_version_num: int) -> list[str]:
    """What server sampling cannot measure on this version, said once per run."""
    if server_version_num < FIRST_WITH_WAIT_EVENTS:
        return ["wait events are not available before PostgreSQL 9.6 (active backends are)"]
    return []


def counter_rates(
    before: dict[str, int], after: dict[str, int], seconds: float
) -> dict[str, float | None]:
    """`<name>_per_s` for the counters whose rate matters; None across a statistics reset."""
    rates: dict[str, float | None] = {}
    for name in RATED_COUNTERS:
        delta = after[name] - before[name]
        rates[f"{name}_per_s"] = round(delta / seconds, 1) if delta >= 0 else None
    return rates


class ServerSampler(PeriodicSampler):
    """Samples a PostgreSQL server through one dedicated connection.

    If the connection fails or the server goes away, the message is kept in
    `.error`, sampling stops quietly and the samples taken so far are kept:
    whether that fails the run is the runner's decision. Any other database
    error is a bug in this module and is logged with its traceback.
    """

    thread_name = "benchlab-server-sampler"

    def __init__(
        self,
        conninfo: str,
        server_version_num: int,
        interval: float = SAMPLE_INTERVAL_S,
        on_sample: SampleCallback | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ):
        super().__init__(interval, on_sample, clock)
        self.conninfo = conninfo
        self.server_version_num = server_version_num
        self._counters_sql = counters_sql(server_version_num)
        self._sample_sql = sample_sql(server_version_num)
        self._connection: psycopg.Connection[DictRow] | None = None
        self._previous: tuple[float, dict[str, int]] | None = None

    def _begin(self) -> bool:
        try:
            self._connection = psycopg.connect(
                self.conninfo,
                autocommit=True,
                application_name=APPLICATION_NAME,
                connect_timeout=CONNECT_TIMEOUT_S,
                row_factory=dict_row,
            )
            self._connection.execute(f"SET statement_timeout = '{STATEMENT_TIMEOUT}'")
            self._previous = self._read_counters()
        except psycopg.OperationalError as error:
            self._record_error(error)
            return False
        return True

    def _sample(self) -> Sample | None:
        if self._previous is None:
            raise RuntimeError("server sampler: _sample before _begin read the baseline")
        try:
            # Prepared once, then only executed: about 40 % less of the agent's CPU a sample.
            row = self._connected().execute(self._sample_sql, prepare=True).fetchone()
        except psycopg.OperationalError as error:
            self._record_error(error)
            return None
        if row is None:
            raise RuntimeError("the sample query returned no row")
        at, counters = current = self.clock.monotonic(), _counters_of(row)
        wait_events, active = _activity_of(row)
        previous_at, previous_counters = self._previous
        self._previous = current
        return {
            "t": self.elapsed(),
            **counters,
            **counter_rates(previous_counters, counters, at - previous_at),
            "active_backends": active,
            "wait_events": wait_events,
        }

    def _end(self) -> None:
        if self._connection is not None:
            self._connection.close()

    def _read_counters(self) -> tuple[float, dict[str, int]]:
        row = self._connected().execute(self._counters_sql).fetchone()
        if row is None:
            raise RuntimeError("the counters query returned no row")
        return self.clock.monotonic(), _counters_of(row)

    def _connected(self) -> psycopg.Connection[DictRow]:
        if self._connection is None:
            raise RuntimeError("server sampler: queried before _begin connected")
        return self._connection

    def _record_error(self, error: psycopg.OperationalError) -> None:
        self.error = str(error).strip() or type(error).__name__
        logger.warning("server sampling stopped: %s", self.error)


def _counters_of(row: DictRow) -> dict[str, int]:
    return {name: int(row[name]) for name in COUNTERS}


def _activity_of(row: DictRow) -> tuple[dict[str, int] | None, int]:
    """(active backends by wait event, or None before 9.6; active backends) of a sample's row."""
    if "wait_events" not in row:
        return None, int(row["backends"] or 0)
    wait_events = {event: int(count) for event, count in sorted(row["wait_events"].items())}
    return wait_events, sum(wait_events.values())
