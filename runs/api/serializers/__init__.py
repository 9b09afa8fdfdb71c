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
from runs.api.serializers.profiles import ProfileSerializer

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
    "ProfileSerializer",
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
