"""BenchLab Django project; the control-plane Celery app loads with it."""

from benchlab.celery import app as celery_app

__all__ = ("celery_app",)
