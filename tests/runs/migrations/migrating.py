"""Running the lab's migrations in a test: to a target and back (the `at_latest`
fixture, tests/runs/conftest.py, migrates forward again after the test)."""

from django.apps.registry import Apps
from django.db import connection
from django.db.migrations.executor import MigrationExecutor


def migrate(targets: list[tuple[str, str]]) -> Apps:
    """Migrate the test database to `targets`; the models as they are there."""
    executor = MigrationExecutor(connection)
    executor.migrate(targets)
    executor.loader.build_graph()
    return executor.loader.project_state(targets).apps


def migrate_to_latest() -> None:
    """Migrate every app forward to its latest migration."""
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes())
