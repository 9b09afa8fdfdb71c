"""API viewsets. They shape requests and responses; services do the work."""

from typing import Any, TypedDict, TypeVar

from django.db.models import Prefetch, QuerySet
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema
from rest_framework import mixins, status, viewsets
from rest_framework.decorators import action
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAdminUser
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.serializers import BaseSerializer

from runs import services
from runs.api import serializers
from runs.api.filters import RunFilter, ShareLinkFilter
from runs.api.permissions import OwnerOrStaffMayChange, signed_in_user
from runs.api.renderers import MarkdownRenderer, PlainTextRenderer
from runs.models import (
    Comparison,
    ConfigProfile,
    Experiment,
    Host,
    HostSample,
    PgBuild,
    ProgressSample,
    Result,
    Run,
    ServerSample,
    ShareLink,
    StorageTarget,
    Workload,
)
from runs.reproduce.script import run_manifest
from runs.services.deletion import Deletable
from runs.services.progress import experiment_progress
from runs.services.uploads import build_source_upload
from runs.stats_tables import comparison_statistics, experiment_statistics
from runs.verdict_report import as_markdown, as_text, comparison_report, experiment_report

RUN_JOINS = ("experiment", "host", "build", "config_profile", "workload")
# The report's outcome in every format's answer (`benchlab` exits by it).
OUTCOME_HEADER = "BenchLab-Outcome"
REPORT_RENDERERS = [JSONRenderer, PlainTextRenderer, MarkdownRenderer]
REPORT_SCHEMA = extend_schema(
    parameters=[serializers.StatisticsQuerySerializer],
    responses={
        (200, "application/json"): OpenApiTypes.OBJECT,
        (200, "text/plain"): OpenApiTypes.STR,
        (200, "text/markdown"): OpenApiTypes.STR,
        400: serializers.ErrorSerializer,
    },
)
STATISTICS_SCHEMA = extend_schema(
    parameters=[serializers.StatisticsQuerySerializer],
    responses={200: serializers.ComparisonStatisticsSerializer, 400: serializers.ErrorSerializer},
)


def statistics_query(request: Request) -> dict[str, Any]:
    """The statistics API's query (min_effect, margin, keep_unsettled), validated."""
    query = serializers.StatisticsQuerySerializer(data=request.query_params)
    query.is_valid(raise_exception=True)
    return dict(query.validated_data)


def report_response(request: Request, report: dict[str, object]) -> Response:
    """The report in the format asked for (`?format=text|markdown|json`)."""
    chosen = request.accepted_renderer.format if request.accepted_renderer else "json"
    rendered = {"text": as_text, "markdown": as_markdown}.get(chosen)
    answer = Response(rendered(report) if rendered else report)
    answer[OUTCOME_HEADER] = str(report["outcome"])
    return answer


class RunResults(TypedDict):
    """A run's points and timelines, as `serializers.RunResultsSerializer` shows them."""

    results: QuerySet[Result]
    progress: QuerySet[ProgressSample]
    host_samples: QuerySet[HostSample]
    server_samples: QuerySet[ServerSample]
    client_host_samples: QuerySet[HostSample]


def run_results(run: Run, point: int | None) -> RunResults:
    """Every point of a run, with the timelines of all points or of `point` only."""
    only = {"point": point} if point is not None else {}
    order = ("point", "t", "pk")
    hosts = run.host_samples.filter(**only)
    return {
        "results": run.results.order_by("index"),
        "progress": run.progress.filter(**only).order_by(*order),
        "host_samples": hosts.filter(role=HostSample.Role.SERVER).order_by(*order),
        "server_samples": run.server_samples.filter(**only).order_by(*order),
        "client_host_samples": hosts.filter(role=HostSample.Role.CLIENT).order_by(*order),
    }


class HostViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.UpdateModelMixin,
    viewsets.GenericViewSet[Host],
):
    """Hosts as their agents registered them; staff edit notes and labels.

    A host has no owner, so the rule of every other object (its owner or staff,
    runs.services.access.permissions) leaves changes to staff, as the host pages do.
    """

    permission_classes = [OwnerOrStaffMayChange]
    queryset = Host.objects.prefetch_related(
        Prefetch("storage_targets", queryset=StorageTarget.objects.order_by("name"))
    )
    serializer_class = serializers.HostSerializer
    filterset_fields = ["name"]

    @extend_schema(request=None, responses=serializers.HostSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser])
    def approve(self, request: Request, pk: str | None = None) -> Response:
        """Approve the host's agent (staff only): its events count and it gets jobs."""
        host = services.host_approve(self.get_object(), signed_in_user(request))
        return Response(self.get_serializer(host).data)

    @extend_schema(request=None, responses=serializers.HostSerializer)
    @action(detail=True, methods=["post"], permission_classes=[IsAdminUser])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        """Stop trusting the host's agent (staff only); its queued runs are cancelled."""
        host = services.host_revoke(self.get_object(), signed_in_user(request))
        return Response(self.get_serializer(host).data)


class StorageTargetViewSet(viewsets.ReadOnlyModelViewSet[StorageTarget]):
    """Storage targets reported by agents."""

    queryset = StorageTarget.objects.select_related("host")
    serializer_class = serializers.StorageTargetSerializer
    filterset_fields = {"host__name": ["exact"], "name": ["exact"]}


OwnedModel = TypeVar("OwnedModel", PgBuild, ConfigProfile, Workload)


class OwnedModelViewSet(viewsets.ModelViewSet[OwnedModel]):
    """Create sets the owner; change and delete are for the owner or staff.

    Deleting something in use answers 409 naming what uses it.
    """

    permission_classes = [OwnerOrStaffMayChange]

    def perform_create(self, serializer: BaseSerializer[OwnedModel]) -> None:
        serializer.save(created_by=signed_in_user(self.request))

    def perform_destroy(self, instance: Deletable) -> None:
        services.object_delete(instance, self.request.user)


class PgBuildViewSet(OwnedModelViewSet[PgBuild]):
    """PostgreSQL builds: a version and where its binaries come from."""

    queryset = PgBuild.objects.select_related("created_by")
    serializer_class = serializers.PgBuildSerializer

    @extend_schema(
        request={
            "multipart/form-data": {
                "type": "object",
                "properties": {"file": {"type": "string", "format": "binary"}},
            }
        },
        responses=serializers.PgBuildSerializer,
    )
    @action(detail=True, methods=["post"], parser_classes=[MultiPartParser])
    def source(self, request: Request, pk: str | None = None) -> Response:
        """Upload a release tarball as this source build's source (multipart field `file`)."""
        upload = request.FILES.get("file")
        build = build_source_upload(self.get_object(), upload, signed_in_user(request))
        return Response(self.get_serializer(build).data)


class ConfigProfileViewSet(OwnedModelViewSet[ConfigProfile]):
    """postgresql.conf profiles, validated against the known pg_settings catalogues."""

    queryset = ConfigProfile.objects.select_related("parent", "created_by")
    serializer_class = serializers.ConfigProfileSerializer

    @extend_schema(responses=serializers.ConfigProfileDiffSerializer)
    @action(detail=True, methods=["get"])
    def diff(self, request: Request, pk: str | None = None) -> Response:
        """What this profile adds to or changes in its parent's effective settings."""
        return Response(self.get_object().diff_against_parent())


class WorkloadViewSet(OwnedModelViewSet[Workload]):
    """Datasets and pgbench scripts."""

    queryset = Workload.objects.select_related("created_by")
    serializer_class = serializers.WorkloadSerializer


class ExperimentViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Experiment],
):
    """Experiments: a matrix to measure; `start` expands it into queued runs.

    Starting and deleting are for the owner or staff.
    """

    permission_classes = [OwnerOrStaffMayChange]
    queryset = Experiment.objects.select_related("created_by").prefetch_related(
        "hosts", "builds", "config_profiles", "workloads"
    )
    serializer_class = serializers.ExperimentSerializer

    def perform_destroy(self, instance: Experiment) -> None:
        services.object_delete(instance, self.request.user)

    @extend_schema(request=None, responses={201: serializers.RunSerializer(many=True)})
    @action(detail=True, methods=["post"], pagination_class=None)
    def start(self, request: Request, pk: str | None = None) -> Response:
        """Validate every cell, create its run and queue the jobs."""
        runs = services.experiment_start(self.get_object(), request.user)
        data = serializers.RunSerializer(runs, many=True).data
        return Response(data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=serializers.RunSerializer(many=True))
    @action(detail=True, methods=["post"], pagination_class=None)
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel every queued or running run (an adaptive experiment then adds no round);
        answers the runs cancelled."""
        runs = services.experiment_cancel(self.get_object(), request.user)
        return Response(serializers.RunSerializer(runs, many=True).data)

    @extend_schema(responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def progress(self, request: Request, pk: str | None = None) -> Response:
        """Runs by status, the running runs' steps, rounds and the time left (an estimate)."""
        return Response(experiment_progress(self.get_object()))

    @STATISTICS_SCHEMA
    @action(detail=True, methods=["get"])
    def statistics(self, request: Request, pk: str | None = None) -> Response:
        """The comparison statistics of the experiment's cells against its first cell."""
        query = statistics_query(request)
        found = experiment_statistics(
            self.get_object(), query["min_effect"], query["margin"], query["keep_unsettled"]
        )
        return Response(found.document)

    @REPORT_SCHEMA
    @action(detail=True, methods=["get"], renderer_classes=REPORT_RENDERERS)
    def report(self, request: Request, pk: str | None = None) -> Response:
        """The verdict report of the experiment's cells against its first cell, from the
        numbers `statistics/` answers: `?format=text` (a mail reply), `markdown` or `json`."""
        experiment = self.get_object()
        link = request.build_absolute_uri(reverse("experiment-detail", args=[experiment.pk]))
        return report_response(
            request, experiment_report(experiment, statistics_query(request), link)
        )

    @extend_schema(responses=serializers.EstimateSerializer)
    @action(detail=True, methods=["get"])
    def estimate(self, request: Request, pk: str | None = None) -> Response:
        """How many runs starting would queue and roughly how long they take."""
        return Response(services.experiment_estimate(self.get_object()))

    @extend_schema(responses=serializers.RunSerializer(many=True))
    @action(detail=True, methods=["get"])
    def runs(self, request: Request, pk: str | None = None) -> Response:
        """The experiment's runs in the order they were queued, with their cell and round."""
        runs = self.get_object().runs.select_related(*RUN_JOINS).order_by("position", "pk")
        # The viewset's paginator, called directly: GenericAPIView.paginate_queryset is typed
        # for the viewset's own model, and these are runs.
        paginator = self.paginator
        page = paginator.paginate_queryset(runs, request, view=self) if paginator else None
        return self.get_paginated_response(serializers.RunSerializer(page, many=True).data)


class RunViewSet(viewsets.ReadOnlyModelViewSet[Run]):
    """Runs, filterable by host, build, status and queued date range.

    Cancelling is for the run's owner, its experiment's owner or staff;
    anyone signed in may re-run (the new run is theirs).
    """

    permission_classes = [OwnerOrStaffMayChange]
    open_actions = ("rerun",)
    queryset = Run.objects.select_related(*RUN_JOINS)
    filterset_class = RunFilter
    ordering_fields = ["queued_at", "started_at", "finished_at", "status"]

    def get_serializer_class(self) -> type[BaseSerializer[Run]]:
        if self.action == "list":
            return serializers.RunSerializer
        return serializers.RunDetailSerializer

    @extend_schema(request=None, responses=serializers.RunSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str | None = None) -> Response:
        """Cancel: a queued run at once, a running one when its agent next checks (<= 1 s)."""
        run = services.run_cancel(self.get_object(), request.user)
        return Response(serializers.RunSerializer(run).data)

    @extend_schema(request=None, responses={201: serializers.RunSerializer})
    @action(detail=True, methods=["post"])
    def rerun(self, request: Request, pk: str | None = None) -> Response:
        """Queue a new run with the same spec, linked to this one."""
        run = services.run_rerun(self.get_object(), signed_in_user(request))
        return Response(serializers.RunSerializer(run).data, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses={200: OpenApiTypes.OBJECT})
    @action(detail=True, methods=["get"])
    def manifest(self, request: Request, pk: str | None = None) -> Response:
        """The run manifest: `python -m agents run --manifest FILE` replays it."""
        return Response(run_manifest(self.get_object()))

    @extend_schema(
        parameters=[serializers.RunResultsQuerySerializer],
        responses={200: serializers.RunResultsSerializer, 400: serializers.ErrorSerializer},
    )
    @action(detail=True, methods=["get"])
    def results(self, request: Request, pk: str | None = None) -> Response:
        """Every point with its progress timeline and host/server samples."""
        query = serializers.RunResultsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        data = run_results(self.get_object(), query.validated_data.get("point"))
        return Response(serializers.RunResultsSerializer(data).data)

    @extend_schema(responses={200: serializers.CpuProfileSerializer(many=True)})
    @action(detail=True, methods=["get"], pagination_class=None, url_path="cpu-profiles")
    def cpu_profiles(self, request: Request, pk: str | None = None) -> Response:
        """The run's CPU-profile pass (perf, after its measured points; never a result): each
        client count's folded stacks, or why the agent recorded none."""
        return self._cpu_profiles_response()

    @extend_schema(responses={200: serializers.CpuProfileSerializer(many=True)}, deprecated=True)
    @action(detail=True, methods=["get"], pagination_class=None, url_path="profiles")
    def former_cpu_profiles_path(self, request: Request, pk: str | None = None) -> Response:
        """Deprecated: the same as `cpu-profiles/`, at the path it had before."""
        return self._cpu_profiles_response()

    def _cpu_profiles_response(self) -> Response:
        cpu_profiles = self.get_object().cpu_profiles.order_by("index")
        return Response(serializers.CpuProfileSerializer(cpu_profiles, many=True).data)


class ComparisonViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.DestroyModelMixin,
    viewsets.GenericViewSet[Comparison],
):
    """Saved selections of runs with a baseline; deleting is for the owner or staff."""

    permission_classes = [OwnerOrStaffMayChange]
    queryset = Comparison.objects.select_related("created_by").prefetch_related("runs")
    serializer_class = serializers.ComparisonSerializer

    def perform_destroy(self, instance: Comparison) -> None:
        services.object_delete(instance, self.request.user)

    @STATISTICS_SCHEMA
    @action(detail=True, methods=["get"])
    def statistics(self, request: Request, pk: str | None = None) -> Response:
        """Per point n, mean, median, sd, 95 % CI, MDE and warnings; per cell against the
        baseline the difference with its CI, p, q (Benjamini-Hochberg) and the verdict."""
        query = statistics_query(request)
        found = comparison_statistics(
            self.get_object(), query["min_effect"], query["margin"], query["keep_unsettled"]
        )
        return Response(found.document)

    @REPORT_SCHEMA
    @action(detail=True, methods=["get"], renderer_classes=REPORT_RENDERERS)
    def report(self, request: Request, pk: str | None = None) -> Response:
        """The verdict report of the comparison against its baseline, from the numbers
        `statistics/` answers: `?format=text` (a mail reply), `markdown` or `json`."""
        comparison = self.get_object()
        link = request.build_absolute_uri(reverse("comparison-detail", args=[comparison.pk]))
        return report_response(
            request, comparison_report(comparison, statistics_query(request), link)
        )


class ShareLinkViewSet(
    mixins.CreateModelMixin,
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    viewsets.GenericViewSet[ShareLink],
):
    """Read-only links to a run, an experiment or a comparison; `revoke` ends one.

    A link's token is in the answer that creates it, and never again: the lab keeps
    its digest, and lists a link by its first characters (`prefix`). Listing and
    revoking are for the link's owner, the shared object's owner and staff.
    """

    permission_classes = [OwnerOrStaffMayChange]
    queryset = ShareLink.objects.select_related("created_by", "run", "experiment", "comparison")
    serializer_class = serializers.ShareLinkSerializer
    filterset_class = ShareLinkFilter

    def get_queryset(self) -> QuerySet[ShareLink]:
        visible = services.share_links_of(self.request.user)
        return super().get_queryset().filter(pk__in=visible.values("pk"))

    @extend_schema(responses={201: serializers.NewShareLinkSerializer})
    def create(self, request: Request, *args: Any, **kwargs: Any) -> Response:
        asked = self.get_serializer(data=request.data)
        asked.is_valid(raise_exception=True)
        target = asked.validated_data["target"]
        link, token = services.share_link_create(signed_in_user(request), target)
        url = request.build_absolute_uri(reverse("shared", args=[token]))
        shown = {**serializers.ShareLinkSerializer(link).data, "token": token, "url": url}
        return Response(shown, status=status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=serializers.ShareLinkSerializer)
    @action(detail=True, methods=["post"])
    def revoke(self, request: Request, pk: str | None = None) -> Response:
        link = services.share_link_revoke(self.get_object(), request.user)
        return Response(serializers.ShareLinkSerializer(link).data)
