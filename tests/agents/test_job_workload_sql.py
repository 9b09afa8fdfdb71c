"""Workload SQL runs without superuser rights: real PostgreSQL 16, real pgbench, whole jobs.

What plainly needs superuser (COPY ... PROGRAM, COPY to or from a server
file, also inside a DO block or built by EXECUTE) is refused before
provisioning; what hides from the text check (a privileged function called by
name) is refused by the server because the workload's role lacks the right,
and the error names the statement and says why. Either way nothing appears on
the host. An agent whose local config allows superuser SQL
runs the same statement.
"""

import json
from pathlib import Path

import pytest

from agents.__main__ import build_parser, load_config
from agents.postgres.osuser import OsUser, chown_tree
from tests.agents.jobs import run, small_spec

WORKLOAD = {"user": "benchlab_workload", "dbname": "benchlab", "superuser": False}


@pytest.fixture
def target(storage_root: Path, os_user: OsUser) -> Path:
    """A path PostgreSQL's OS user could write, were the workload allowed to."""
    writable = storage_root / "writable"
    writable.mkdir()
    chown_tree(writable, os_user)
    return writable / "written-by-workload-sql"


def one_point(**overrides) -> dict:
    return small_spec(**{"sweep": {"clients": [1], "duration_s": 1}, **overrides})


def custom(text: str) -> dict:
    return {"scripts": [{"name": "sneaky", "text": text, "weight": 1}], "no_vacuum": True}


def test_builtin_workload_runs_as_the_non_superuser_owner(config) -> None:
    spec = one_point(
        sweep={"clients": [1, 2], "duration_s": 1, "between_points": "vacuum_checkpoint"}
    )

    result, _ = run(spec, config)

    assert result["status"] == "succeeded", result["error"]
    assert result["dataset"]["workload"] == WORKLOAD
    init = next(step for step in result["steps"] if step["name"] == "pgbench_init")
    for argv in [init["argv"], *(point["argv"] for point in result["points"])]:
        assert argv[argv.index("-U") + 1] == "benchlab_workload"
        assert argv[-1] == "benchlab"
    assert all(point["tps"] > 0 for point in result["points"])


@pytest.mark.parametrize(
    ("setup_sql", "says"),
    [
        ("CREATE TABLE t (x int);\nCOPY t FROM PROGRAM 'touch {target}';", "runs a program"),
        ("COPY (SELECT 1) TO '{target}';", "writes a file on the benchmark host"),
        ("CREATE TABLE t (x text);\nCOPY t FROM '/etc/hostname';", "reads a file"),
    ],
)
def test_server_side_copy_in_setup_sql_is_refused_before_provisioning(
    config, target, setup_sql, says
) -> None:
    spec = one_point(dataset={"setup_sql": setup_sql.format(target=target)})

    result, _ = run(spec, config)

    assert result["error"]["code"] == "refused_sql"
    assert result["error"]["field"] == "dataset.setup_sql"
    assert says in result["error"]["message"]
    assert result["install"] is None and result["steps"] == []
    assert not target.exists()


def test_copy_program_in_a_script_is_refused_before_provisioning(config, target) -> None:
    script = f"\\set x 1\nCOPY (SELECT :x) TO PROGRAM 'cat > {target}';\n"

    result, _ = run(one_point(workload=custom(script)), config)

    assert result["error"]["code"] == "refused_sql"
    assert result["error"]["field"] == "workload.scripts[0].text"
    assert "statement 2 (line 2) `COPY (SELECT :x) TO PROGRAM" in result["error"]["message"]
    assert result["install"] is None
    assert not target.exists()


HIDDEN = {
    "program": "DO $$ BEGIN EXECUTE 'COPY t TO PROGRAM ''cat > {target}'''; END $$",
    "file write": "DO $$ BEGIN EXECUTE format('COPY t TO %L', '{target}'); END $$",
    "file read": "DO $$ BEGIN EXECUTE 'COPY t FROM ''/etc/hostname'''; END $$",
}


@pytest.mark.parametrize("hidden", HIDDEN.values(), ids=HIDDEN.keys())
def test_copy_hidden_in_a_do_block_is_refused_before_provisioning(config, target, hidden) -> None:
    setup_sql = "CREATE TABLE t (x text);\n" + hidden.format(target=target) + ";\n"

    result, _ = run(one_point(dataset={"setup_sql": setup_sql}), config)

    assert result["error"]["code"] == "refused_sql"
    assert result["error"]["field"] == "dataset.setup_sql"
    message = result["error"]["message"]
    assert message.startswith("statement 2 (line 2) `DO $$ BEGIN EXECUTE")
    assert "builds through EXECUTE a COPY that" in message
    assert result["install"] is None and result["steps"] == []
    assert not target.exists()


# What the text check cannot see (a function reading a server file, called by name)
# the server refuses: the workload's role lacks the privilege.
READ_SERVER_FILE = "DO $$ BEGIN PERFORM pg_read_file('/etc/hostname'); END $$"


def test_a_privileged_call_in_setup_sql_fails_naming_the_statement_and_the_role(config) -> None:
    setup_sql = f"CREATE TABLE t (x text);\n{READ_SERVER_FILE};\n"

    result, _ = run(one_point(dataset={"setup_sql": setup_sql}), config)

    assert result["status"] == "failed"
    assert result["error"]["code"] == "refused_sql"
    assert result["error"]["category"] == "user"
    assert result["error"]["field"] == "dataset.setup_sql"
    message = result["error"]["message"]
    assert message.startswith("setup SQL statement 2 (line 2) `DO $$ BEGIN PERFORM")
    assert "permission denied" in message or "must be superuser" in message
    assert "non-superuser role benchlab_workload" in message
    assert "allow superuser SQL" in message
    assert result["points"] == []


def test_a_privileged_call_in_a_script_fails_naming_the_script_command_and_the_role(
    config,
) -> None:
    script = "SELECT pg_read_file('/etc/hostname');\n"

    result, _ = run(one_point(workload=custom(script)), config)

    assert result["error"]["code"] == "refused_sql"
    assert result["error"]["field"] == "workload.scripts[0].text"
    message = result["error"]["message"]
    assert message.startswith("script 'sneaky' command 1 `SELECT pg_read_file(")
    assert "pg_read_file" in message and "benchlab_workload" in message
    # The short calibration run before the first point met the refusal: no point was measured.
    assert result["points"] == [] and "failed_point" not in result


def test_the_agent_config_allowing_superuser_sql_runs_the_same_statements_in_the_sandbox(
    config, target
) -> None:
    """Allowed, COPY ... PROGRAM runs: inside the server's sandbox, whose /tmp is its own,
    and where the host's path the OS user could write is not there to write."""
    config.allow_superuser_sql = True
    setup_sql = "CREATE TABLE t (x text);\nINSERT INTO t VALUES ('from setup');\n"
    setup_sql += HIDDEN["program"].format(target="/tmp/written-in-the-sandbox") + ";\n"
    setup_sql += "CREATE TABLE back (x text);\n"
    setup_sql += "COPY back FROM PROGRAM 'cat /tmp/written-in-the-sandbox';\n"
    script = "SELECT count(*) FROM back WHERE x = 'from setup';\n"

    result, _ = run(one_point(dataset={"setup_sql": setup_sql}, workload=custom(script)), config)

    assert result["status"] == "succeeded", result["error"]
    assert result["dataset"]["workload"] == {**WORKLOAD, "user": "postgres", "superuser": True}
    assert not Path("/tmp/written-in-the-sandbox").exists()

    outside = HIDDEN["program"].format(target=target)
    result, _ = run(
        one_point(dataset={"setup_sql": f"CREATE TABLE t (x text);\n{outside};\n"}), config
    )

    assert result["error"]["code"] == "setup_sql_failed"
    assert not target.exists()


def test_only_the_agents_own_flag_or_config_file_allow_superuser_sql(tmp_path) -> None:
    config_file = tmp_path / "agent.json"
    config_file.write_text(json.dumps({"allow_superuser_sql": True}))
    parser = build_parser()

    from_flag = load_config(parser.parse_args(["run", "spec.json", "--allow-superuser-sql"]))
    from_file = load_config(parser.parse_args(["run", "spec.json", "--config", str(config_file)]))
    default = load_config(parser.parse_args(["run", "spec.json"]))

    assert from_flag.allow_superuser_sql and from_file.allow_superuser_sql
    assert default.allow_superuser_sql is False
