"""Opening a throw-away cluster to one client host (a run with a client host).

The server half listens on the address its agent's local config advertises
(`advertise_address`, besides 127.0.0.1), and pg_hba.conf lets in exactly one
thing over TCP: the workload's role, in the workload's database, from the
client host's address, with scram-sha-256 and a password drawn for this job.
The agent's own connections stay on the private Unix socket (trust).
"""

import ipaddress
import secrets

from psycopg import sql

from agents.contract.errors import JobError
from agents.postgres.cluster.lifecycle import Cluster

LOOPBACK = "127.0.0.1"


def listen_on(cluster: Cluster, address: str) -> None:
    """Before the first start: listen on `address` too (appended last, so it wins)."""
    addresses = LOOPBACK if address == LOOPBACK else f"{LOOPBACK},{_checked(address)}"
    # The client host connects over TCP: the server's sandbox keeps the host's network.
    cluster.serves_network = True
    with open(cluster.data_dir / "postgresql.conf", "a") as conf:
        conf.write(
            f"\n# Added by BenchLab: a client host reaches this cluster here.\n"
            f"listen_addresses = '{addresses}'\n"
        )


def admit_client(cluster: Cluster, client_address: str) -> str:
    """Allow only the workload's role from `client_address` over TCP; return its new password."""
    access = cluster.require_workload()
    host = ipaddress.ip_address(_checked(client_address))
    mask = 32 if host.version == 4 else 128
    lines = [
        "# Written by BenchLab for a run with a client host.",
        "local all all trust",
        f"host {access.dbname} {access.user} {host}/{mask} scram-sha-256",
        "",
    ]
    (cluster.data_dir / "pg_hba.conf").write_text("\n".join(lines))
    password = secrets.token_urlsafe(24)
    with cluster.connect() as conn:
        conn.execute("SET password_encryption = 'scram-sha-256'")
        conn.execute(
            sql.SQL("ALTER ROLE {} PASSWORD {}").format(
                sql.Identifier(access.user), sql.Literal(password)
            )
        )
        conn.execute("SELECT pg_reload_conf()")
    return password


def _checked(address: str) -> str:
    try:
        return str(ipaddress.ip_address(address))
    except ValueError as error:
        raise JobError(
            "invalid_spec",
            f"{address!r} is not an IP address: give the agent's --advertise-address as one",
            field="network.peer",
        ) from error
