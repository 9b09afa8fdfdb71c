"""API representations, one module per concern; every serializer is importable from here."""

from runs.api.serializers.catalogue import (
    ConfigProfileDiffSerializer,
    ConfigProfileSerializer,
    HostSerializer,
    PgBuildSerializer,
    StorageTargetSerializer,
    WorkloadSerializer,
    owner_name,
)
from runs.api.serializers.comparisons import (
    ComparisonSerializer,
    ComparisonStatisticsSerializer,
    NewShareLinkSerializer,
    ShareLinkSerializer,
    StatisticsQuerySerializer,
    StatisticsRowSerializer,
    ValidityWarningSerializer,
)
from runs.api.serializers.cpu_profiles import CpuProfileSerializer
from runs.api.serializers.errors import ErrorDetailSerializer, ErrorSerializer
from runs.api.serializers.experiments import (
    EstimateSerializer,
    ExperimentSerializer,
    ProgressSampleSerializer,
    ResultSerializer,
    RunDetailSerializer,
    RunResultsQuerySerializer,
    RunResultsSerializer,
    RunSerializer,
    SampleSerializer,
)

__all__ = [
    "ComparisonSerializer",
    "ComparisonStatisticsSerializer",
    "ConfigProfileDiffSerializer",
    "ConfigProfileSerializer",
    "ErrorDetailSerializer",
    "ErrorSerializer",
    "EstimateSerializer",
    "ExperimentSerializer",
    "HostSerializer",
    "PgBuildSerializer",
    "CpuProfileSerializer",
    "ProgressSampleSerializer",
    "ResultSerializer",
    "RunDetailSerializer",
    "RunResultsQuerySerializer",
    "RunResultsSerializer",
    "RunSerializer",
    "SampleSerializer",
    "NewShareLinkSerializer",
    "ShareLinkSerializer",
    "StatisticsQuerySerializer",
    "StatisticsRowSerializer",
    "StorageTargetSerializer",
    "ValidityWarningSerializer",
    "WorkloadSerializer",
    "owner_name",
]
