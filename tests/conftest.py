"""Django settings for the test suite.

The runs tests use PostgreSQL (`DATABASE_URL`, default
postgres://postgres@127.0.0.1:5432/benchlab; each pytest process gets test_benchlab,
or test_benchlab_gw0 ..., copied from a migrated template (tests/migrated_db.py), and
drops it) and Redis database 15 (`REDIS_URL`), so queued test jobs never
reach a real agent's queue on database 0.

Django is set up here, at import, because pytest-django looks for
DJANGO_SETTINGS_MODULE before any conftest is imported and the runs conftest
imports models; pytest-django still blocks database access outside `db` tests.
Agent code never imports Django; loading it here costs agent tests nothing else.

Below: a cheap password hasher, and the test tiers (each test marked with what it
needs, from its fixtures) with `--fast` and its guard; CONTRIBUTING.md explains them.
"""

import ipaddress
import json
import os
import socket
import sys
from collections.abc import Generator, Iterator
from itertools import pairwise
from pathlib import Path
from typing import Any, NoReturn
from urllib.parse import urlsplit

import django
import psycopg
import pytest
from django.conf import settings
from django.contrib.auth.hashers import PBKDF2PasswordHasher
from django.db import connection
from psycopg.conninfo import conninfo_to_dict
from pytest_django import DjangoDbBlocker

from tests.migrated_db import create_migrated_test_db

os.environ.setdefault("DATABASE_URL", "postgres://postgres@127.0.0.1:5432/benchlab")
os.environ.setdefault("REDIS_URL", "redis://127.0.0.1:6379/15")


def worker_redis_url(url: str, worker: str) -> str:
    """The Redis URL of one pytest-xdist worker (`gw0`, `gw1`, ...): the suite's database
    for the first, the next ones down (or up, from a low database) for the others, so two
    workers' queues and streams never meet."""
    index = int(worker.removeprefix("gw"))
    parts = urlsplit(url)
    base = int(parts.path.strip("/") or 0)
    db = base - index if base - index >= 0 else base + index
    return parts._replace(path=f"/{db}").geturl()


if "PYTEST_XDIST_WORKER" in os.environ:
    os.environ["REDIS_URL"] = worker_redis_url(
        os.environ["REDIS_URL"], os.environ["PYTEST_XDIST_WORKER"]
    )
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "benchlab.settings")
django.setup()
# A worker inherits DJANGO_SETTINGS_MODULE from the first process, so pytest-django has
# read the settings before this module ran: they take the worker's Redis here.
settings.REDIS_URL = settings.CELERY_BROKER_URL = os.environ["REDIS_URL"]


class OneRoundPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """Django's hasher with one round instead of a million: the suite makes hundreds of
    users (`UserFactory` sets a password) and each full hash costs a quarter of a second.
    The hash keeps its algorithm and records its rounds, so the lab processes the
    integration and browser tests start, with Django's own hasher, still check it."""

    iterations = 1


settings.PASSWORD_HASHERS = [f"{__name__}.{OneRoundPBKDF2PasswordHasher.__name__}"]


@pytest.fixture(scope="session")
def django_db_setup(
    django_test_environment: None,
    django_db_blocker: DjangoDbBlocker,
    django_db_modify_db_settings: None,
) -> Iterator[None]:
    """pytest-django's test database, copied from a migrated template instead of migrated
    in every pytest process (tests/migrated_db.py); dropped at the end as before."""
    with django_db_blocker.unblock():
        original = create_migrated_test_db()
    yield
    with django_db_blocker.unblock():
        connection.creation.destroy_test_db(original, verbosity=0)


# Test tiers, from what a test needs (docs: CONTRIBUTING.md). `item.fixturenames` holds
# every fixture a test uses, directly or through other fixtures, so a fixture built on one
# of these (`api_client` on `db`, `workload_cluster` on `agent_cache_dir`) marks its tests
# too. A test that needs a server none of its fixtures shows is marked by hand with the
# tier's marker; `--fast` runs the rest with a guard that fails a test starting or reaching
# a server.
TIER_FIXTURES = {
    "lab_db": {"django_db_setup", "live_server"},
    "cluster": {
        "pg16_install", "pg15_system_install", "agent_cache_dir", "cluster_root",
        "storage_root",
    },
    "redis": {"shared_redis", "spare_redis", "own_redis", "lab_redis"},
    "browser": {"browser"},
}  # fmt: skip
TIER_MARKERS = {
    "django_db": {"lab_db"},
    "integration": {"lab_db", "redis"},
    "e2e": {"lab_db", "browser"},
}


def item_tiers(item: pytest.Item) -> set[str]:
    """The tiers a test needs: from its fixtures, its markers and tier markers set by hand."""
    names = set(getattr(item, "fixturenames", ()))
    tiers = {tier for tier, fixtures in TIER_FIXTURES.items() if names & fixtures}
    for marker in item.iter_markers():
        tiers |= TIER_MARKERS.get(marker.name, set())
        if marker.name in TIER_FIXTURES:
            tiers.add(marker.name)
    return tiers


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--fast",
        action="store_true",
        help="run only the tests that need no server (marked fast), failing any that uses one",
    )


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("fast"):
        sys.addaudithook(GUARD.audit)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    slow = []
    for item in items:
        tiers = item_tiers(item)
        for tier in tiers:
            item.add_marker(tier)
        if not tiers:
            item.add_marker("fast")
        elif config.getoption("fast"):
            slow.append(item)
    if slow:
        config.hook.pytest_deselected(items=slow)
        deselected = set(slow)
        items[:] = [item for item in items if item not in deselected]
    items.sort(key=_expected_file_seconds, reverse=True)


# Seconds the slowest test files took (scripts/file-seconds): the suite's xdist workers
# take files in this order (scripts/test: --no-loadscope-reorder), the longest first, so
# no long file starts last and keeps one worker busy while the other has nothing left.
FILE_SECONDS: dict[str, float] = json.loads(
    (Path(__file__).parent / "file_seconds.json").read_text()
)


def _expected_file_seconds(item: pytest.Item) -> float:
    """What the item's file took last measured; 0 for the rest (they keep their order)."""
    return FILE_SECONDS.get(item.nodeid.split("::")[0], 0.0)


# What a fast test must not start or reach: programs that are or need a server, the lab
# database's and Redis's ports, other machines (downloads).
SERVER_PROGRAMS = frozenset(
    {"postgres", "postmaster", "pg_ctl", "initdb", "pgbench", "psql", "redis-server",
     "chromium", "celery"}
)  # fmt: skip
SERVER_PORTS = frozenset(
    {5432, 6379} | {urlsplit(os.environ[name]).port or 0 for name in ("DATABASE_URL", "REDIS_URL")}
)
PROCESS_EVENTS = {"subprocess.Popen": 1, "os.exec": 1, "os.posix_spawn": 1, "os.system": 0}


class ServerUseError(Exception):
    """A test in the fast tier started or reached a server."""


def server_program(argv: list[str]) -> str | None:
    """The server program a command line starts: its program, a program given by path
    (`bwrap ... /opt/pg/bin/pgbench`), the module after `-m` or the program of `sh -c`.
    Asking for a version starts nothing, nor does `postgres` without a data directory."""
    if "--version" in argv or "-V" in argv:
        return None
    names = {Path(arg).name for arg in argv[:1] + [arg for arg in argv if arg.startswith("/")]}
    for flag, value in pairwise(argv):
        if flag == "-m":
            names.add(value)
        elif flag == "-c" and value.split():
            names.add(Path(value.split()[0]).name)
    if "-D" not in argv:
        names -= {"postgres", "postmaster"}
    found = names & SERVER_PROGRAMS
    return min(found) if found else None


def is_server_address(sock: socket.socket, address: Any) -> bool:
    """Whether a connection goes to the lab database's or Redis's port, or off this machine."""
    if sock.family not in (socket.AF_INET, socket.AF_INET6):
        return False
    host, port = address[0], address[1]
    try:
        loopback = ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = host == "localhost"
    return port in SERVER_PORTS or not loopback


class ServerGuard:
    """Refuses, while armed, what a fast test must not do, and remembers each refusal so
    the test fails even if the code under test catches the error.

    Sees this process only (an audit hook and psycopg.connect): a test whose child
    process starts a server is marked with its tier by hand.
    """

    def __init__(self) -> None:
        self.armed = False
        self.refused: list[str] = []
        self.patch = pytest.MonkeyPatch()

    def audit(self, event: str, args: tuple[Any, ...]) -> None:
        if not self.armed:
            return
        if event in PROCESS_EVENTS:
            argv = args[PROCESS_EVENTS[event]]
            if isinstance(argv, str | bytes):
                argv = os.fsdecode(argv).split()
            program = server_program([os.fsdecode(arg) for arg in argv])
            if program:
                self.refuse(f"starts {program}")
        elif event == "socket.connect" and is_server_address(*args):
            self.refuse(f"connects to {args[1]!r}")

    def refuse(self, what: str) -> NoReturn:
        self.refused.append(what)
        raise ServerUseError(what)

    def connect_psycopg(self, conninfo: str = "", **kwargs: Any) -> psycopg.Connection:
        """psycopg.connect, refused for the lab database's port (libpq's sockets are not
        Python's, so the audit hook does not see them)."""
        ports = str(conninfo_to_dict(conninfo, **kwargs).get("port") or 5432).split(",")
        if SERVER_PORTS.intersection(int(port) for port in ports):
            self.refuse(f"connects to PostgreSQL on port {','.join(ports)}")
        return CONNECT(conninfo, **kwargs)

    def arm(self) -> None:
        self.patch.setattr(psycopg, "connect", self.connect_psycopg)
        self.armed = True

    def disarm(self) -> None:
        self.armed = False
        self.patch.undo()
        refused, self.refused = self.refused, []
        if refused:
            raise ServerUseError(
                f"a test in the fast tier {'; '.join(dict.fromkeys(refused))}: give it the"
                " fixture that provides the server, or mark it with its tier"
                f" ({', '.join(TIER_FIXTURES)})"
            )


CONNECT = psycopg.connect
GUARD = ServerGuard()


def guarded(config: pytest.Config) -> Generator[None, None, None]:
    """A test phase (setup, call, teardown) run with the guard armed under --fast."""
    if not config.getoption("fast"):
        return (yield)
    GUARD.arm()
    try:
        return (yield)
    finally:
        GUARD.disarm()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from guarded(item.config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from guarded(item.config))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item) -> Generator[None, None, None]:
    return (yield from guarded(item.config))
