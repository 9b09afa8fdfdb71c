"""Django settings for the test suite.

The runs tests use PostgreSQL (`DATABASE_URL`, default
postgres://postgres@127.0.0.1:5432/benchlab; pytest-django creates and drops
test_benchlab) and a throw-away events stream name per test. Tests outside
tests/runs never touch Django, so the settings are only applied when pytest
collects Django tests.
"""

import os

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/benchlab")
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
