"""App configuration for `runs`."""

from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Benchmark runs"

    def ready(self) -> None:
        # The control-plane Celery app, before any task is sent (benchlab/__init__.py
        # leaves it out, for the command line client).
        import benchlab.celery  # noqa: F401

        # Connects the control worker's start and stop to Celery's worker signals.
        from runs.control import worker  # noqa: F401

        # Deletes a build's uploaded source tarball with it (a post_delete receiver).
        from runs.services import uploads  # noqa: F401
