"""The fast tier's guard (tests/conftest.py) tells a server's start or address from the rest."""

import socket

import pytest

from tests.conftest import ServerGuard, ServerUseError, is_server_address, server_program


@pytest.mark.parametrize(
    ("argv", "program"),
    [
        (["/opt/pg/bin/pg_ctl", "start", "-D", "/d"], "pg_ctl"),
        (["bwrap", "--ro-bind", "/", "/", "/opt/pg/bin/postgres", "-D", "/d"], "postgres"),
        (["runuser", "-u", "benchlab", "--", "/opt/pg/bin/pgbench", "-i"], "pgbench"),
        (["/bin/sh", "-c", "redis-server --port 7000"], "redis-server"),
        (["/usr/bin/python3", "-m", "celery", "-A", "benchlab", "worker"], "celery"),
        (["/opt/pg/bin/postgres", "--version"], None),
        (["/opt/pg/bin/pgbench", "-V"], None),
        (["/tmp/build/bin/postgres"], None),
        (["bash", "-c", "set -e\n$bindir/pgbench -c 4"], None),
        (["psqlx", "postgres"], None),
    ],
)
def test_a_command_line_names_the_server_program_it_starts(argv, program):
    assert server_program(argv) == program


def test_the_lab_database_redis_and_other_machines_are_server_addresses():
    with socket.socket() as tcp:
        assert is_server_address(tcp, ("127.0.0.1", 5432))
        assert is_server_address(tcp, ("localhost", 6379))
        assert is_server_address(tcp, ("151.101.0.223", 443))
        assert not is_server_address(tcp, ("127.0.0.1", 1))


def test_an_armed_guard_refuses_and_still_fails_the_test_when_the_error_was_caught():
    guard = ServerGuard()
    guard.arm()
    try:
        guard.audit("subprocess.Popen", ("/opt/pg/bin/initdb", ["/opt/pg/bin/initdb"], None, None))
    except ServerUseError:
        pass  # as code under test might
    guard.audit("subprocess.Popen", ("/bin/true", ["/bin/true"], None, None))

    with pytest.raises(ServerUseError, match="starts initdb: give it the fixture"):
        guard.disarm()
    guard.disarm()  # nothing left
