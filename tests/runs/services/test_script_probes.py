"""The script probes of the trust-boundaries review, through the lab's API: each is a 400
naming the script's field, and nothing is stored."""

import pytest

from runs.models import Workload

MID_LINE_PROBES = [
    "SELECT 1 \\shell id > f\n",
    "SELECT 1 \\setshell v id\n",
    "/* c */ \\shell touch /tmp/owned\n",
    "SELECT 1; -- a comment\n\\SHELL id\n",
    "SELECT $$ quoted $$ \\shell id\n",
]


@pytest.mark.parametrize("text", MID_LINE_PROBES)
def test_a_shell_meta_command_anywhere_outside_quotes_is_refused(api_client, text) -> None:
    response = api_client.post(
        "/api/workloads/",
        {"name": "probe", "scripts": [{"name": "x", "text": text, "weight": 1}]},
        format="json",
    )

    assert response.status_code == 400, response.content
    assert "workload.scripts[0].text" in response.json()["error"]["fields"]
    assert not Workload.objects.filter(name="probe").exists()


@pytest.mark.parametrize(
    "text",
    [
        "SELECT '\\shell id';\n",
        "SELECT 1; -- \\shell id\n",
        "/* \\shell id */ SELECT 1;\n",
        "SELECT $tag$ \\shell id $tag$;\n",
        "\\set aid random(1, 100000 * :scale)\n"
        "SELECT abalance FROM pgbench_accounts WHERE aid = :aid \\gset\n",
    ],
)
def test_backslashes_pgbench_reads_as_text_pass(api_client, text) -> None:
    response = api_client.post(
        "/api/workloads/",
        {"name": "fine", "scripts": [{"name": "x", "text": text, "weight": 1}]},
        format="json",
    )

    assert response.status_code == 201, response.content
