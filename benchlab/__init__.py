"""BenchLab Django project.

Importing the package imports nothing else, so `benchlab.cli` (the `benchlab` command)
runs where Django and Celery are not installed. The control-plane Celery app
(benchlab/celery.py) loads when Django's apps are ready (runs/apps.py) and with
`celery -A benchlab`, which finds `benchlab.celery`; `benchlab.celery_app` is that app.
"""

from typing import Any


def __getattr__(name: str) -> Any:
    if name == "celery_app":
        from benchlab.celery import app

        return app
    raise AttributeError(f"module 'benchlab' has no attribute {name!r}")
