"""Admin registrations: read-mostly views of the lab's data."""

from django.contrib import admin
from django.http import HttpRequest

from runs import models


@admin.register(models.Host)
class HostAdmin(admin.ModelAdmin[models.Host]):
    list_display = ["name", "enrollment", "last_seen", "registered_at"]
    search_fields = ["name"]
    # Enrollment changes go through the hosts page (services); the secret is never shown.
    exclude = ["secret"]
    readonly_fields = ["enrollment", "enrollment_changed_at", "enrollment_changed_by"]


@admin.register(models.ApiToken)
class ApiTokenAdmin(admin.ModelAdmin[models.ApiToken]):
    """Tokens by their first characters; delete one to revoke it. New ones come from
    `manage.py create_api_token`, the one place a token is shown."""

    list_display = ["prefix", "user", "name", "created_at"]
    search_fields = ["user__username", "name", "prefix"]
    readonly_fields = ["user", "prefix", "name", "created_at"]
    exclude = ["digest"]

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False


@admin.register(models.Run)
class RunAdmin(admin.ModelAdmin[models.Run]):
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
