"""Query filters for the API lists."""

import django_filters

from runs.models import Run


class RunFilter(django_filters.FilterSet):
    """Runs by host (name), build (name), status, experiment and queued date range."""

    host = django_filters.CharFilter(field_name="host__name")
    build = django_filters.CharFilter(field_name="build__name")
    status = django_filters.MultipleChoiceFilter(choices=Run.Status.choices)
    queued_after = django_filters.IsoDateTimeFilter(field_name="queued_at", lookup_expr="gte")
    queued_before = django_filters.IsoDateTimeFilter(field_name="queued_at", lookup_expr="lt")

    class Meta:
        model = Run
        fields = ["host", "build", "status", "experiment", "config_profile", "workload"]
