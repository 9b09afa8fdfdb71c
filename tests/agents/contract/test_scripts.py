import pytest

from agents.contract.errors import JobError
from agents.contract.scripts import check_workload_scripts


def workload(scripts: list[dict], processes: list[dict] | None = None) -> dict:
    return {"scripts": scripts, "processes": processes or []}


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


def test_shell_is_accepted_when_the_agent_allows_it():
    scripts = [{"name": "x", "text": "\\shell true\n", "weight": 1}]
    check_workload_scripts(workload(scripts), allow_shell=True)


def test_sql_mentioning_shell_is_not_a_meta_command():
    scripts = [{"name": "x", "text": "SELECT '\\shell';\n", "weight": 1}]
    check_workload_scripts(workload(scripts), allow_shell=False)
