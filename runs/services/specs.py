"""Pieces of job specs built from the lab's definitions (docs/contracts.md, section 1)."""

from django.core.exceptions import ValidationError

from agents.contract.builds import check_build_definition
from agents.contract.errors import JobError
from runs.models import PgBuild, Workload


def workload_spec(workload: Workload) -> dict:
    """The `dataset` and `workload` sections of a job spec for one workload."""
    return {
        "dataset": {
            "scale": workload.scale,
            "init_steps": workload.init_steps or None,
            "partitions": workload.partitions,
            "partition_method": workload.partition_method or None,
            "unlogged_tables": workload.unlogged_tables,
            "fillfactor": workload.fillfactor,
            "foreign_keys": workload.foreign_keys,
            "setup_sql": workload.setup_sql,
        },
        "workload": {
            "scripts": workload.scripts,
            "query_mode": workload.query_mode,
            "no_vacuum": workload.no_vacuum,
            "rate_tps": workload.rate_tps,
            "latency_limit_ms": workload.latency_limit_ms,
            "max_tries": workload.max_tries,
            "defines": workload.defines,
            "latency_log": workload.latency_log,
            "progress": workload.progress,
            "statement_latencies": workload.statement_latencies,
            "vacuum_all": workload.vacuum_all,
            "processes": workload.processes,
        },
    }


def clean_build_definition(source: str, definition: object) -> dict:
    """A source build's definition checked as the agent will check it, else `{}`.

    Raises ValidationError on `definition` naming the part to fix (e.g.
    `configure_flags[0]`), before anything is saved or queued.
    """
    if source != PgBuild.Source.BUILD:
        if definition:
            raise ValidationError({"definition": 'a build definition needs source "build"'})
        return {}
    try:
        return dict(check_build_definition(definition))
    except JobError as error:
        part = (error.field or "").removeprefix("postgres.build").lstrip(".")
        raise ValidationError({"definition": f"{part or 'definition'}: {error.message}"}) from None
