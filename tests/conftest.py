"""Django settings for the test suite.

The runs tests use PostgreSQL (`DATABASE_URL`, default
postgres://postgres@127.0.0.1:5432/benchlab; pytest-django creates and drops
test_benchlab) and Redis database 15 (`REDIS_URL`), so queued test jobs never
reach a real agent's queue on database 0.

Django is set up here, at import, because pytest-django looks for
DJANGO_SETTINGS_MODULE before any conftest is imported and the runs conftest
imports models; pytest-django still blocks database access outside `db` tests.
Agent code never imports Django; loading it here costs agent tests nothing else.
"""

import os

import django

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/benchlab")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup()
