"""pg_stat_statements around a point, for a workload that tracks statements.

The agent loads the library itself (`shared_preload_libraries`, a setting no lab
user may send: it loads code into the server) when `workload.track_statements`
asks for it, creates the extension as the superuser in its own database
(`postgres`, where the counter reader connects; the view covers every
database, and the benchmark database stays as pgbench and setup SQL left it),
and then, for each point, resets the view at the window's start and reads
pgbench's statements at its end. Only statements run by the workload's role in
the benchmark database count; the counter reader's own session is not tracked
(`pg_stat_statements.track = none`, which a superuser may set for its session).
"""

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
from psycopg.rows import DictRow

from agents.contract.errors import JobError
from agents.contract.reports.counters import StatementCounters
from agents.contract.spec.document import SettingValue

if TYPE_CHECKING:
    from agents.postgres.cluster.lifecycle import Cluster
    from agents.postgres.installs.inventory import Install

LIBRARY = "pg_stat_statements"
FIRST_WITH_EXEC_TIME = 130000
MOST_STATEMENTS = 20
QUERY_CHARS = 2000

UNTRACKED_SETTING = "pg_stat_statements.track=none"
RESET_SQL = "SELECT pg_stat_statements_reset()"
STATEMENTS_SQL = """
SELECT s.query, s.calls, s.{total} AS total_ms, s.rows,
       s.shared_blks_hit, s.shared_blks_read, s.shared_blks_dirtied, s.shared_blks_written,
       s.temp_blks_written
FROM pg_stat_statements s
JOIN pg_database d ON d.oid = s.dbid
JOIN pg_roles r ON r.oid = s.userid
WHERE d.datname = %(dbname)s AND r.rolname = %(user)s AND s.calls > 0
ORDER BY s.{total} DESC
LIMIT {limit}
"""


def check_available(install: "Install") -> None:
    """Refuse, before a cluster exists, an install whose build has no pg_stat_statements
    (a source build that did not install contrib)."""
    library = Path(install.root) / "lib" / f"{LIBRARY}.so"
    if not library.is_file():
        raise JobError(
            "version_unavailable",
            f"PostgreSQL {install.version} here has no {LIBRARY} ({library} is missing): "
            "turn statement statistics off, or use a build that installs contrib",
            field="workload.track_statements",
        )


def with_library(requested: Mapping[str, SettingValue]) -> dict[str, SettingValue]:
    """The settings to apply: the requested ones (validated, so without any preload
    library) and the library the agent loads."""
    return {**requested, "shared_preload_libraries": LIBRARY}


def create_extension(cluster: "Cluster") -> None:
    """The extension in the agent's own database, created by the superuser."""
    with cluster.connect() as conn:
        conn.execute(f"CREATE EXTENSION IF NOT EXISTS {LIBRARY}")


def statements_sql(server_version_num: int) -> str:
    """The workload's statements, most execution time first (13 renamed total_time)."""
    total = "total_exec_time" if server_version_num >= FIRST_WITH_EXEC_TIME else "total_time"
    return STATEMENTS_SQL.format(total=total, limit=MOST_STATEMENTS)


def read_statements(
    connection: psycopg.Connection[DictRow], server_version_num: int, dbname: str, user: str
) -> list[DictRow]:
    """The rows of the workload's statements since the last reset."""
    query = statements_sql(server_version_num)
    return connection.execute(query, {"dbname": dbname, "user": user}).fetchall()


def statement_counters(rows: list[DictRow], transactions: int | None) -> list[StatementCounters]:
    """The rows as a point's statements, with calls per pgbench transaction."""
    return [
        {
            "query": str(row["query"])[:QUERY_CHARS],
            "calls": int(row["calls"]),
            "calls_per_transaction": (
                float(f"{int(row['calls']) / transactions:.6g}") if transactions else None
            ),
            "total_ms": float(f"{float(row['total_ms']):.6g}"),
            "mean_ms": float(f"{float(row['total_ms']) / int(row['calls']):.6g}"),
            "rows": int(row["rows"]),
            "shared_blks_hit": int(row["shared_blks_hit"]),
            "shared_blks_read": int(row["shared_blks_read"]),
            "shared_blks_dirtied": int(row["shared_blks_dirtied"]),
            "shared_blks_written": int(row["shared_blks_written"]),
            "temp_blks_written": int(row["temp_blks_written"]),
        }
        for row in rows
    ]
