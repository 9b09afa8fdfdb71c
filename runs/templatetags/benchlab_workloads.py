"""`result|transaction_types:run.spec`: a point's rate and latency per script (transaction
type), with NOPM for the TPC-C-like new order; several processes number their scripts."""

from collections.abc import Mapping
from typing import Any

from django import template

from runs import tpcc_like
from runs.models import Result

register = template.Library()


def script_names(scripts: list[Mapping[str, Any]]) -> list[str]:
    """A spec's scripts as pgbench lists them: a custom script's name, a built-in's own."""
    return [str(script.get("name") or script.get("builtin") or "") for script in scripts]


@register.filter
def transaction_types(result: Result, spec: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One row per per-script block pgbench printed (only when a process ran several)."""
    workload = (spec or {}).get("workload") or {}
    processes = workload.get("processes") or []
    rows = []
    for block in result.scripts or []:
        process = block.get("process")
        if process and 0 < process <= len(processes):
            names = script_names(processes[process - 1].get("scripts") or [])
        else:
            names = script_names(workload.get("scripts") or [])
        rows += tpcc_like.per_type([block], names)
    return rows
