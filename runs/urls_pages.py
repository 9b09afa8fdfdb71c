"""Page URLs (included at "/"): runs, experiments, bisections, comparisons, catalogue,
share links."""

from django.urls import path, register_converter

from runs import sse
from runs.views import (
    bisections,
    catalogue,
    comparisons,
    experiments,
    history,
    hosts,
    noise,
    runs,
    sharing,
    timelines,
)


class ExportFormat:
    regex = "csv|json"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


class TargetKind:
    regex = "run|experiment|comparison"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(ExportFormat, "fmt")
register_converter(TargetKind, "kind")

urlpatterns = [
    path("", runs.run_list, name="run-list"),
    path("runs/<int:pk>/", runs.run_detail, name="run-detail"),
    path("runs/timeline.json", timelines.run_timeline, name="run-timeline"),
    path("runs/<int:pk>/events", sse.run_events, name="run-events"),
    path("runs/<int:pk>/cancel", runs.run_cancel, name="run-cancel"),
    path("runs/<int:pk>/rerun", runs.run_rerun, name="run-rerun"),
    path("runs/<int:pk>/results.<fmt:fmt>", runs.run_export, name="run-export"),
    path("runs/<int:pk>/build.log", runs.run_build_log, name="run-build-log"),
    path(
        "runs/<int:pk>/cpu-profiles/<int:index>.folded",
        runs.run_cpu_profile_folded,
        name="run-cpu-profile-folded",
    ),
    # Its address before the CPU profile had its name, kept for links already sent.
    path(
        "runs/<int:pk>/profiles/<int:index>.folded",
        runs.run_cpu_profile_folded,
        name="run-cpu-profile-folded-former-address",
    ),
    path("experiments/", experiments.experiment_list, name="experiment-list"),
    path("schedule/", experiments.schedule, name="schedule"),
    path("schedule/estimate", experiments.schedule_estimate, name="schedule-estimate"),
    # The form's first address, kept for bookmarks and links already sent.
    path("experiments/new", experiments.schedule, name="schedule-first-address"),
    path("experiments/<int:pk>/", experiments.experiment_detail, name="experiment-detail"),
    path("experiments/<int:pk>/start", experiments.experiment_start, name="experiment-start"),
    path(
        "experiments/<int:pk>/results.<fmt:fmt>",
        experiments.experiment_export,
        name="experiment-export",
    ),
    path("bisections/", bisections.bisection_list, name="bisection-list"),
    path("bisections/new", bisections.bisection_new, name="bisection-new"),
    path("bisections/<int:pk>/", bisections.bisection_detail, name="bisection-detail"),
    path("bisections/<int:pk>/cancel", bisections.bisection_cancel_view, name="bisection-cancel"),
    path(
        "bisections/<int:pk>/reproduce.sh",
        bisections.bisection_reproduce,
        name="bisection-reproduce",
    ),
    path("comparisons/", comparisons.comparison_list, name="comparison-list"),
    path("comparisons/new", comparisons.comparison_create, name="comparison-create"),
    path("comparisons/<int:pk>/", comparisons.comparison_detail, name="comparison-detail"),
    path(
        "comparisons/<int:pk>/results.<fmt:fmt>",
        comparisons.comparison_export,
        name="comparison-export",
    ),
    path("share/<kind:kind>/<int:pk>", sharing.share_create, name="share-create"),
    path("share/revoke/<int:pk>", sharing.share_revoke, name="share-revoke"),
    path("s/<str:token>/", sharing.shared, name="shared"),
    path("s/<str:token>/events", sse.shared_run_events, name="shared-events"),
    path("s/<str:token>/timeline.json", timelines.shared_timeline, name="shared-timeline"),
    path("s/<str:token>/results.<fmt:fmt>", sharing.shared_export, name="shared-export"),
    path("hosts/", catalogue.host_list, name="host-list"),
    path("hosts/<int:pk>/", catalogue.host_detail, name="host-detail"),
    path("hosts/<int:pk>/queue/", catalogue.host_queue, name="host-queue"),
    path("hosts/<int:pk>/rounds-needed", noise.host_rounds_needed, name="host-rounds-needed"),
    path("hosts/<int:pk>/approve", hosts.host_approve, name="host-approve"),
    path("hosts/<int:pk>/revoke", hosts.host_revoke, name="host-revoke"),
    path("builds/", catalogue.build_list, name="build-list"),
    path("configs/", catalogue.config_list, name="config-list"),
    path("configs/new", catalogue.config_edit, name="config-new"),
    path("configs/<int:pk>/", catalogue.config_edit, name="config-detail"),
    path("workloads/", catalogue.workload_list, name="workload-list"),
    path("workloads/new", catalogue.workload_edit, name="workload-new"),
    path("workloads/<int:pk>/", catalogue.workload_edit, name="workload-detail"),
    # History: import, series, alerts, notes, reproduce.
    path("import/", history.import_outputs, name="import"),
    path("series/", history.series_list, name="series-list"),
    path("series/<int:pk>/", history.series_detail, name="series-detail"),
    path("series/<int:pk>/fire", history.series_fire_now, name="series-fire"),
    path("series/<int:pk>/toggle", history.series_toggle, name="series-toggle"),
    path("alerts/", history.alert_list, name="alert-list"),
    path("alerts/<int:pk>/acknowledge", history.alert_acknowledge, name="alert-acknowledge"),
    path("alerts/<int:pk>/fixed", history.alert_fix, name="alert-fix"),
    path("alerts/<int:pk>/notes", history.alert_note_add, name="alert-note-add"),
    path("runs/<int:pk>/notes", history.run_note_add, name="run-note-add"),
    path("hosts/<int:pk>/notes", history.host_note_add, name="host-note-add"),
    path("runs/<int:pk>/manifest.json", history.run_manifest_json, name="run-manifest"),
    path("runs/<int:pk>/reproduce.sh", history.run_reproduce_script, name="run-reproduce"),
]
