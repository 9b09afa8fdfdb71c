"""The script check: shell meta-commands refused wherever pgbench would read one."""

import subprocess
import tempfile
from pathlib import Path

import pytest

from agents.contract.errors import JobError
from agents.contract.workload_text.scripts import check_script, check_workload_scripts
from agents.postgres.cluster.lifecycle import Cluster
from agents.postgres.osuser import OsUser

ATTACKS = [
    "SELECT 1 \\shell {command}\n",
    "SELECT 1 \\setshell v echo 1 ; {command}\n",
    "/* c */ \\shell {command}\n",
]


def workload(scripts: list[dict], processes: list[dict] | None = None) -> dict:
    return {"scripts": scripts, "processes": processes or []}


def refusal(text: str, allow_shell: bool = False) -> JobError:
    with pytest.raises(JobError) as error:
        check_script(text, allow_shell, field="workload.scripts[0].text")
    return error.value


@pytest.mark.parametrize(
    "text",
    ["\\shell rm -rf /\n", "\\set a 1\n  \\SETSHELL x echo 1\nSELECT 1;", "\\Shell touch /tmp/x"],
)
def test_shell_meta_commands_are_refused_naming_the_script(text):
    scripts = [{"builtin": "tpcb-like", "weight": 1}, {"name": "x", "text": text, "weight": 1}]
    with pytest.raises(JobError) as error:
        check_workload_scripts(workload(scripts), allow_shell=False)
    assert error.value.code == "refused_script"
    assert error.value.field == "workload.scripts[1].text"
    assert "allow shell scripts" in error.value.message


def test_a_process_script_with_shell_is_refused_naming_the_process():
    inserts = {"scripts": [{"name": "ok", "text": "SELECT 1;\n", "weight": 1}]}
    shell = {"scripts": [{"name": "x", "text": "\\shell true\n", "weight": 1}]}
    with pytest.raises(JobError) as error:
        check_workload_scripts(workload([], [inserts, shell]), allow_shell=False)
    assert error.value.field == "workload.processes[1].scripts[0].text"


@pytest.mark.parametrize(
    ("text", "command"),
    [
        ("SELECT 1 \\shell id > f\n", "\\shell"),
        ("SELECT 1 \\setshell v cmd\n", "\\setshell"),
        ("/* c */ \\shell ls\n", "\\shell"),
        ("SELECT 1;\nSELECT 2 -- \\shell\n  , 3 \\ShElL x\n", "\\ShElL"),
    ],
)
def test_a_shell_command_after_sql_on_its_line_is_refused(text, command):
    error = refusal(text)

    assert error.code == "refused_script"
    assert error.field == "workload.scripts[0].text"
    assert error.message.startswith(f"line {text.count(chr(10))}: pgbench 9.6 and later reads")
    assert f"reads {command} here as a meta-command, which runs shell commands" in error.message
    assert "remove it, or allow shell scripts on that agent" in error.message
    assert "BENCHLAB_AGENT_ALLOW_SHELL_SCRIPTS=1" in error.message
    assert "--allow-shell-scripts (config key allow_shell_scripts)" in error.message


def test_a_line_pgbench_9_5_reads_as_shell_is_refused_saying_so():
    error = refusal("SELECT 'a\n\\shell x';\n")

    assert error.message.startswith("line 2: pgbench 9.2 to 9.5 reads \\shell here")


def test_a_shell_command_every_pgbench_reads_is_named_plainly():
    assert refusal("SELECT 1;\n\\shell x\n").message.startswith("line 2: pgbench reads \\shell")


@pytest.mark.parametrize(
    "text",
    [
        "SELECT '\\shell x', E'\\' \\shell x', $$ \\shell x $$;\n",
        "SELECT 1; -- \\shell x\n/* \\shell /* x */ \\setshell */\n",
        'SELECT "\\shell" FROM t;\n',
        "\\set aid random(1, 100000 * :scale)\nSELECT abalance FROM a WHERE aid = :aid;\n",
        "\\set aid random(1, \\\n  100000 * :scale)\n\\sleep 10 ms\n",
        "SELECT 1 AS one \\gset\nSELECT 2 AS two \\gset p_\nSELECT 4 \\; SELECT 5 \\aset\n",
        "\\startpipeline\nSELECT 1;\n\\syncpipeline\nSELECT 2;\n\\endpipeline\n",
        "\\if :client_id = 0\nSELECT 1;\n\\elif :client_id = 1\nSELECT 2;\n\\else\n\\endif\n",
        "\\setrandom aid 1 :naccounts\n",
    ],
)
def test_allowed_meta_commands_and_backslashes_in_strings_and_comments_pass(text):
    check_script(text, allow_shell=False)


def test_shell_is_accepted_when_the_agent_allows_it():
    scripts = [{"name": "x", "text": "SELECT 1 \\shell true\n\\setshell v echo 1\n", "weight": 1}]
    check_workload_scripts(workload(scripts), allow_shell=True)


@pytest.mark.parametrize("allow_shell", [False, True])
def test_a_meta_command_pgbench_does_not_know_is_refused(allow_shell):
    error = refusal("SELECT 1;\nSELECT 'a' \\sett x 1\n", allow_shell)

    assert error.code == "refused_script"
    assert error.message.startswith("line 2: pgbench 9.6 and later reads \\sett here")
    assert "pgbench does not know it" in error.message
    assert "\\set, " in error.message


def test_an_unknown_command_only_pgbench_9_5_would_read_is_left_to_it():
    check_script("SELECT 'first line\n\\x marks the spot';\n", allow_shell=False)


def test_the_first_refused_command_is_reported():
    error = refusal("SELECT 1;\n\\zork\n\\shell x\n")

    assert error.message.startswith("line 2: ")


@pytest.fixture
def shared_dir(cluster_root: Path) -> Path:
    """A directory the cluster's OS user can write to (scripts and marker files)."""
    directory = Path(tempfile.mkdtemp(dir=cluster_root))
    directory.chmod(0o777)
    return directory


@pytest.mark.parametrize("attack", ATTACKS)
def test_each_refused_attack_runs_its_command_in_real_pgbench(
    attack: str, pg_cluster: Cluster, os_user: OsUser, shared_dir: Path
) -> None:
    marker = shared_dir / "ran"
    text = attack.format(command=f"touch {marker}")
    script = shared_dir / "attack.sql"
    script.write_text(text)
    script.chmod(0o644)
    pgbench = str(pg_cluster.install.program("pgbench"))

    subprocess.run(
        [pgbench, "-n", "-t", "1", "-f", str(script)],
        capture_output=True, timeout=60, **os_user.subprocess_kwargs(**pg_cluster.client_env()),
    )  # fmt: skip

    assert marker.exists(), f"pgbench did not run the command in {text!r}"
    assert refusal(text).code == "refused_script"
