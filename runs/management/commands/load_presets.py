"""`manage.py load_presets`: create the presets' builds, config profiles and workloads."""

from django.core.management.base import BaseCommand

from runs.presets import PRESETS, load_presets


class Command(BaseCommand):
    help = "Create the catalogue entries the experiment presets use (idempotent)."

    def handle(self, *args: object, **options: object) -> None:
        created = load_presets()
        summary = ", ".join(f"{count} {kind}" for kind, count in created.items())
        self.stdout.write(f"{len(PRESETS)} presets; created {summary}.")
