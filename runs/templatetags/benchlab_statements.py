"""`{% with columns=result.statements|statement_columns %}`: which of the
optional columns a point's per-statement table (pgbench -r) needs."""

from collections.abc import Iterable, Mapping
from typing import TypedDict

from django import template

register = template.Library()


class StatementColumns(TypedDict):
    """Whether any row has a failures count, a retries count, or the point ran several scripts."""

    failures: bool
    retries: bool
    script: bool


@register.filter
def statement_columns(statements: Iterable[Mapping[str, object]]) -> StatementColumns:
    """The columns worth showing: pgbench 15+ prints failures (and retries with
    --max-tries above 1); several scripts each list their own statements."""
    rows = list(statements or [])
    return {
        "failures": any(row.get("failures") is not None for row in rows),
        "retries": any(row.get("retries") is not None for row in rows),
        "script": len({row.get("script") for row in rows}) > 1,
    }
