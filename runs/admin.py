"""Admin registrations: read-mostly views of the lab's data."""

from django.contrib import admin

from runs import models


@admin.register(models.Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "enrollment", "last_seen", "registered_at"]
    search_fields = ["name"]
    # Enrollment changes go through the hosts page (services); the secret is never shown.
    exclude = ["secret"]
    readonly_fields = ["enrollment", "enrollment_changed_at", "enrollment_changed_by"]


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ["id", "experiment", "host", "build", "config_profile", "status", "queued_at"]
    list_filter = ["status", "host"]
    raw_id_fields = ["experiment", "rerun_of"]


admin.site.register(
    [
        models.StorageTarget,
        models.PgBuild,
        models.PgCatalogue,
        models.ConfigProfile,
        models.Workload,
        models.Experiment,
        models.Comparison,
        models.ShareLink,
    ]
)
