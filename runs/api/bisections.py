"""API of bisections: start one, read it with its steps, cancel it.

Registered in runs/api/urls.py; runs.bisection.services does the work.
"""

from typing import Any

from drf_spectacular.utils import extend_schema
from rest_framework import mixins, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from agents.contract.errors import JobError
from runs.api.errors import job_error_detail
from runs.api.fields import StrictModelSerializer
from runs.api.permissions import OwnerOrStaffMayChange, signed_in_user
from runs.bisection.services import bisection_cancel, bisection_start
from runs.forms.bisections import BisectionForm
from runs.models import Bisection, BisectionStep


class BisectionStepSerializer(serializers.ModelSerializer[BisectionStep]):
    class Meta:
        model = BisectionStep
        fields = [
            "number",
            "commit_index",
            "sha",
            "experiment",
            "outcome",
            "verdict",
            "sentence",
            "build_seconds",
            "note",
        ]
        read_only_fields = fields


class BisectionSerializer(StrictModelSerializer[Bisection]):
    """A bisection: what the form takes, then its state, range and steps (read-only)."""

    steps = BisectionStepSerializer(many=True, read_only=True)
    # Plain text: an enum would collide in the schema with a run's `status` (other states).
    status = serializers.CharField(
        read_only=True, help_text="running, then succeeded, failed or cancelled"
    )

    class Meta:
        model = Bisection
        fields = [
            "id",
            *BisectionForm.Meta.fields,
            "metric",
            "status",
            "error_message",
            "commits",
            "good_index",
            "bad_index",
            "culprit_index",
            "steps",
            "created_by",
            "created_at",
            "finished_at",
        ]
        # Everything but what the form takes is the bisection's own state.
        read_only_fields = [
            name for name in fields if name not in ("id", "steps", *BisectionForm.Meta.fields)
        ]

    def create(self, validated_data: dict[str, Any]) -> Bisection:
        try:
            return bisection_start(signed_in_user(self.context["request"]), validated_data)
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc


class BisectionViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[Bisection],
):
    """Bisections: creating one queues its step 0; cancelling is for the owner or staff."""

    permission_classes = [OwnerOrStaffMayChange]
    queryset = Bisection.objects.select_related("created_by").prefetch_related("steps")
    serializer_class = BisectionSerializer

    @extend_schema(request=None, responses=BisectionSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Stop the bisection and cancel its step's runs."""
        bisection = bisection_cancel(self.get_object(), request.user)
        return Response(BisectionSerializer(bisection).data)
