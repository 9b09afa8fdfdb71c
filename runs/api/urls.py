"""API routes under /api/."""

from django.urls import re_path
from rest_framework.routers import DefaultRouter

from runs.api import bisections, history, presets, tries, views
from runs.api.errors import api_not_found

router = DefaultRouter()
router.include_format_suffixes = False
router.register("hosts", views.HostViewSet)
router.register("storage-targets", views.StorageTargetViewSet)
router.register("builds", views.PgBuildViewSet)
router.register("config-profiles", views.ConfigProfileViewSet)
router.register("workloads", views.WorkloadViewSet)
router.register("experiments", views.ExperimentViewSet)
router.register("runs", views.RunViewSet)
router.register("comparisons", views.ComparisonViewSet)
router.register("bisections", bisections.BisectionViewSet)
router.register("presets", presets.PresetViewSet, basename="preset")
router.register("tries", tries.TryViewSet, basename="try")
router.register("share-links", views.ShareLinkViewSet)
# History: imports, series, alerts, notes.
router.register("imports", history.ImportViewSet, basename="import")
router.register("series", history.SeriesViewSet)
router.register("alerts", history.AlertViewSet)
router.register("notes", history.NoteViewSet, basename="note")

urlpatterns = [*router.urls, re_path(r"^(?P<path>.*)$", api_not_found, name="not-found")]
