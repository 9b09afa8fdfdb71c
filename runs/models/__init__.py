"""The lab's models, one module per concern; every model is importable from here.

Django finds an app's models in `runs.models`, and migrations name them so
(`runs.models.new_share_token`): the catalogue (hosts, builds, config
profiles, workloads), experiments and their runs, what a run measured
(samples), history (series of scheduled experiments, alerts, notes,
provenance) and security (share links, API tokens), and a run's CPU profiles.
"""

from runs.models.bisections import Bisection, BisectionStep
from runs.models.catalogue import (
    ConfigProfile,
    Host,
    PgBuild,
    PgCatalogue,
    SettingChange,
    SettingsDiff,
    SourceUpload,
    StorageTarget,
    Workload,
)
from runs.models.cpu_profiles import CpuProfile
from runs.models.experiments import Comparison, Experiment, Run
from runs.models.history import (
    Alert,
    ChangePoint,
    Note,
    Occurrence,
    Provenance,
    Series,
    imported_file,
)
from runs.models.noise import HostCanary
from runs.models.samples import (
    HostSample,
    ProgressSample,
    Result,
    RunEvent,
    RunTimeline,
    ServerSample,
    TimelineTrace,
)
from runs.models.security import ApiToken, ShareLink, new_share_token

__all__ = [
    "Alert",
    "ChangePoint",
    "ApiToken",
    "Bisection",
    "BisectionStep",
    "Comparison",
    "ConfigProfile",
    "CpuProfile",
    "Experiment",
    "Host",
    "HostCanary",
    "HostSample",
    "Note",
    "Occurrence",
    "PgBuild",
    "PgCatalogue",
    "ProgressSample",
    "Provenance",
    "Result",
    "Run",
    "RunEvent",
    "RunTimeline",
    "Series",
    "ServerSample",
    "SettingChange",
    "SettingsDiff",
    "ShareLink",
    "SourceUpload",
    "StorageTarget",
    "TimelineTrace",
    "Workload",
    "imported_file",
    "new_share_token",
]
