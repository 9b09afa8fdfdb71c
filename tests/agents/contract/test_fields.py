"""The spec's field declarations agree with its types, and drive its defaults and checks."""

from typing import Any, get_type_hints

import pytest

from agents.contract.errors import JobError
from agents.contract.spec.document import DEFAULTS, JobSpec, validate_spec
from agents.contract.spec.fields import SECTIONS


@pytest.mark.parametrize("section", sorted(SECTIONS))
def test_each_section_type_names_exactly_the_declared_fields(section: str) -> None:
    typed = get_type_hints(get_type_hints(JobSpec)[section])
    assert list(typed) == [field.name for field in SECTIONS[section]]
    assert DEFAULTS[section] == {field.name: field.default for field in SECTIONS[section]}


@pytest.mark.parametrize(
    ("section", "name"),
    [(s, f.name) for s, fields in SECTIONS.items() for f in fields if not f.compound],
)
def test_a_wrong_type_is_refused_naming_the_declared_field(section: str, name: str) -> None:
    doc: dict[str, Any] = {"version": 1, "sweep": {"duration_s": 1}}
    doc.setdefault(section, {})[name] = [1]
    with pytest.raises(JobError) as refused:
        validate_spec(doc)
    assert refused.value.field == f"{section}.{name}"
