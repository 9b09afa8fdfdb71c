"""How clients reach a cluster: the agent's own connections and the workload's.

The agent's own connections run as the superuser `postgres` (settings, sampling,
CHECKPOINT, VACUUM between points); the workload's as `benchlab_workload`, a role
that owns the benchmark database `benchlab` and nothing else: not a superuser, no
CREATEDB/CREATEROLE/REPLICATION/BYPASSRLS, none of the pg_execute_server_program /
pg_read_server_files / pg_write_server_files roles, so no untrusted language, no COPY
PROGRAM, no server files. The socket directory is private (0700, the OS user's), so
trust authentication is limited to processes of that OS user and root; TCP on
127.0.0.1 asks for a password, and no role has one.

`ClusterClients` is the part of `Cluster` (lifecycle.py) that needs only where the
server listens: its private socket directory and, once started, its port.
"""

from dataclasses import dataclass
from pathlib import Path

import psycopg
from psycopg.conninfo import make_conninfo

SUPERUSER = "postgres"
WORKLOAD_ROLE = "benchlab_workload"
WORKLOAD_DATABASE = "benchlab"
# The agent's own sessions in the workload's database resolve names in the
# catalogue only, whatever the database owner sets there (ALTER DATABASE ... SET).
MAINTENANCE_OPTIONS = "-c search_path=pg_catalog,pg_temp"


@dataclass(frozen=True)
class WorkloadAccess:
    """Who runs the workload's SQL (pgbench -i, setup SQL, pgbench), and where."""

    user: str
    dbname: str
    superuser: bool

    def as_dict(self) -> dict[str, str | bool]:
        """How the result document's `dataset.workload` says who ran the workload."""
        return {"user": self.user, "dbname": self.dbname, "superuser": self.superuser}


class ClusterClients:
    """Connection strings, client environments and connections for a cluster's clients.

    Set by the cluster: `socket_dir`, `port` once started, `workload` once its
    database exists (or, for a server elsewhere, once the server said how to reach it).
    """

    socket_dir: Path
    port: int | None
    workload: WorkloadAccess | None

    def started_port(self) -> int:
        """The port of a started cluster (the server listens there and on its socket)."""
        if self.port is None:
            raise RuntimeError("the cluster has not been started")
        return self.port

    def pgbench_host(self) -> str:
        """What pgbench's -h names: the private socket directory."""
        return str(self.socket_dir)

    def conninfo(self, dbname: str = "postgres") -> str:
        """libpq connection string for the superuser over the private Unix socket."""
        return make_conninfo(
            host=str(self.socket_dir), port=self.started_port(), user=SUPERUSER, dbname=dbname
        )

    def client_env(self, dbname: str = "postgres") -> dict[str, str]:
        """PG* variables that point libpq clients (pgbench, psql) at this cluster."""
        if self.port is None:
            raise RuntimeError("the cluster has not been started")
        return {
            "PGHOST": str(self.socket_dir),
            "PGPORT": str(self.port),
            "PGUSER": SUPERUSER,
            "PGDATABASE": dbname,
        }

    def connect(self, dbname: str = "postgres") -> psycopg.Connection:
        """An autocommit connection as the superuser."""
        return psycopg.connect(self.conninfo(dbname), autocommit=True)

    # The workload's role and database

    def create_workload_database(self, superuser_sql: bool = False) -> WorkloadAccess:
        """Create the benchmark database and the role that owns it; return how to reach it.

        With `superuser_sql` (only an agent's local config allows it) the
        workload runs as the superuser in a database the superuser owns.
        """
        owner = SUPERUSER if superuser_sql else WORKLOAD_ROLE
        with self.connect() as conn:
            if not superuser_sql:
                conn.execute(
                    f"CREATE ROLE {WORKLOAD_ROLE} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE"
                    " NOREPLICATION NOBYPASSRLS"
                )
            conn.execute(f"CREATE DATABASE {WORKLOAD_DATABASE} OWNER {owner}")
            # The workload reaches only its own database.
            conn.execute("REVOKE CONNECT, TEMPORARY ON DATABASE postgres, template1 FROM PUBLIC")
        with self.connect(WORKLOAD_DATABASE) as conn:
            # 14 gives `public` to the bootstrap superuser, 15+ to the database owner:
            # the same for every version, the owner's.
            conn.execute(f"ALTER SCHEMA public OWNER TO {owner}")
        self.workload = WorkloadAccess(owner, WORKLOAD_DATABASE, superuser_sql)
        return self.workload

    def require_workload(self) -> WorkloadAccess:
        """How the workload is reached; RuntimeError before create_workload_database()."""
        if self.workload is None:
            raise RuntimeError("the workload database has not been created")
        return self.workload

    def workload_conninfo(self) -> str:
        """libpq connection string for the workload's role and database."""
        workload = self.require_workload()
        conninfo = self.conninfo(workload.dbname)
        return make_conninfo(conninfo, user=workload.user)

    def workload_env(self) -> dict[str, str]:
        """PG* variables that point pgbench at the workload's database as its role."""
        workload = self.require_workload()
        return {**self.client_env(workload.dbname), "PGUSER": workload.user}

    def connect_workload(self) -> psycopg.Connection:
        """An autocommit connection as the workload's role, in its database."""
        return psycopg.connect(self.workload_conninfo(), autocommit=True)

    def connect_maintenance(self) -> psycopg.Connection:
        """The agent's own superuser connection to the workload's database (VACUUM, CHECKPOINT)."""
        workload = self.require_workload()
        conninfo = make_conninfo(self.conninfo(workload.dbname), options=MAINTENANCE_OPTIONS)
        return psycopg.connect(conninfo, autocommit=True)
