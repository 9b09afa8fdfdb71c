"""initdb's output kept per binaries and copied into later clusters, with real initdb and
PostgreSQL 16: a copy starts, WAL apart included, and says where it came from."""

import dataclasses
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from agents.markers import ClusterMarker
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.cluster.template import TemplateStore, template_key
from agents.postgres.installs.inventory import Install
from agents.postgres.osuser import OsUser
from tests.agents.conftest import unique_job_id
from tests.agents.jobs import run, small_spec

Step = tuple[str, list[str], int | None, str | None]
REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def templates(tmp_path: Path) -> TemplateStore:
    return TemplateStore(tmp_path / "cache")


def cluster_with(
    templates: TemplateStore, install: Install, os_user: OsUser, root: Path, wal: bool = False
) -> tuple[Cluster, list[Step]]:
    job_id = unique_job_id()
    steps: list[Step] = []
    wal_parent = root / f"wal-{job_id}" if wal else None
    cluster = Cluster(install, os_user, root / job_id, wal_parent, job_id, templates=templates)
    cluster.on_step = lambda name, argv, seconds, exit_code, note=None: steps.append(
        (name, argv, exit_code, note)
    )
    return cluster, steps


def test_the_first_cluster_runs_initdb_and_the_next_copy_its_output_and_start(
    templates, pg16_install, os_user, cluster_root
):
    first, first_steps = cluster_with(templates, pg16_install, os_user, cluster_root)
    second, second_steps = cluster_with(templates, pg16_install, os_user, cluster_root, wal=True)
    try:
        first.initdb()
        second.initdb()
        second.start()
        with second.connect() as connection:
            assert connection.execute("SELECT count(*) FROM pg_database").fetchone()[0] == 3
        (name, argv, exit_code, note) = second_steps[0]
    finally:
        first.destroy()
        second.destroy()

    assert [step[0] for step in first_steps] == ["initdb"] and first_steps[0][3] is None
    assert name == "initdb" and exit_code == 0
    # The argv is this cluster's own (its directories), as the reproduce script runs it.
    assert argv[argv.index("-D") + 1] == str(second.data_dir)
    assert argv[argv.index("--waldir") + 1] == str(second.wal_dir)
    assert f"(job {first.job_id})" in note and "not run for this job" in note
    assert not second.job_dir.exists() and not second.wal_container.exists()


def test_wal_apart_is_a_link_to_a_copy_of_the_templates_wal(
    templates, pg16_install, os_user, cluster_root
):
    first, _ = cluster_with(templates, pg16_install, os_user, cluster_root, wal=True)
    second, _ = cluster_with(templates, pg16_install, os_user, cluster_root, wal=True)
    try:
        first.initdb()
        second.initdb()
        link = second.data_dir / "pg_wal"
        assert link.is_symlink() and link.resolve() == second.wal_dir
        segments = sorted(path.name for path in second.wal_dir.iterdir() if path.is_file())
        assert segments == sorted(p.name for p in first.wal_dir.iterdir() if p.is_file())
        owners = {path.stat().st_uid for path in [*second.wal_dir.rglob("*"), second.data_dir]}
        assert owners == {os_user.uid}
        assert stat.S_IMODE(second.data_dir.stat().st_mode) == 0o700
    finally:
        first.destroy()
        second.destroy()


def test_a_template_is_the_agents_own_and_other_binaries_get_their_own(
    templates, pg16_install, os_user, cluster_root, tmp_path
):
    cluster, steps = cluster_with(templates, pg16_install, os_user, cluster_root)
    try:
        cluster.initdb()
        argv = steps[0][1]
        (kept,) = [path for path in templates.root.iterdir() if not path.name.startswith(".")]
    finally:
        cluster.destroy()
    assert stat.S_IMODE(templates.root.stat().st_mode) == 0o700
    assert templates.root.stat().st_uid == os.getuid() != os_user.uid
    assert kept.name == template_key(pg16_install, argv)
    # Binaries rebuilt in place (a new postgres at the same path) get their own template.
    bindir = tmp_path / "install" / "bin"
    bindir.mkdir(parents=True)
    for program in ("postgres", "initdb"):
        shutil.copy2(pg16_install.program(program), bindir / program)
    copied = dataclasses.replace(pg16_install, bindir=bindir)
    before = template_key(copied, argv)
    later = bindir.joinpath("postgres").stat().st_mtime + 60
    os.utime(bindir / "postgres", (later, later))
    assert template_key(copied, argv) != before
    # The job's own paths are no part of it.
    elsewhere = [*argv[:2], "/elsewhere/data", *argv[3:], "--waldir", "/elsewhere/wal"]
    assert template_key(copied, elsewhere) == template_key(copied, argv)


def test_links_are_never_followed_and_output_holding_one_is_not_kept(
    templates, pg16_install, tmp_path
):
    argv = [str(pg16_install.program("initdb")), "-D", "data", "--no-sync"]
    data, wal = tmp_path / "data", tmp_path / "wal"
    (data / "base").mkdir(parents=True)
    (data / "PG_VERSION").write_text("16\n")
    wal.mkdir()
    (wal / "000000010000000000000001").write_bytes(b"\0" * 64)
    (data / "pg_wal").symlink_to(wal)
    (data / "base" / "planted").symlink_to("/etc/hostname")

    templates.keep(pg16_install, argv, data, wal, "planted")
    assert templates.find(pg16_install, argv) is None
    assert [path.name for path in templates.root.iterdir()] == []

    (data / "base" / "planted").unlink()
    templates.keep(pg16_install, argv, data, wal, "clean")
    kept = templates.find(pg16_install, argv)
    assert kept is not None and kept.made_for_job == "clean"
    assert (kept.data_dir / "pg_wal").is_dir() and not (kept.data_dir / "pg_wal").is_symlink()
    assert (kept.data_dir / "pg_wal" / "000000010000000000000001").stat().st_size == 64


# Keeps a template in another process that stops just before the rename, where a kill
# leaves the most behind: the whole copy in its work directory.
KEEP_IN_A_CHILD = """
import os, signal, sys
from pathlib import Path
from agents.postgres.cluster.template import TemplateStore
from agents.postgres.installs.inventory import Install
root, bindir, data = (Path(arg) for arg in sys.argv[1:4])
def held(source, target):
    print("holding", flush=True)
    signal.pause()
os.rename = held
install = Install("16.15", 16, "prebuilt", bindir, "", "")
TemplateStore(root).keep(install, [str(bindir / "initdb"), "-D", str(data)], data, None, "killed")
"""


def test_what_an_agent_killed_while_keeping_a_template_left_goes_with_the_next_keep(
    templates, pg16_install, os_user, cluster_root, tmp_path
):
    data = tmp_path / "data"
    (data / "pg_wal").mkdir(parents=True)
    (data / "PG_VERSION").write_text("16\n")
    argv = [str(templates.root.parent), str(pg16_install.bindir), str(data)]
    child = subprocess.Popen(
        [sys.executable, "-c", KEEP_IN_A_CHILD, *argv], cwd=REPO, stdout=subprocess.PIPE, text=True
    )
    try:
        assert child.stdout is not None and child.stdout.readline() == "holding\n"
    finally:
        child.kill()
        child.wait(timeout=10)
    left = list(templates.root.glob(".*"))
    (abandoned,) = left
    live = templates.root / ".live.work"
    live.mkdir()
    ClusterMarker.for_this_process("live").write(live)

    cluster, steps = cluster_with(templates, pg16_install, os_user, cluster_root)
    try:
        cluster.initdb()
    finally:
        cluster.destroy()

    assert not abandoned.exists(), "the killed process's work is removed"
    assert live.exists(), "a live process's work stays"
    assert templates.find(pg16_install, steps[0][1]) is not None


def test_a_jobs_second_run_copies_initdbs_output_and_starts_once_with_its_settings(config):
    """The first run kept initdb's output and the catalogue of 16.15: the second copies
    the one, validates its settings against the other and starts the server once."""
    spec = small_spec(settings={"shared_buffers": "64MB"}, sweep={"clients": [1], "duration_s": 1})
    results = [run({**spec, "run_id": f"template-{n}"}, config)[0] for n in (1, 2)]

    assert [result["status"] for result in results] == ["succeeded", "succeeded"]
    second = results[1]
    initdb = next(step for step in second["steps"] if step["name"] == "initdb")
    assert "not run for this job" in initdb["note"]
    assert "-D" in initdb["argv"] and initdb["exit_code"] == 0
    assert [step["name"] for step in second["steps"]][:3] == ["initdb", "start", "pgbench_init"]
    effective = {row["name"]: row["setting"] for row in second["settings"]["effective"]}
    assert effective["shared_buffers"] == "8192"
    assert second["points"][0]["tps"] > 0
