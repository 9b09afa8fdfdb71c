"""Where pgbench finds meta-commands, checked against real pgbench binaries.

The oracle: pgbench parses its scripts while it reads its options, before it
connects, and stops at the first meta-command it refuses with
`file:LINE: ... in command "NAME"`. A generated script whose only commands
pgbench accepts are `\\set v 1`, `\\sleep 0` and pipelines, and whose other
meta-commands are probes pgbench refuses at parse time (`\\shell` with no
command, `\\setshell v` with no command, unknown names), tells, by the line and
name pgbench reports, which backslash it read first as a meta-command, or (no
such report: it goes on to a host that does not exist) that it read none. The
reader for that pgbench's version must say the same. Nothing connects and
nothing runs: `\\shell` without a command is a parse error.
"""

import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agents.config import AgentConfig
from agents.contract.errors import JobError
from agents.contract.workload_text.script_reader import (
    READINGS,
    MetaCommand,
    meta_commands,
    reading_for,
)
from agents.contract.workload_text.scripts import check_script
from agents.postgres.installs.inventory import (
    Install,
    find_cached_installs,
    find_system_installs,
    version_key,
)

LEXED = [reading for reading in READINGS if not reading.by_lines]
BY_LINES = READINGS[0]
NEWEST = READINGS[-1]
REFUSAL = re.compile(r':(\d+): .* in command "(.*)"$', re.MULTILINE)
ACCEPTED = {"set", "sleep", "startpipeline", "endpipeline"}

# Pieces of generated scripts: SQL, quotes of every kind, comments, numbers and
# prefixes whose reading changed between versions, stray backslashes, and whole
# meta-commands (each ends its line, so no piece after it becomes an argument of
# a command pgbench accepts).
SQL_PIECES = [
    "SELECT 1", " ", "\n", "\r\n", ";", "(", ")", "x", "1", "'", "''", "E'", "e'", "b'",
    "U&'", '"', '""', "\\'", "\\\\", "$$", "$q$", "$1", "a$", "--", "/*", "*/", "-",
    "1e", "1_0e", ".5e", "1e5", ":", "::", ":e", "\\;", "\\:", "\\", "\\\n", "é",
    "1e'\\'", "1e--", "1_0e--", "$1e'\\'", ":e'\\'", "E'\\''",
]  # fmt: skip
META_PIECES = [
    "\\set v 1\n", "\\SLEEP 0\n", "\\startpipeline\n", "\\endpipeline\n",
    "\\set v 1 + \\\n 2\n", "\\shell\n", "\\SHELL\n", "\\ shell\n", "\\setshell v\n",
    "\\zork a b\n", "\\zork\\\n",
]  # fmt: skip
scripts = st.lists(st.sampled_from(SQL_PIECES + META_PIECES), max_size=30).map("".join)


def found(text: str, reading_index: int = -1) -> list[tuple[str, int]]:
    return [(c.name, c.line) for c in meta_commands(text, READINGS[reading_index])]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("SELECT 1 \\shell id > f\n", [("shell", 1)]),
        ("SELECT 1 \\setshell v cmd\n", [("setshell", 1)]),
        ("/* c */ \\shell ls\n", [("shell", 1)]),
        ("/* a /* nested */ \\shell */ SELECT 1;\n", []),
        ("SELECT 1; -- \\shell\n\\SHELL x\n", [("SHELL", 2)]),
        ("SELECT '\\shell', 'it''s \\shell';\n", []),
        ("SELECT E'\\' \\shell';\n", []),
        ("SELECT '\\' \\shell x';\n", [("shell", 1)]),
        ("SELECT E'a'\n  'b\\' \\shell x';\n", []),
        ("SELECT xe'\\' \\shell x';\n", [("shell", 1)]),
        ("SELECT :e'\\' \\shell x';\n", [("shell", 1)]),
        ("SELECT $f$ \\shell $f$, $1 \\shell x\n", [("shell", 1)]),
        ("SELECT a$b$ \\shell x $b$\n", [("shell", 1)]),
        ('SELECT "\\shell""" \\shell x\n', [("shell", 1)]),
        ("SELECT 1 \\; SELECT 2 \\:x;\n", []),
        ("SELECT 1 \\ shell x\n", [("shell", 1)]),
        ("SELECT 1 \\\\\nshell x\n", [("shell", 1)]),
        ("\\sleep 1 \\\n \\shell x\nSELECT 1;\n", [("sleep", 1)]),
        ("SELECT 1 \\\nSELECT 2;\n", []),
        ("\\set aid random(1, 100000 * :scale)\nSELECT :aid \\gset\n", [("set", 1), ("gset", 2)]),
    ],
)
def test_meta_commands_as_pgbench_16_and_later_reads_them(text, expected) -> None:
    assert found(text) == expected


def test_a_number_takes_the_letters_after_it_from_pgbench_15() -> None:
    e_string_until_14 = "SELECT 1e'\\' \\shell x';\n"
    comment_until_14 = "SELECT 1e--\\shell x\n"

    assert meta_commands(e_string_until_14, reading_for("14.23")) == []
    assert found(e_string_until_14) == [("shell", 1)]
    assert meta_commands(comment_until_14, reading_for("14.23")) == []
    assert found(comment_until_14) == [("shell", 1)]


def test_continued_meta_lines_start_in_pgbench_10() -> None:
    text = "\\sleep 1 \\\n\\shell x\n"

    assert [c.name for c in meta_commands(text, reading_for("9.6.24"))] == ["sleep", "shell"]
    assert [c.name for c in meta_commands(text, reading_for("10"))] == ["sleep"]


def test_pgbench_before_9_6_reads_lines_that_start_with_a_backslash() -> None:
    text = "SELECT 'a\n  \\shell x';\nSELECT 1 \\shell y\n"

    assert meta_commands(text, BY_LINES) == [MetaCommand("shell", 2, 3)]
    assert found(text) == [("shell", 3)]


def test_names_compare_as_pgbench_compares_them() -> None:
    command = meta_commands("\\ShElL x\n", NEWEST)[0]

    assert command.folded_name == "shell"
    assert MetaCommand("\u212aill", 1, 1).folded_name != "kill"


@settings(max_examples=400, deadline=None, database=None)
@given(text=st.text(alphabet=st.sampled_from("\\'\"$eE1:;-/*\n\r x"), max_size=60))
def test_every_reported_command_is_a_backslash_where_it_says(text: str) -> None:
    lines = text.split("\n")
    for reading in READINGS:
        for command in meta_commands(text, reading):
            assert command.name
            assert lines[command.line - 1][command.column - 1] == "\\"


@settings(max_examples=300, deadline=None, database=None)
@given(body=st.text(alphabet=st.sampled_from('\\"$eE1:;-/*\n x'), max_size=40))
def test_nothing_inside_a_closed_string_is_a_meta_command(body: str) -> None:
    for reading in LEXED:
        assert meta_commands(f"SELECT '{body}';", reading) == []
        assert meta_commands(f"SELECT $q${body.replace('$', '')}$q$;", reading) == []
        comment = body.replace("*", "")
        assert meta_commands(f"SELECT /* a /* {comment} */ {comment} */ 1;", reading) == []


@settings(max_examples=300, deadline=None, database=None)
@given(comment=st.text(alphabet=st.sampled_from("\\'\"$eE1:;-/* x"), max_size=40))
def test_a_line_comment_ends_at_the_newline(comment: str) -> None:
    for reading in LEXED:
        assert found(f"SELECT 1; --{comment}\n\\shell x\n", READINGS.index(reading)) == [
            ("shell", 2)
        ]


# Real pgbench as the oracle


@pytest.fixture(scope="module")
def pgbenches(pg16_install: Install) -> list[Install]:
    """The newest pgbench of each major version on this host, 16 at least."""
    newest = {16: pg16_install}
    installs = find_cached_installs(AgentConfig().cache_dir) + find_system_installs()
    for install in sorted(installs, key=lambda install: version_key(install.version)):
        newest[install.major] = install
    return [newest[major] for major in sorted(newest)]


def first_refused(pgbench: Path, text: str, directory: Path) -> tuple[int, str] | None:
    """(line, name) of the first meta-command pgbench refuses while it parses, or None."""
    script = directory / "script.sql"
    script.write_text(text)
    nowhere = directory / "no-server"
    argv = [str(pgbench), "-h", str(nowhere), "-t", "1", "-f", str(script)]
    finished = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert finished.returncode != 0, finished.stderr
    refused = REFUSAL.search(finished.stderr)
    return (int(refused.group(1)), refused.group(2)) if refused else None


def first_probe(text: str, version: str) -> tuple[int, str] | None:
    for command in meta_commands(text, reading_for(version)):
        if command.folded_name not in ACCEPTED:
            return command.line, command.name
    return None


@settings(
    max_examples=80,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)
@given(body=scripts)
def test_the_reader_finds_what_pgbench_finds(
    body: str, pgbenches: list[Install], tmp_path: Path
) -> None:
    text = "SELECT 0;\n" + body
    for install in pgbenches:
        refused = first_refused(install.program("pgbench"), text, tmp_path)

        assert refused == first_probe(text, install.version), f"pgbench {install.version}"
        if refused:
            with pytest.raises(JobError):
                check_script(text, allow_shell=False)


@pytest.mark.parametrize(
    "text",
    [
        "SELECT 1 \\shell\n",
        "SELECT 1 \\setshell v\n",
        "/* c */ \\shell\n",
        "SELECT 1e--\\shell\n",
        "SELECT :e'\\' \\shell\n",
        "SELECT 1 \\\\\nshell\n",
    ],
)
def test_pgbench_reads_each_attack_as_shell(text, pgbenches, tmp_path) -> None:
    newest = pgbenches[-1]

    assert first_refused(newest.program("pgbench"), text, tmp_path)[1] in ("shell", "setshell")
    assert first_probe(text, newest.version)[1] in ("shell", "setshell")
