"""The spec fields declared in agents/contract/spec/fields.py as the lab's row columns.

A `Workload` row stores every dataset and workload field, an `Experiment` row
every sweep field a person chooses, each in a column of the field's name. The
model forms, the schedule form, the API serializers, the presets, the job spec
sections and the series copies take their field lists, labels, help texts and
defaults from here, so a new declared field needs its column and nothing else
in the lab.
"""

from collections.abc import Iterable, Mapping
from typing import TypedDict

from agents.contract.spec.fields import DATASET, SWEEP, WORKLOAD, Field, defaults

# The fields of a Workload row, in the order its form and API show them.
WORKLOAD_ROW_FIELDS = DATASET + WORKLOAD
# The sweep fields of an Experiment row; the others are set for each job.
EXPERIMENT_ROW_FIELDS = tuple(field for field in SWEEP if not field.per_job)
# Their defaults: the Experiment columns', so the schedule form's and the API's too.
EXPERIMENT_ROW_DEFAULTS = defaults(EXPERIMENT_ROW_FIELDS)


def names(fields: Iterable[Field]) -> list[str]:
    return [field.name for field in fields]


def scalar(fields: Iterable[Field]) -> tuple[Field, ...]:
    """The fields a form shows as one input each (lists and objects have their own editors)."""
    return tuple(field for field in fields if not field.compound)


def labels(fields: Iterable[Field]) -> dict[str, str]:
    return {field.name: field.label for field in fields}


def help_texts(fields: Iterable[Field]) -> dict[str, str]:
    return {field.name: field.help for field in fields if field.help}


class Described(TypedDict):
    """What a form field takes from a declaration."""

    label: str
    help_text: str


def described(field: Field) -> Described:
    """A declared field's label and help text, as a form field takes them."""
    return {"label": field.label, "help_text": field.help}


def spec_value(field: Field, stored: object) -> object:
    """A column's value as the spec has it: a blank text column of a nullable field is null."""
    return None if field.null and stored == "" else stored


def section_values(fields: Iterable[Field], row: object) -> dict[str, object]:
    """The spec section a row stores, read from the columns named after its fields."""
    return {field.name: spec_value(field, getattr(row, field.name)) for field in fields}


def value_problems(fields: Iterable[Field], values: Mapping[str, object]) -> list[str]:
    """What is wrong with values given by field name: a name none of `fields` has, or a
    value its field refuses (compound kinds have their own checks)."""
    declared = {field.name: field for field in fields}
    unknown = [f"{name}: not a declared field" for name in values if name not in declared]
    refused = [
        f"{name} {problem}"
        for name, value in values.items()
        if name in declared and (problem := declared[name].problem(value)) is not None
    ]
    return unknown + refused
