"""Static files under uvicorn: plotly.js from the plotly package, and frontend/."""

from pathlib import Path

import plotly
from django.conf import settings
from django.http import FileResponse, HttpRequest
from django.views.decorators.cache import cache_control
from django.views.static import serve

PLOTLY_JS = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
FRONTEND = Path(settings.BASE_DIR) / "frontend"


@cache_control(max_age=86400, public=True)
def plotly_js(request: HttpRequest) -> FileResponse:
    """The plotly.js bundle shipped inside the plotly Python package."""
    return FileResponse(PLOTLY_JS.open("rb"), content_type="text/javascript")


def frontend_file(request: HttpRequest, path: str):
    """A file of frontend/ (the app's CSS and ES modules); no build step."""
    return serve(request, path, document_root=FRONTEND)
