"""A `\\shell` that slips past the script check finds nothing worth having.

The agent's local config allows shell scripts here (the filter switched off),
so a real pgbench runs the probe's commands through system() as the job's OS
user, in the job's sandbox. Each command prints what it could do to pgbench's
stdout, which the point keeps. Every target is set up to be reachable by file
permissions alone (world-readable, or owned by the job's OS user), so what
stops the probe is the sandbox, not the modes.
"""

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

import pytest

from agents.config import AgentConfig
from agents.postgres.osuser import OsUser
from agents.worker.identity import load_or_create_identity
from tests.agents.jobs import run, small_spec


@pytest.fixture
def targets(storage_root: Path, os_user: OsUser) -> dict[str, Path]:
    """Files the probe goes for, each open to the job's OS user by its mode."""
    lab = storage_root / "lab-var"
    lab.mkdir(mode=0o755)
    lab_database = lab / "db.sqlite3"
    lab_database.write_text("api tokens\n")
    lab_database.chmod(0o644)

    other_job = storage_root / "data" / "benchlab-other-job" / "data"
    other_job.mkdir(parents=True)
    other_file = other_job / "PG_VERSION"
    other_file.write_text("16\n")
    for path in (other_job.parent, other_job, other_file):
        os.chown(path, os_user.uid, os_user.gid)

    writable_elsewhere = storage_root / "owned-by-job-user"
    writable_elsewhere.mkdir()
    os.chown(writable_elsewhere, os_user.uid, os_user.gid)
    return {
        "lab_database": lab_database,
        "other_cluster": other_file,
        "writable_elsewhere": writable_elsewhere,
    }


def _redis_port() -> int:
    return urlparse(os.environ["REDIS_URL"]).port or 6379


def _lab_database_port() -> int:
    """The lab database's port: the suite's throw-away PostgreSQL (scripts/test), else 5432."""
    return urlparse(os.environ.get("DATABASE_URL", "")).port or 5432


def _connects(port: int) -> str:
    return f"python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", {port}), 2)'"


def _probe_script(config: AgentConfig, targets: dict[str, Path], install_bindir: str) -> str:
    identity = load_or_create_identity(config.state_dir, "escape-probe")
    probes = {
        "ran": "true",
        "identity": f"cat {identity.path}",
        "state": f"ls {config.state_dir / 'identity'}",
        "lab_database": f"cat {targets['lab_database']}",
        "other_cluster": f"cat {targets['other_cluster']}",
        "write_elsewhere": f"touch {targets['writable_elsewhere']}/planted",
        "write_binaries": f"touch {install_bindir}/planted",
        "redis": _connects(_redis_port()),
        "lab_database_port": _connects(_lab_database_port()),
    }
    lines = [
        f"\\shell {command} >/dev/null 2>&1 && echo probe-{name}=yes || echo probe-{name}=no"
        for name, command in probes.items()
    ]
    return "\n".join([*lines, "SELECT 1;", ""])


def probe_answers(config: AgentConfig, targets: dict[str, Path], bindir: Path) -> dict[str, str]:
    """Run the probe as a job's custom script, the agent allowing shell scripts; what each
    command could do ("yes" or "no"), read from the point's pgbench stdout."""
    config.allow_shell_scripts = True
    script = _probe_script(config, targets, str(bindir))
    spec = small_spec(
        workload={"scripts": [{"name": "escape", "text": script, "weight": 1}]},
        sweep={"clients": [1], "duration_s": None, "transactions": 1},
    )

    result, _ = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    output = result["points"][0]["stdout"]
    return dict(line.split("=", 1) for line in output.split() if line.startswith("probe-"))


def test_a_shell_command_in_a_running_job_reaches_nothing_outside_its_sandbox(
    config: AgentConfig, targets: dict[str, Path], pg16_install
) -> None:
    for port in (_redis_port(), _lab_database_port()):
        with socket.create_connection(("127.0.0.1", port), 2):
            pass  # the lab's Redis and database answer outside the sandbox

    answers = probe_answers(config, targets, pg16_install.bindir)

    assert answers == {
        "probe-ran": "yes",
        "probe-identity": "no",
        "probe-state": "no",
        "probe-lab_database": "no",
        "probe-other_cluster": "no",
        "probe-write_elsewhere": "no",
        "probe-write_binaries": "no",
        "probe-redis": "no",
        "probe-lab_database_port": "no",
    }
    assert not (targets["writable_elsewhere"] / "planted").exists()
    assert not (pg16_install.bindir / "planted").exists()


def test_without_the_sandbox_the_same_probe_reaches_what_the_modes_allow(
    config: AgentConfig, targets: dict[str, Path], pg16_install
) -> None:
    """The control: the operator's --no-sandbox leaves only file modes, and they let it in."""
    config.sandbox = False

    answers = probe_answers(config, targets, pg16_install.bindir)

    reached = {"probe-lab_database", "probe-other_cluster", "probe-write_elsewhere", "probe-redis"}
    assert {name: answers[name] for name in reached} == dict.fromkeys(reached, "yes")
