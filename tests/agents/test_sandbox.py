"""The sandbox job programs run in (agents/sandbox.py), tried with real bubblewrap."""

import os
import socket
import subprocess
from pathlib import Path

import psutil
import pytest

from agents.postgres.osuser import OsUser, check_sandbox
from agents.sandbox import Sandbox, View
from tests.waiting import wait_for


@pytest.fixture
def places(storage_root: Path, os_user: OsUser) -> dict[str, Path]:
    """A writable and a read-only directory for the sandbox, and one it is not shown;
    all three open to the job's OS user by their modes."""
    made = {}
    for name in ("writable", "read_only", "hidden"):
        made[name] = storage_root / name
        made[name].mkdir()
        (made[name] / "file").write_text(f"{name}\n")
        os.chown(made[name], os_user.uid, os_user.gid)
        os.chown(made[name] / "file", os_user.uid, os_user.gid)
    return made


def run_in(os_user: OsUser, view: View, cwd: Path, script: str) -> subprocess.CompletedProcess:
    argv = os_user.command(["sh", "-c", script], view, cwd)
    return subprocess.run(
        argv, capture_output=True, text=True, timeout=30, **os_user.subprocess_kwargs()
    )


def test_a_program_sees_its_view_and_nothing_else(os_user: OsUser, places) -> None:
    view = View(read_only=(places["read_only"],), writable=(places["writable"],))
    script = (
        f"cat {places['read_only']}/file && echo new > {places['writable']}/new && "
        f"! touch {places['read_only']}/new 2>/dev/null && "
        f"! test -e {places['hidden']} && ! ls /root 2>/dev/null && id -u"
    )

    result = run_in(os_user, view, places["writable"], script)

    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["read_only", str(os_user.uid)]
    assert (places["writable"] / "new").read_text() == "new\n"
    assert not (places["read_only"] / "new").exists()


def test_without_network_nothing_on_the_hosts_loopback_answers(os_user: OsUser, places) -> None:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = listener.getsockname()[1]
        probe = (
            "python3 -c 'import socket, sys; "
            f'socket.create_connection(("127.0.0.1", {port}), 2)\' 2>/dev/null '
            "&& echo connected || echo refused"
        )

        closed = run_in(os_user, View(), Path("/"), probe)
        opened = run_in(os_user, View(network=True), Path("/"), probe)

    assert closed.stdout.strip() == "refused"
    assert opened.stdout.strip() == "connected"


def test_start_reports_the_programs_own_pid(os_user: OsUser, places) -> None:
    started = os_user.start(["sleep", "30"], View(), Path("/"))
    try:
        program = psutil.Process(started.pid)
        # bubblewrap reports the pid of the child it made, which then executes the program.
        wait_for(lambda: program.name() == "sleep", timeout=10, what="the program's exec")
        assert program.uids().real == os_user.uid
        assert started.pid != started.process.pid  # the sandbox is the process waited for
    finally:
        program.kill()
        started.process.wait(timeout=10)


def test_a_disabled_sandbox_runs_the_command_as_it_is(places) -> None:
    assert Sandbox(enabled=False).command(["pgbench", "-i"], View(), places["writable"]) == [
        "pgbench",
        "-i",
    ]


def test_the_worker_check_passes_where_bubblewrap_works(os_user: OsUser) -> None:
    check_sandbox(os_user)
