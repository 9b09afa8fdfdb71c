"""The job spec sections built from the lab's catalogue rows: a workload's `dataset` and
`workload` sections, a source build's checked definition (docs/contracts.md, section 1)."""

from typing import TypedDict, cast

from django.core.exceptions import ValidationError

from agents.contract.builds.definition import check_build_definition
from agents.contract.errors import JobError
from agents.contract.spec.document import DatasetSpec, WorkloadSpec
from agents.contract.spec.fields import DATASET, WORKLOAD
from runs.agentlink.row_fields import section_values
from runs.models import PgBuild, Workload


class WorkloadSections(TypedDict):
    """The job spec sections a Workload row stores."""

    dataset: DatasetSpec
    workload: WorkloadSpec


def workload_spec(workload: Workload) -> WorkloadSections:
    """The `dataset` and `workload` sections of a job spec for one workload."""
    return {
        "dataset": cast(DatasetSpec, section_values(DATASET, workload)),
        "workload": cast(WorkloadSpec, section_values(WORKLOAD, workload)),
    }


def clean_build_definition(source: str, definition: object) -> dict[str, object]:
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
