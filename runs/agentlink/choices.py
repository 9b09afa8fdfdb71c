"""Django choices built from the contract's vocabularies (agents.contract.vocabulary).

A value is defined once, in the contract; the model's choices follow it. Each
member is named after its value (`"vacuum_checkpoint"` -> `VACUUM_CHECKPOINT`,
`"tpcb-like"` -> `TPCB_LIKE`); without a given label Django derives one from
that name, as it does for a class written out by hand.
"""

from collections.abc import Iterable, Mapping
from typing import Any, TypeVar

from django.db import models


def member_name(value: str) -> str:
    """The enum member name of a vocabulary value."""
    return value.upper().replace("-", "_")


Value = TypeVar("Value", bound=str)


def text_choices(
    name: str, values: Iterable[Value], labels: Mapping[Value, str] | None = None
) -> Any:
    """A `TextChoices` class with one member per value, labelled by `labels` where given.

    Typed `Any`: its members exist only at run time, so a type checker could
    not see `Run.Status.RUNNING` on a declared `type[TextChoices]`.
    """
    members = [
        (member_name(value), (value, labels[value]) if labels and value in labels else value)
        for value in values
    ]
    # django-stubs types only the class syntax, not Enum's functional API.
    functional: Any = models.TextChoices
    return functional(name, members)
