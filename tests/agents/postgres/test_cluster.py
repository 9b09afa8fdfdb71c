"""Throw-away clusters with real initdb, postgres and pg_ctl (the workload role on 14 to 18)."""

import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import psutil
import psycopg
import pytest
from psycopg.conninfo import make_conninfo

from agents.contract.errors import JobError
from agents.markers import MARKER, ClusterMarker
from agents.postgres.cluster.clients import (
    SUPERUSER,
    WORKLOAD_DATABASE,
    WORKLOAD_ROLE,
    WorkloadAccess,
)
from agents.postgres.cluster.directories import usable_job_id
from agents.postgres.cluster.leftovers import remove_leftover_clusters
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.ensure import ensure_install
from tests.agents.conftest import unique_job_id


def _processes_in(data_dir: Path) -> list[psutil.Process]:
    found = []
    for process in psutil.process_iter():
        try:
            if Path(process.cwd()) == data_dir:
                found.append(process)
        except psutil.Error:
            continue
    return found


def _gone(pid: int) -> bool:
    """True when `pid` has exited (a zombie waiting for init to reap it counts as gone)."""
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_lifecycle_with_wal_elsewhere_leaves_no_process_and_no_directory(make_cluster, os_user):
    cluster: Cluster = make_cluster(wal=True)
    steps = []
    cluster.on_step = lambda name, argv, seconds, exit_code, note=None: steps.append(
        (name, argv, exit_code)
    )

    cluster.initdb()
    cluster.start()

    assert (cluster.data_dir / "pg_wal").is_symlink()
    assert (cluster.data_dir / "pg_wal").resolve() == cluster.wal_dir
    assert cluster.wal_container.name == f"benchlab-{cluster.job_id}-wal"
    for directory in (cluster.job_dir, cluster.wal_container):
        marker = ClusterMarker.read(directory)
        assert (marker.job_id, marker.owner_pid) == (cluster.job_id, os.getpid())
    assert stat.S_IMODE(cluster.data_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(cluster.socket_dir.stat().st_mode) == 0o700
    assert cluster.data_dir.stat().st_uid == os_user.uid
    with cluster.connect() as conn:
        assert conn.execute("SHOW server_version").fetchone() == ("16.15",)
        assert conn.execute("SHOW listen_addresses").fetchone() == ("127.0.0.1",)
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
    assert [name for name, _, _ in steps] == ["initdb", "start"]
    initdb_argv = steps[0][1]
    assert initdb_argv[0] == str(cluster.install.program("initdb"))
    assert initdb_argv[-2:] == ["--waldir", str(cluster.wal_dir)]
    assert all(exit_code == 0 for _, _, exit_code in steps)
    assert "ready to accept connections" in cluster.log_tail()

    postmaster = psutil.Process(cluster.postmaster_pid)
    assert postmaster.uids().real == os_user.uid
    # A session of its own (its sandbox's), out of reach of a Ctrl-C on the agent's terminal.
    assert os.getsid(postmaster.pid) not in (os.getsid(0), 0)

    cluster.destroy()

    assert _gone(postmaster.pid)
    assert _processes_in(cluster.data_dir) == []
    assert not cluster.job_dir.exists()
    assert not cluster.wal_container.exists()
    assert cluster.job_dir.parent.exists()


def test_clients_reach_the_cluster_as_the_os_user(pg_cluster: Cluster, os_user) -> None:
    result = subprocess.run(
        [str(pg_cluster.install.program("pgbench")), "--version"],
        capture_output=True, text=True, **os_user.subprocess_kwargs(),
    )  # fmt: skip
    ready = subprocess.run(
        [str(pg_cluster.install.bindir / "pg_isready")],
        capture_output=True, text=True, **os_user.subprocess_kwargs(**pg_cluster.client_env()),
    )  # fmt: skip

    assert result.stdout.startswith("pgbench (PostgreSQL) 16.15")
    assert ready.returncode == 0, ready.stdout
    assert f"host={pg_cluster.socket_dir}" in pg_cluster.conninfo()


def test_restart_and_killed_server_are_handled(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    first_pid = cluster.postmaster_pid

    cluster.restart()
    assert cluster.is_running()
    assert cluster.postmaster_pid != first_pid

    backend = cluster.connect()
    # As the agent sees them: inside the sandbox the server has pids of its own namespace.
    server_processes = psutil.Process(cluster.postmaster_pid).children()
    cluster.kill_server()

    assert not cluster.is_running()
    assert cluster.postmaster_pid is None
    cluster.destroy()
    backend.close()
    assert server_processes and all(_gone(process.pid) for process in server_processes)
    assert not cluster.job_dir.exists()


def test_context_manager_destroys_on_keyboard_interrupt(make_cluster) -> None:
    cluster: Cluster = make_cluster()

    with pytest.raises(KeyboardInterrupt), cluster:
        cluster.initdb()
        cluster.start()
        pid = cluster.postmaster_pid
        raise KeyboardInterrupt

    assert _gone(pid)
    assert not cluster.job_dir.exists()


def test_destroy_leaves_a_directory_without_its_marker(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.job_dir.mkdir(parents=True)
    (cluster.job_dir / "precious").write_text("someone else's")

    with pytest.raises(JobError) as raised:
        cluster.initdb()
    cluster.destroy()

    assert raised.value.code == "initdb_failed"
    assert "already exists" in raised.value.message
    assert (cluster.job_dir / "precious").read_text() == "someone else's"


def test_destroy_leaves_a_directory_marked_by_another_job(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.job_dir.mkdir(parents=True)
    (cluster.job_dir / MARKER).write_text("another-job\n")

    cluster.destroy()

    assert (cluster.job_dir / MARKER).exists()


@pytest.mark.skipif(
    os.geteuid() != 0, reason="only root can make a directory the user cannot enter"
)
def test_storage_the_os_user_cannot_enter_is_reported(
    pg16_install, os_user, cluster_root: Path
) -> None:
    private = cluster_root / "private"
    private.mkdir(mode=0o700)

    with (
        pytest.raises(JobError) as raised,
        Cluster(pg16_install, os_user, private / "inner", job_id="unreachable") as cluster,
    ):
        cluster.initdb()

    assert f"{private} cannot be traversed by OS user" in raised.value.message


def test_start_failure_reports_the_server_log(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.initdb()
    cluster.write_settings_file("shared_buffers = 'plenty'\n")

    with pytest.raises(JobError) as raised:
        cluster.start(timeout=20)

    assert raised.value.code == "server_start_failed"
    assert 'invalid value for parameter "shared_buffers"' in raised.value.message
    assert not cluster.is_running()


def test_debian_install_runs_a_cluster_too(make_cluster, pg15_system_install) -> None:
    cluster: Cluster = make_cluster(install=pg15_system_install)
    cluster.initdb()
    cluster.start()

    with cluster.connect() as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]

    assert version.startswith(pg15_system_install.version)


# A process that creates and starts a cluster, then dies without destroying it (as a
# SIGKILLed agent would): argv is bindir, os user, data parent, wal parent, job id.
ABANDON_A_CLUSTER = """
import sys
from pathlib import Path
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.installs.inventory import inspect_bindir
from agents.postgres.osuser import ensure_os_user
bindir, user, data_parent, wal_parent, job_id = sys.argv[1:]
install = inspect_bindir(Path(bindir), "prebuilt")
cluster = Cluster(install, ensure_os_user(user), Path(data_parent), Path(wal_parent), job_id)
cluster.initdb()
cluster.start()
print(cluster.postmaster_pid)
"""


def _abandon_a_cluster(install, os_user, data_parent: Path, wal_parent: Path) -> tuple[str, int]:
    """A running cluster whose creating process has exited; its job id and postmaster pid."""
    job_id = unique_job_id()
    argv = [str(install.bindir), os_user.name, str(data_parent), str(wal_parent), job_id]
    done = subprocess.run(
        [sys.executable, "-c", ABANDON_A_CLUSTER, *argv], capture_output=True, text=True, check=True
    )
    return job_id, int(done.stdout)


def test_leftovers_of_a_gone_process_are_removed_and_a_live_agents_cluster_kept(
    pg16_install, os_user, cluster_root
):
    data_parent = cluster_root / f"left-{unique_job_id()}"
    wal_parent = cluster_root / f"left-wal-{unique_job_id()}"
    orphan_job, orphan_postmaster = _abandon_a_cluster(
        pg16_install, os_user, data_parent, wal_parent
    )
    stranger = data_parent / "benchlab-not-ours"
    stranger.mkdir()
    # This test process is the other agent, in the middle of a job in the same directories.
    with Cluster(pg16_install, os_user, data_parent, wal_parent, unique_job_id()) as live:
        live.initdb()
        live.start()

        removed = remove_leftover_clusters({"data": data_parent, "wal": wal_parent}, os_user)

        assert removed == [orphan_job]
        assert _gone(orphan_postmaster)
        assert not (data_parent / f"benchlab-{orphan_job}").exists()
        assert not (wal_parent / f"benchlab-{orphan_job}-wal").exists()
        assert live.is_running() and live.job_dir.exists() and live.wal_container.exists()
        assert stranger.exists()


def test_a_leftover_clusters_pgbench_that_outlived_its_agent_is_killed_with_it(
    pg16_install, os_user, cluster_root
):
    """A process working in the dead job's directory (a pgbench and its sandbox, which a
    killed agent can leave waiting) goes with the cluster, not only the server."""
    data_parent = cluster_root / f"left-{unique_job_id()}"
    wal_parent = cluster_root / f"left-wal-{unique_job_id()}"
    orphan_job, _postmaster = _abandon_a_cluster(pg16_install, os_user, data_parent, wal_parent)
    pgbench_dir = data_parent / f"benchlab-{orphan_job}" / "pgbench"
    pgbench_dir.mkdir()
    straggler = subprocess.Popen(["sleep", "300"], cwd=pgbench_dir)
    try:
        remove_leftover_clusters({"data": data_parent, "wal": wal_parent}, os_user)

        straggler.wait(timeout=15)  # killed (and already reaped by the kill's wait)
        assert _gone(straggler.pid)
        assert not pgbench_dir.exists()
    finally:
        straggler.kill()


@pytest.mark.parametrize(
    ("run_id", "job_id"),
    [("42", "42"), ("-1", "1"), ("café run", "caf--run"), ("__", "local"), ("x" * 80, "x" * 48)],
)
def test_any_run_id_becomes_a_job_id_a_cluster_accepts(run_id, job_id, os_user, tmp_path) -> None:
    cluster = Cluster(None, os_user, tmp_path, job_id=usable_job_id(run_id))

    assert cluster.job_id == job_id


def test_a_marker_without_its_owner_counts_as_left_behind(tmp_path: Path) -> None:
    (tmp_path / MARKER).write_text("old-job\n")

    assert ClusterMarker.read(tmp_path) == ClusterMarker("old-job")
    assert not ClusterMarker.read(tmp_path).owner_alive()


def test_a_reused_pid_does_not_pass_for_the_marker_owner() -> None:
    this = ClusterMarker.for_this_process("job")

    assert this.owner_alive()
    assert not ClusterMarker("job", this.owner_pid, this.owner_start - 1).owner_alive()


@pytest.fixture(scope="module", params=["14", "15", "16", "17", "18"])
def workload_cluster(request, agent_cache_dir, os_user, cluster_root) -> Iterator[Cluster]:
    """A started cluster of each major version the agent supports, with its workload database."""
    install = ensure_install(request.param, "prebuilt", agent_cache_dir)
    job_id = unique_job_id()
    with Cluster(install, os_user, cluster_root / job_id, job_id=job_id) as cluster:
        cluster.initdb()
        cluster.start()
        cluster.create_workload_database()
        yield cluster


def _refused(conn: psycopg.Connection, sql: str) -> str:
    with pytest.raises(psycopg.errors.InsufficientPrivilege) as refused:
        conn.execute(sql)
    return str(refused.value)


def test_workload_role_owns_its_database_and_nothing_more(workload_cluster: Cluster) -> None:
    access = WorkloadAccess(WORKLOAD_ROLE, WORKLOAD_DATABASE, superuser=False)
    assert workload_cluster.workload == access
    with workload_cluster.connect(WORKLOAD_DATABASE) as admin:
        role = admin.execute(
            "SELECT rolsuper, rolcreatedb, rolcreaterole, rolreplication, rolbypassrls,"
            " pg_has_role(oid, 'pg_execute_server_program', 'MEMBER'),"
            " pg_has_role(oid, 'pg_read_server_files', 'MEMBER'),"
            " pg_has_role(oid, 'pg_write_server_files', 'MEMBER')"
            " FROM pg_roles WHERE rolname = %s",
            [WORKLOAD_ROLE],
        ).fetchone()
        owners = admin.execute(
            "SELECT pg_get_userbyid(d.datdba), pg_get_userbyid(n.nspowner)"
            " FROM pg_database d, pg_namespace n"
            " WHERE d.datname = current_database() AND n.nspname = 'public'"
        ).fetchone()
    assert role == (False,) * 8
    assert owners == (WORKLOAD_ROLE, WORKLOAD_ROLE)


def test_workload_role_cannot_touch_the_host(workload_cluster: Cluster) -> None:
    written = workload_cluster.job_dir / "written-by-the-workload"

    with workload_cluster.connect_workload() as conn:
        assert conn.execute("SELECT current_user").fetchone() == (WORKLOAD_ROLE,)
        conn.execute("CREATE TABLE t (line text)")
        program = _refused(conn, f"COPY t TO PROGRAM 'cat > {written}'")
        write = _refused(conn, f"COPY (SELECT 1) TO '{written}'")
        read = _refused(conn, f"COPY t FROM '{workload_cluster.data_dir / 'PG_VERSION'}'")
        hidden = _refused(
            conn, f"DO $$ BEGIN EXECUTE 'COPY t TO PROGRAM ''id > {written}'''; END $$"
        )
        language = _refused(conn, "CREATE FUNCTION f() RETURNS int LANGUAGE c AS 'libc', 'getpid'")
        read_file = _refused(conn, "SELECT pg_read_file('PG_VERSION')")

    assert "external program" in program and "external program" in hidden
    assert "file" in write and "file" in read
    assert "language c" in language
    assert "pg_read_file" in read_file
    assert not written.exists()


def test_workload_role_runs_plpgsql(workload_cluster: Cluster) -> None:
    with workload_cluster.connect_workload() as conn:
        conn.execute("CREATE TABLE kv (id int PRIMARY KEY, v int)")
        conn.execute(
            "CREATE FUNCTION bump(i int) RETURNS void LANGUAGE plpgsql AS $$ BEGIN "
            "INSERT INTO kv VALUES (i, 1) ON CONFLICT (id) DO UPDATE SET v = kv.v + 1; END $$"
        )
        conn.execute("SELECT bump(1), bump(1)")
        assert conn.execute("SELECT v FROM kv").fetchone() == (2,)


def test_workload_role_reaches_only_its_database_and_only_by_socket(
    workload_cluster: Cluster,
) -> None:
    other_database = make_conninfo(workload_cluster.workload_conninfo(), dbname="postgres")
    over_tcp = make_conninfo(workload_cluster.conninfo(), host="127.0.0.1")

    with pytest.raises(psycopg.OperationalError, match="permission denied for database"):
        psycopg.connect(other_database).close()
    # The server's sandbox has a network of its own: its 127.0.0.1 is not the host's.
    with pytest.raises(psycopg.OperationalError, match="Connection refused"):
        psycopg.connect(over_tcp).close()


def test_agent_maintenance_connection_ignores_the_owners_search_path(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    cluster.create_workload_database()
    with cluster.connect_workload() as conn:
        conn.execute(f"ALTER DATABASE {WORKLOAD_DATABASE} SET search_path = public")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            conn.execute("CHECKPOINT")
    with cluster.connect_workload() as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("public",)

    with cluster.connect_maintenance() as conn:
        assert conn.execute("SHOW search_path").fetchone() == ("pg_catalog,pg_temp",)
        assert conn.execute("SELECT current_user").fetchone() == ("postgres",)
        conn.execute("VACUUM")
        conn.execute("CHECKPOINT")


def test_superuser_sql_allowed_by_the_agent_runs_as_the_superuser(make_cluster) -> None:
    cluster: Cluster = make_cluster()
    cluster.initdb()
    cluster.start()
    written = cluster.job_dir / "written-by-the-workload"

    access = cluster.create_workload_database(superuser_sql=True)
    with cluster.connect_workload() as conn:
        conn.execute(f"COPY (SELECT 'hello') TO PROGRAM 'cat > {written}'")

    assert access == WorkloadAccess(SUPERUSER, WORKLOAD_DATABASE, superuser=True)
    assert written.read_text() == "hello\n"
