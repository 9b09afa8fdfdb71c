"""Refusing, before anything runs, workload SQL that plainly needs superuser rights.

Setup SQL and pgbench scripts run as a role without superuser rights
(agents/postgres/cluster/clients.py, `WORKLOAD_ROLE`): COPY ... PROGRAM and COPY to or
from a server file would fail there anyway. Refusing them from the text names
the field and the statement before any provisioning. The check reads the SQL
that SQL runs too: DO blocks, function bodies and EXECUTE (dynamic_sql.py), and
refuses an EXECUTE whose command it cannot tell from the text. It is a
courtesy, not the guard: SQL can still hide a statement from a text check (a
function called by name, a value read from a table), and only the role, and
the sandbox the server runs in, stop those. Both tiers run this check; the web
tier always as if superuser SQL were not allowed, because only the agent's own
local configuration can allow it.
"""

from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec, script_fields
from agents.contract.workload_text.dynamic_sql import Hidden, hidden_sql
from agents.contract.workload_text.sql_text import (
    SqlTextError,
    Statement,
    server_side_copy,
    split_statements,
)

SETUP_SQL_FIELD = "dataset.setup_sql"


def check_workload_sql(spec: JobSpec, allow_superuser_sql: bool) -> None:
    """Refuse server-side COPY in the setup SQL or a custom script of a normalised spec.

    Raises JobError("refused_sql") naming the field and the statement, or
    JobError("invalid_spec") for text that leaves a quote or comment open.
    """
    check_sql_text(spec["dataset"]["setup_sql"], SETUP_SQL_FIELD, allow_superuser_sql)
    for field, script in script_fields(spec["workload"]):
        text = dict(script).get("text")
        if isinstance(text, str):
            check_sql_text(text, f"{field}.text", allow_superuser_sql, meta_commands=True)


def check_sql_text(
    text: str, field: str, allow_superuser_sql: bool, meta_commands: bool = False
) -> None:
    """Refuse the first statement of `text` that reads, writes or runs something on the host."""
    statements = read_statements(text, field, meta_commands)
    if allow_superuser_sql:
        return
    for statement in statements:
        reason = server_side_copy(statement)
        if reason is not None:
            raise JobError(
                "refused_sql", f"{describe(statement)} {reason}; {COPY_FIX}", field=field
            )
        hidden = hidden_sql(statement)
        if hidden is not None:
            raise JobError("refused_sql", refusal(statement, hidden), field=field)


COPY_FIX = (
    "workload SQL runs as a role without superuser rights, so use COPY ... FROM STDIN / "
    "TO STDOUT or generate the data in SQL, or run it on an agent whose local config "
    "allows superuser SQL"
)
UNREADABLE_FIX = (
    "this early check reads the SQL's text and cannot follow values known only when it "
    "runs, so it refuses such SQL (the lab always, an agent unless its local config allows "
    "superuser SQL): write the command as "
    "a string literal, or build it with format() whose template starts with the command "
    "(EXECUTE format('CREATE TABLE p%s (id int)', i)); the workload's role and the "
    "server's sandbox are the actual guard"
)


def refusal(statement: Statement, hidden: Hidden) -> str:
    """The message for SQL hidden in a statement: what it does, and what to do instead."""
    fix = UNREADABLE_FIX if hidden.unreadable else COPY_FIX
    return f"{describe(statement)} {hidden.reason}; {fix}"


def read_statements(text: str, field: str, meta_commands: bool = False) -> list[Statement]:
    """`text` split into statements; JobError("invalid_spec") naming `field` if it cannot be."""
    try:
        return split_statements(text, meta_commands)
    except SqlTextError as error:
        raise JobError("invalid_spec", f"{error}; close it", field=field) from error


def describe(statement: Statement) -> str:
    """How errors name a statement: its number, line and (shortened) text."""
    return f"statement {statement.number} (line {statement.line}) `{statement.summary()}`"
