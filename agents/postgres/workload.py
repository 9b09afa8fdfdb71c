"""The workload's SQL as its role: setup SQL one statement at a time, and why the role refused.

Setup SQL runs like `psql -f`: statement by statement (split as psql splits,
agents/contract/workload_text/sql_text.py), each in its own transaction unless the SQL opens
one, stopping at the first error. An error names the statement. When the
server refused a statement for lack of privilege, or pgbench aborted a client
on such an error in a custom script, the error also says why: workload SQL
runs as a role without superuser rights (agents/postgres/cluster/clients.py), and only
the agent's local config can change that.
"""

import re
import time
from collections.abc import Sequence

import psycopg
from psycopg import errors as pg_errors

from agents.contract.errors import JobError
from agents.contract.host_allows import how_to_enable
from agents.contract.spec.document import ScriptSpec
from agents.contract.workload_text.sql_text import Statement, split_statements
from agents.contract.workload_text.workload_sql import SETUP_SQL_FIELD, describe, read_statements
from agents.postgres.cluster.clients import WorkloadAccess
from agents.postgres.cluster.lifecycle import Cluster

# pgbench 12+ aborting a client on an SQL error:
# "client 3 script 0 aborted in command 4 query 0: ERROR: ..."
SCRIPT_ABORT = re.compile(r"client \d+ script (\d+) aborted in command (\d+) query \d+: (.*)")
PRIVILEGE_TEXT = re.compile(
    r"permission denied|must be superuser|must be a member of|privileges of the", re.IGNORECASE
)


def why_refused(access: WorkloadAccess) -> str:
    """The sentence that explains a privilege error of workload SQL."""
    return (
        f"workload SQL runs as the non-superuser role {access.user}, which cannot run programs, "
        "read or write files on the server or use untrusted languages; to run it anyway, the "
        "agent must allow superuser SQL: " + how_to_enable("allow_superuser_sql")
    )


def run_setup_sql(cluster: Cluster, sql: str) -> float:
    """Run `sql` as the workload's role; return the seconds it took.

    Raises JobError("refused_sql") when the role lacked a privilege, else
    JobError("setup_sql_failed"); both name the statement and the field.
    """
    statements = read_statements(sql, SETUP_SQL_FIELD)
    access = cluster.require_workload()
    started = time.monotonic()
    with cluster.connect_workload() as conn:
        for statement in statements:
            try:
                conn.execute(statement.text)
            except psycopg.Error as error:
                raise setup_sql_error(statement, error, access) from error
    return round(time.monotonic() - started, 3)


def setup_sql_error(statement: Statement, error: psycopg.Error, access: WorkloadAccess) -> JobError:
    """The JobError for a failed setup SQL statement."""
    message = f"setup SQL {describe(statement)} failed: {_first_line(str(error))}"
    if isinstance(error, pg_errors.InsufficientPrivilege) and not access.superuser:
        return JobError("refused_sql", f"{message} — {why_refused(access)}", field=SETUP_SQL_FIELD)
    return JobError("setup_sql_failed", message, field=SETUP_SQL_FIELD)


def script_refusal(
    errors: Sequence[str], scripts: Sequence[ScriptSpec], access: WorkloadAccess
) -> JobError | None:
    """JobError("refused_sql") when pgbench aborted a client on a privilege error, else None.

    `errors` are pgbench's error lines (a parsed point's, or a run's stderr),
    `scripts` the spec's scripts in the order they were given to pgbench.
    """
    if access.superuser:
        return None
    for line in errors:
        abort = SCRIPT_ABORT.search(line)
        if abort and PRIVILEGE_TEXT.search(abort.group(3)):
            return _script_error(scripts, access, abort)
    return None


def _script_error(
    scripts: Sequence[ScriptSpec], access: WorkloadAccess, abort: re.Match[str]
) -> JobError:
    """Name the script and the command pgbench aborted on (pgbench numbers both from 0)."""
    script_index, command_index = int(abort.group(1)), int(abort.group(2))
    name, text = f"#{script_index + 1}", ""
    if script_index < len(scripts):
        name, text = _script_name_and_text(scripts[script_index], name)
    commands = split_statements(text, meta_commands=True)
    command = f" `{commands[command_index].summary()}`" if command_index < len(commands) else ""
    return JobError(
        "refused_sql",
        f"script {name!r} command {command_index + 1}{command} failed: "
        f"{' '.join(abort.group(3).split())} — {why_refused(access)}",
        field=f"workload.scripts[{script_index}].text",
    )


def _script_name_and_text(script: ScriptSpec, fallback: str) -> tuple[str, str]:
    """A custom script's name and text; a built-in's name (its text is pgbench's own)."""
    if "builtin" in script:
        return script["builtin"], ""
    return script["name"] or fallback, script["text"]


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else "(no message)"
