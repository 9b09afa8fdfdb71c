"""`POST /api/tries/`: try a patch (runs/tries.py); `GET /api/tries/` shows the battery."""

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from agents.contract.errors import JobError
from runs.api.errors import job_error_detail
from runs.api.fields import StrictCharField
from runs.api.permissions import signed_in_user
from runs.api.serializers import ErrorSerializer
from runs.models import Host
from runs.presets.battery import BATTERY, BATTERY_VERSION, battery_clients
from runs.tries import MAX_PATCH_BYTES, TryRequest, patch_try


class TrySerializer(serializers.Serializer[dict[str, Any]]):
    host = serializers.SlugRelatedField(slug_field="name", queryset=Host.objects.all())
    repository = StrictCharField(max_length=500, help_text="a git repository the agent allows")
    base = StrictCharField(max_length=100, help_text="the base ref (branch, tag or commit)")
    head = StrictCharField(max_length=100, required=False, help_text="the ref to compare")
    patch = StrictCharField(
        max_length=MAX_PATCH_BYTES,
        required=False,
        trim_whitespace=False,
        help_text="a unified diff applied to the base with patch -p1",
    )
    patch_name = StrictCharField(max_length=64, required=False, default="change.patch")
    version = StrictCharField(max_length=20, help_text="the PostgreSQL major version, e.g. 18")
    duration_s = serializers.IntegerField(min_value=1, max_value=3600, default=30)
    repeats = serializers.IntegerField(min_value=3, max_value=100, default=3)
    max_rounds = serializers.IntegerField(min_value=3, max_value=1000, default=10)
    margin_pct = serializers.FloatField(default=1.0)
    min_effect_pct = serializers.FloatField(default=1.0)
    duet = serializers.BooleanField(default=False)
    workloads = serializers.IntegerField(
        min_value=1,
        max_value=len(BATTERY),
        required=False,
        help_text="run only the battery's first N workloads",
    )


def battery_document(host: Host | None = None, workloads: int | None = None) -> dict[str, object]:
    """The battery's version, its workloads (the first `workloads` of them: what a try
    runs) and client counts (the host's, when one is given)."""
    threads = (host.facts.get("cpu") or {}).get("threads") if host else None
    return {
        "version": BATTERY_VERSION,
        "workloads": [workload["name"] for workload in BATTERY[:workloads]],
        "clients": battery_clients(threads if isinstance(threads, int) else None)
        if host
        else "1, half the host's CPU threads, its CPU threads",
    }


class TryViewSet(viewsets.ViewSet):
    """Try a patch: base and patched builds, the battery's experiments, started."""

    @extend_schema(operation_id="tries_battery", responses={200: OpenApiTypes.OBJECT})
    def list(self, request: Request) -> Response:
        """The patch battery (its version, workloads and client counts)."""
        return Response(battery_document())

    @extend_schema(
        request=TrySerializer, responses={201: OpenApiTypes.OBJECT, 400: ErrorSerializer}
    )
    def create(self, request: Request) -> Response:
        given = TrySerializer(data=request.data)
        given.is_valid(raise_exception=True)
        asked = TryRequest(**given.validated_data)
        try:
            experiments = patch_try(signed_in_user(request), asked)
        except JobError as exc:
            raise serializers.ValidationError(job_error_detail(exc), code=exc.code) from exc
        body = {
            "battery": battery_document(asked.host, asked.workloads),
            "experiments": [{"id": e.pk, "name": e.name} for e in experiments],
        }
        return Response(body, status=status.HTTP_201_CREATED)
