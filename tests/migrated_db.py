"""The test database as a copy of one migrated database, instead of migrating per process.

Migrating an empty database takes 15 to 50 s of CPU (docs/benchmarks.md), and a run of
the suite used to pay it in every pytest process: the solo stage's and each xdist
worker's, three of them at once on two CPUs. The first process to need the database
migrates a template, named after everything the migrations are (`migrations_digest`);
every process, that one too, then gets its own database with `CREATE DATABASE ...
TEMPLATE`, a file copy of well under a second. The template is built under another name
and renamed when complete, all under an advisory lock, so a process never copies a half
migrated one; it stays on the server for the next process and the next run, and a
template of other migrations is dropped when a new one is made.
"""

import hashlib
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from django.conf import settings
from django.db import connections
from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.migrations.loader import MigrationLoader

# An advisory lock key of the suite's own: template builds and copies take turns.
TEMPLATE_LOCK = 0x62656E63686C6162


def migrations_digest() -> str:
    """A hash of every migration file of every installed app: another migration, or an
    edited one, names another template."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    digest = hashlib.sha256()
    for key in sorted(loader.disk_migrations):
        digest.update(repr(key).encode())
        module = sys.modules[type(loader.disk_migrations[key]).__module__]
        with open(module.__file__ or "", "rb") as source:
            digest.update(source.read())
    return digest.hexdigest()[:12]


@contextmanager
def server_cursor(connection: BaseDatabaseWrapper) -> Iterator[Any]:
    """A cursor on the server's maintenance database, holding the suite's advisory lock."""
    with connection._nodb_cursor() as cursor:
        cursor.execute("SELECT pg_advisory_lock(%s)", [TEMPLATE_LOCK])
        try:
            yield cursor
        finally:
            cursor.execute("SELECT pg_advisory_unlock(%s)", [TEMPLATE_LOCK])


def database_names(cursor: Any, like: str) -> set[str]:
    cursor.execute("SELECT datname FROM pg_database WHERE datname LIKE %s", [like])
    return {name for (name,) in cursor.fetchall()}


def build_template(connection: BaseDatabaseWrapper, template: str, verbosity: int) -> None:
    """Migrate a database under a building name and rename it `template` once complete."""
    test_settings = connection.settings_dict.setdefault("TEST", {})
    original, test_name = connection.settings_dict["NAME"], test_settings.get("NAME")
    building = f"{template}_building"
    test_settings["NAME"] = building
    try:
        connection.creation.create_test_db(verbosity, autoclobber=True, serialize=False)
    finally:
        connection.close()
        use_database(connection, original)
        test_settings["NAME"] = test_name
    with connection._nodb_cursor() as cursor:
        cursor.execute(f'ALTER DATABASE "{building}" RENAME TO "{template}"')


def create_migrated_test_db(alias: str = "default", verbosity: int = 0) -> str:
    """Give `alias` its test database, a copy of the migrated template; the original
    database name, for `destroy_test_db`."""
    connection = connections[alias]
    creation = connection.creation
    original = connection.settings_dict["NAME"]
    test_name = creation._get_test_db_name()
    prefix = f"test_{original}_migrated_"
    template = f"{prefix}{migrations_digest()}"
    with server_cursor(connection) as cursor:
        if template not in database_names(cursor, template):
            for stale in database_names(cursor, f"{prefix}%") - {template}:
                cursor.execute(f'DROP DATABASE IF EXISTS "{stale}" WITH (FORCE)')
            build_template(connection, template, verbosity)
        cursor.execute(f'DROP DATABASE IF EXISTS "{test_name}"')
        cursor.execute(f'CREATE DATABASE "{test_name}" TEMPLATE "{template}"')
    connection.close()
    use_database(connection, test_name)
    return original


def use_database(connection: BaseDatabaseWrapper, name: str) -> None:
    """Point the connection, and the settings the lab processes are started from, at `name`."""
    settings.DATABASES[connection.alias]["NAME"] = connection.settings_dict["NAME"] = name
