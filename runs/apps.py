"""App configuration for `runs`."""

from django.apps import AppConfig


class RunsConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "runs"
    verbose_name = "Benchmark runs"
