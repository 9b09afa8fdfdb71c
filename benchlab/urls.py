"""URL map: the API under /api/, the pages at /."""

from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

urlpatterns = [
    path("admin/", admin.site.urls),
    path("accounts/", include("django.contrib.auth.urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # The split view serves its script as a file: the CSP allows no inline script.
    path("api/docs/", SpectacularSwaggerSplitView.as_view(url_name="api-schema"), name="api-docs"),
    path("api/", include(("runs.api.urls", "api"))),
    path("", include("runs.urls_pages")),
]

# With DEBUG off: JSON under /api/, plain pages elsewhere; nothing about the settings.
handler404 = "benchlab.security.page_not_found"
handler500 = "benchlab.security.server_error"
