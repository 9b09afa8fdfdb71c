"""Query filters for the API lists.

Related objects are filtered by id as a plain number: an id that names
nothing gives an empty list, not an error (the filter is a question, not a
reference that must exist).
"""

import django_filters

from runs.models import Run, ShareLink

ID_FILTER = {"min_value": 1, "max_value": 2**63 - 1}


class RunFilter(django_filters.FilterSet):
    """Runs by host (name), build (name), status, experiment and queued date range."""

    host = django_filters.CharFilter(field_name="host__name")
    build = django_filters.CharFilter(field_name="build__name")
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices)
    experiment = django_filters.NumberFilter(field_name="experiment_id", **ID_FILTER)
    config_profile = django_filters.NumberFilter(field_name="config_profile_id", **ID_FILTER)
    workload = django_filters.NumberFilter(field_name="workload_id", **ID_FILTER)
    queued_after = django_filters.IsoDateTimeFilter(field_name="queued_at", lookup_expr="gte")
    queued_before = django_filters.IsoDateTimeFilter(field_name="queued_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["host", "build", "status", "experiment", "config_profile", "workload"]


class ShareLinkFilter(django_filters.FilterSet):
    """Share links by the id of what they share."""

    run = django_filters.NumberFilter(field_name="run_id", **ID_FILTER)
    experiment = django_filters.NumberFilter(field_name="experiment_id", **ID_FILTER)
    comparison = django_filters.NumberFilter(field_name="comparison_id", **ID_FILTER)

    class Meta:
        model = ShareLink
        fields = ["run", "experiment", "comparison"]
