"""Admin registrations: read-mostly views of the lab's data."""

from django.contrib import admin

from runs import models


@admin.register(models.Host)
class HostAdmin(admin.ModelAdmin):
    list_display = ["name", "last_seen", "registered_at"]
    search_fields = ["name"]


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
