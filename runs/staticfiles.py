"""A staticfiles finder for the plotly.js bundle inside the `plotly` Python package.

Pages load plotly.js from `/static/vendor/plotly.min.js`; the file is the one
the installed `plotly` package ships (figures are built with the same
version), found here so whitenoise and collectstatic serve it like any
other static file, with no copy kept in the repository. Only that one file
of the package is exposed.
"""

from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import plotly
from django.contrib.staticfiles.finders import BaseFinder
from django.core.files.storage import FileSystemStorage

PLOTLY_DIR = Path(plotly.__file__).parent / "package_data"
BUNDLE = "plotly.min.js"
PREFIX = "vendor"


class PlotlyFinder(BaseFinder):
    """Finds `vendor/plotly.min.js` in the installed plotly package."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.storage = FileSystemStorage(location=PLOTLY_DIR)
        self.storage.prefix = PREFIX  # type: ignore[attr-defined]

    def find(self, path: str, find_all: bool = False, **kwargs: Any) -> Any:
        if path != f"{PREFIX}/{BUNDLE}":
            # Empty for both: Django's `find` keeps any non-list answer as a match,
            # and a match of "" made every missing static file a 500.
            return []
        found = str(PLOTLY_DIR / BUNDLE)
        return [found] if find_all else found

    def list(
        self, ignore_patterns: Iterable[str] | None
    ) -> Iterator[tuple[str, FileSystemStorage]]:
        yield BUNDLE, self.storage
