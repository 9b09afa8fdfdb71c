"""A throw-away PostgreSQL for the lab database of the test suite.

`python scripts/labdb.py start DIR` starts one with the agent's own cluster code
(prebuilt PostgreSQL 16, run as the agent's unprivileged OS user) and prints
`export DATABASE_URL=...` for the shell; `stop DIR` stops it and removes DIR.
Used by scripts/test when DATABASE_URL is not set, so the suite needs no
PostgreSQL server on the machine. The server runs in the agent's sandbox, in a
process id namespace of its own, so its postmaster.pid holds the pid it has
there: `stop` finds the postmaster by its command line (`postgres -D <data>`)
and signals it as `pg_ctl stop -m immediate` would.

`start DIR --no-sync` (the test suite's) starts one that never syncs to disk (NO_SYNC):
a throw-away database has nothing to keep through a crash of the machine, and what its
clients see of each statement and commit is the same. The suite's transactional tests
pay for the syncs otherwise: the flush after each took 2 to 3 s instead of 0.4 s on a
busy 2-core machine. scripts/bench does not ask for it: it times what the lab stores.
"""

import contextlib
import json
import secrets
import shutil
import signal
import sys
from pathlib import Path

import psutil
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from agents.config import AgentConfig  # noqa: E402
from agents.postgres.cluster.lifecycle import Cluster  # noqa: E402
from agents.postgres.installs.ensure import ensure_install  # noqa: E402
from agents.postgres.osuser import ensure_os_user, make_dirs  # noqa: E402

STATE_FILE = "labdb.json"
JOB_ID = "labdb"
STOP_TIMEOUT_S = 30
# PostgreSQL's "non-durable settings": no fsync, a commit answered before its WAL is
# written, no full pages in WAL.
NO_SYNC = "fsync = off\nsynchronous_commit = off\nfull_page_writes = off\n"


def log(message: str) -> None:
    sys.stderr.write(f"labdb: {message}\n")


def start(directory: Path, no_sync: bool = False) -> str:
    config = AgentConfig()
    install = ensure_install("16", "prebuilt", config.cache_dir, lambda message, _: log(message))
    os_user = ensure_os_user(config.os_user)
    make_dirs(directory)
    cluster = Cluster(install, os_user, data_parent=directory, job_id=JOB_ID)
    # The suite reaches it over TCP: its sandbox keeps the host's network.
    cluster.serves_network = True
    log(f"starting PostgreSQL {install.version} in {cluster.data_dir}")
    cluster.initdb()
    if no_sync:
        cluster.write_settings_file(NO_SYNC)
    cluster.start()
    # The cluster asks a password on TCP (SCRAM); the suite's password lives as long as it.
    password = secrets.token_hex(16)
    with cluster.connect() as conn:
        conn.execute("CREATE DATABASE benchlab")
        conn.execute(sql.SQL("ALTER ROLE postgres PASSWORD {}").format(sql.Literal(password)))
    state = {
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
        stop_postmaster(state["data_dir"])
    if directory.exists():
        shutil.rmtree(directory)


def stop_postmaster(data_dir: str) -> None:
    """SIGQUIT (an immediate shutdown) to the postmaster serving `data_dir`; SIGKILL if it
    has not exited within STOP_TIMEOUT_S."""
    postmaster = _postmaster(data_dir)
    if postmaster is None:
        return
    for signum in (signal.SIGQUIT, signal.SIGKILL):
        with contextlib.suppress(psutil.NoSuchProcess):
            postmaster.send_signal(signum)
        _gone, alive = psutil.wait_procs([postmaster], timeout=STOP_TIMEOUT_S)
        if not alive:
            return


def _postmaster(data_dir: str) -> psutil.Process | None:
    for process in psutil.process_iter(["cmdline"]):
        cmdline = process.info["cmdline"] or []
        if cmdline[1:3] == ["-D", data_dir] and cmdline[0].endswith("/postgres"):
            return process
    return None


def main() -> int:
    args = sys.argv[1:]
    no_sync = args[2:] == ["--no-sync"] and args[0] == "start"
    if len(args) != 2 + no_sync or args[0] not in ("start", "stop"):
        sys.stderr.write("usage: labdb.py start DIR [--no-sync] | stop DIR\n")
        return 2
    action, directory = args[0], Path(args[1]).resolve()
    if action == "stop":
        stop(directory)
        return 0
    if directory.exists():
        stop(directory)
    sys.stdout.write(f"export DATABASE_URL={start(directory, no_sync)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
