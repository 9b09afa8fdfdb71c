"""Query filters for the API lists.

Related objects are filtered by id as a plain number: an id that names
nothing gives an empty list, not an error (the filter is a question, not a
reference that must exist).
"""

from datetime import UTC, datetime
from typing import Any

import django_filters
from django import forms
from django.http import QueryDict
from drf_spectacular.utils import extend_schema_field

from runs.models import Run, ShareLink

# Ids are positive and fit a bigint (BigAutoField): anything else cannot be an id.
MAX_ID = 2**63 - 1


@extend_schema_field({"type": "integer", "format": "int64", "minimum": 1, "maximum": MAX_ID})
class IdFilter(django_filters.NumberFilter):
    """An object id; one that names nothing matches nothing, a value that cannot be an id
    (0, negative, beyond a bigint) is a 400 naming the filter."""

    field_class = forms.IntegerField

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs.setdefault("min_value", 1)
        kwargs.setdefault("max_value", MAX_ID)
        super().__init__(*args, **kwargs)


class UtcField(django_filters.fields.IsoDateTimeField):
    """An ISO date-time read in UTC: PostgreSQL refuses offsets beyond ±15:59 that Python
    accepts (`-22:57` was a 500); one that leaves the calendar is a 400 naming it."""

    def to_python(self, value: Any) -> datetime | None:
        parsed: datetime | None = super().to_python(value)
        try:
            return parsed.astimezone(UTC) if parsed is not None else None
        except OverflowError as error:
            raise forms.ValidationError(f"{value} is outside the calendar") from error


class UtcDateTimeFilter(django_filters.IsoDateTimeFilter):
    field_class = UtcField


class StrictFilterSet(django_filters.FilterSet):
    """An empty value for a typed filter (`?queued_before=`) is an error, not "no filter"."""

    def is_valid(self) -> bool:
        valid = super().is_valid()
        for name, declared in self.filters.items():
            if isinstance(declared, django_filters.CharFilter):
                continue
            values = self.data.getlist(name) if isinstance(self.data, QueryDict) else []
            if "" in values:
                self.form.add_error(name, "give a value, or leave this filter out")
                valid = False
        return valid


class RunFilter(StrictFilterSet):
    """Runs by host (name), build (name), status, experiment and queued date range."""

    host = django_filters.CharFilter(field_name="host__name")
    build = django_filters.CharFilter(field_name="build__name")
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices)
    experiment = IdFilter(field_name="experiment_id")
    config_profile = IdFilter(field_name="config_profile_id")
    workload = IdFilter(field_name="workload_id")
    queued_after = UtcDateTimeFilter(field_name="queued_at", lookup_expr="gte")
    queued_before = UtcDateTimeFilter(field_name="queued_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["host", "build", "status", "experiment", "config_profile", "workload"]


class ShareLinkFilter(StrictFilterSet):
    """Share links by the id of what they share."""

    run = IdFilter(field_name="run_id")
    experiment = IdFilter(field_name="experiment_id")
    comparison = IdFilter(field_name="comparison_id")

    class Meta:
        model = ShareLink
        fields = ["run", "experiment", "comparison"]
