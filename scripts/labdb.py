"""A throw-away PostgreSQL for the lab database of the test suite.

`python scripts/labdb.py start DIR` starts one with the agent's own cluster code
(prebuilt PostgreSQL 16, run as the agent's unprivileged OS user) and prints
`export DATABASE_URL=...` for the shell; `stop DIR` stops it and removes DIR.
Used by scripts/test when DATABASE_URL is not set, so the suite needs no
PostgreSQL server on the machine.
"""

import json
import secrets
import shutil
import subprocess
import sys
from pathlib import Path

from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.config import AgentConfig  # noqa: E402
from agents.postgres.cluster.lifecycle import Cluster  # noqa: E402
from agents.postgres.installs.ensure import ensure_install  # noqa: E402
from agents.postgres.osuser import ensure_os_user, make_dirs  # noqa: E402

STATE_FILE = "labdb.json"
JOB_ID = "labdb"


def log(message: str) -> None:
    sys.stderr.write(f"labdb: {message}\n")


def start(directory: Path) -> str:
    config = AgentConfig()
    install = ensure_install("16", "prebuilt", config.cache_dir, lambda message, _: log(message))
    os_user = ensure_os_user(config.os_user)
    make_dirs(directory)
    cluster = Cluster(install, os_user, data_parent=directory, job_id=JOB_ID)
    # The suite reaches it over TCP: its sandbox keeps the host's network.
    cluster.serves_network = True
    log(f"starting PostgreSQL {install.version} in {cluster.data_dir}")
    cluster.initdb()
    cluster.start()
    # The cluster asks a password on TCP (SCRAM); the suite's password lives as long as it.
    password = secrets.token_hex(16)
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE benchlab")
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
    state = {
        "pg_ctl": str(install.program("pg_ctl")),
        "data_dir": str(cluster.data_dir),
        "port": cluster.port,
        "user": os_user.name,
    }
    (directory / STATE_FILE).write_text(json.dumps(state))
    return f"postgres://postgres:{password}@127.0.0.1:{cluster.port}/benchlab"


def stop(directory: Path) -> None:
    state_file = directory / STATE_FILE
    if state_file.exists():
        state = json.loads(state_file.read_text())
        argv = [state["pg_ctl"], "stop", "-D", state["data_dir"], "-m", "immediate", "-w"]
        os_user = ensure_os_user(state["user"])
        subprocess.run(argv, capture_output=True, check=False, **os_user.subprocess_kwargs())
    if directory.exists():
        shutil.rmtree(directory)


def main() -> int:
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.stderr.write("usage: labdb.py start|stop DIR\n")
        return 2
    action, directory = sys.argv[1], Path(sys.argv[2]).resolve()
    if action == "stop":
        stop(directory)
        return 0
    if directory.exists():
        stop(directory)
    sys.stdout.write(f"export DATABASE_URL={start(directory)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
