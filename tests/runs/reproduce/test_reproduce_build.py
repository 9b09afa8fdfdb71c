"""A reproduce script builds a source build again from its definition (runs/reproduce/build.py).

The source here is a small release-shaped tarball whose `configure` and Makefile
install a `postgres` that prints its version and the patched constant: real tar,
patch, configure and make, seconds instead of the minutes a PostgreSQL build takes.
"""

import subprocess
import tarfile
from pathlib import Path

from agents.contract.builds.definition import BuildDefinition
from runs.reproduce.build import source_build_function
from runs.reproduce.script import TPS_OF, reproduce_script

CONFIGURE = """#!/bin/sh
for arg in "$@"; do
  case $arg in --prefix=*) prefix=${arg#--prefix=} ;; esac
done
echo "$@" > configured-with
echo "$CFLAGS" > cflags
printf 'all:\\n\\t@true\\ninstall:\\n\\tsh ./install.sh %s\\n' "$prefix" > Makefile
"""
INSTALL = """mkdir -p "$1/bin"
printf '#!/bin/sh\\necho "postgres (PostgreSQL) 15.18 %s %s"\\n' \\
  "$(cat lwlock.h)" "$(cat cflags)" > "$1/bin/postgres"
chmod +x "$1/bin/postgres"
"""
PATCH = """--- a/lwlock.h
+++ b/lwlock.h
@@ -1 +1 @@
-NUM_BUFFER_PARTITIONS=128
+NUM_BUFFER_PARTITIONS=256
"""


def release_tarball(root: Path) -> Path:
    tree = root / "postgresql-15.18"
    tree.mkdir()
    (tree / "configure").write_text(CONFIGURE)
    (tree / "configure").chmod(0o755)
    (tree / "install.sh").write_text(INSTALL)
    (tree / "lwlock.h").write_text("NUM_BUFFER_PARTITIONS=128\n")
    tarball = root / "postgresql-15.18.tar.bz2"
    with tarfile.open(tarball, "w:bz2") as archive:
        archive.add(tree, arcname=tree.name)
    return tarball


def definition(tarball: Path) -> BuildDefinition:
    return {
        "source": {"kind": "path", "location": str(tarball)},
        "configure_flags": ["--with-blocksize=16", "--without-icu"],
        "patches": [{"name": "partitions-256", "diff": PATCH, "strip": 1}],
        "cflags": "-O2",
    }


def test_a_source_build_is_made_again_with_its_patches_flags_and_cflags(tmp_path):
    build = definition(release_tarball(tmp_path))
    work = tmp_path / "work"
    script = f"set -euo pipefail\nworkdir={work}\n{source_build_function(build)}build_from_source\n"

    made = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=60)

    assert made.returncode == 0, made.stderr
    bindir = made.stdout.strip()
    assert bindir == f"{work}/pgbuild/bin"
    version = subprocess.run([f"{bindir}/postgres"], capture_output=True, text=True).stdout
    assert version.strip() == "postgres (PostgreSQL) 15.18 NUM_BUFFER_PARTITIONS=256 -O2"
    configured = (work / "source" / "tree" / "configured-with").read_text().split()
    assert configured == [f"--prefix={work}/pgbuild", "--with-blocksize=16", "--without-icu"]
    assert "applying patch partitions-256" in made.stderr


def test_a_broken_patch_stops_the_script_before_it_configures(tmp_path):
    build = definition(release_tarball(tmp_path))
    build["patches"][0]["diff"] = PATCH.replace("=128", "=64")
    script = f"set -euo pipefail\nworkdir={tmp_path}/work\n{source_build_function(build)}"

    made = subprocess.run(
        ["bash", "-c", script + "build_from_source"], capture_output=True, text=True, timeout=60
    )

    assert made.returncode != 0
    assert "configuring" not in made.stderr
    assert not (tmp_path / "work" / "pgbuild").exists()


def test_the_script_of_a_source_build_run_builds_instead_of_fetching_a_release(tmp_path):
    build = definition(release_tarball(tmp_path))
    manifest = {
        "version": 1,
        "kind": "benchlab-run-manifest",
        "run_id": "7",
        "agent_version": "0.1.0",
        "spec": {"postgres": {"version": "15.18", "source": "build", "build": build}},
        "build": {"requested": {}, "install": {"version": "15.18"}, "digest": "0" * 64},
        "commands": [],
        "settings": {"requested": {}, "effective": []},
        "storage": {},
        "facts": {},
        "points": [],
    }

    script = reproduce_script(manifest)  # type: ignore[arg-type]

    assert "else bindir=$(build_from_source)" in script
    assert "fetch_prebuilt" not in script
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_a_point_of_two_processes_replays_them_together_and_sums_their_tps():
    argv = ["/x/pgbench", "-c", "1", "-T", "2", "-h", "/sock", "-p", "5432", "benchlab"]
    processes = [
        {"scripts": [{"name": "a", "text": "INSERT INTO a VALUES (1);", "weight": 1}]},
        {"scripts": [{"name": "b", "text": "INSERT INTO b VALUES (1);", "weight": 1}]},
    ]
    manifest = {
        "run_id": "8",
        "agent_version": "0.1.0",
        "spec": {"workload": {"scripts": [], "processes": processes}},
        "build": {"requested": {}, "install": {"version": "16.15"}, "digest": "0" * 64},
        "commands": [
            {"name": "pgbench", "argv": [*argv, "-f", "/w/process-1-0-a.sql@1"]},
            {"name": "pgbench", "argv": [*argv, "-f", "/w/process-2-0-b.sql@1"]},
        ],
        "settings": {"requested": {}, "effective": []},
        "points": [{"index": 0, "clients": 2, "repeat": 1, "tps": 300.0}],
    }

    script = reproduce_script(manifest)  # type: ignore[arg-type]

    assert script.count("2>&1 || echo") == 2 and script.count("; } &\n") == 2
    assert "\nwait\n" in script
    assert "process-1-0-a.sql" in script and "process-2-0-b.sql" in script
    outs = '"$(tps_of "$workdir/out/point-0.txt")" "$(tps_of "$workdir/out/point-1.txt")"'
    assert f'"$(sum_tps {outs})"' in script
    checked = subprocess.run(["bash", "-n"], input=script, capture_output=True, text=True)
    assert checked.returncode == 0, checked.stderr


def test_summed_tps_of_processes_is_unknown_when_one_is_unknown():
    sums = TPS_OF + '\nsum_tps 100.25 201.25; printf "|"; sum_tps 1.00 -'

    shown = subprocess.run(["bash", "-c", sums], capture_output=True, text=True)

    assert shown.stdout == "301.50|-"


def test_an_uploaded_source_asks_for_the_tarball_then_builds_from_it(tmp_path):
    tarball = release_tarball(tmp_path)
    build = definition(tarball)
    build["source"] = {"kind": "upload", "location": "ab" * 32}
    script = f"set -euo pipefail\nworkdir={tmp_path}/work\n{source_build_function(build)}"

    missing = subprocess.run(
        ["bash", "-c", script + "build_from_source"], capture_output=True, text=True, timeout=60
    )
    given = subprocess.run(
        ["bash", "-c", f"SOURCE_TARBALL={tarball}\n{script}build_from_source"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip

    assert missing.returncode != 0
    assert f"uploaded to the lab (sha256 {'ab' * 32}): set SOURCE_TARBALL" in missing.stderr
    assert given.returncode == 0, given.stderr
    assert given.stdout.strip() == f"{tmp_path}/work/pgbuild/bin"
