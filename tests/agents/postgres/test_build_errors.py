"""What a failed build step's message puts first: the errors of the real compiler, linker,
bison and flex (run here on small broken inputs), before the log's last lines; and whether
the host stopped it (build_interrupted) or the source did (build_failed)."""

import subprocess
from pathlib import Path

import pytest

from agents.postgres.installs.build_steps import failure_message, host_stopped

BROKEN = {
    "compile": ("broken.c", "int main(void) { this does not compile; }\n", ["cc", "-c"]),
    "link": ("unlinked.c", "int f(void);\nint main(void) { return f(); }\n", ["cc"]),
    "bison": ("gram.y", '%%\nx: "a" {;}\n  | no_such_rule ;\n%%\n', ["bison"]),
    "flex": ("scan.l", "%%\n[a-z  { return 1; }\n%%\n", ["flex"]),
}


def failed_output(directory: Path, argv: list[str]) -> str:
    """What make's log holds of `argv` failing in `directory` (run by the real tool)."""
    ran = subprocess.run(
        argv,
        cwd=directory,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode != 0
    return f"$ make\n{ran.stdout}{ran.stderr}make: *** [all] Error 2\n"


@pytest.mark.parametrize(
    ("tool", "first"),
    [
        ("compile", "broken.c:1:"),
        ("link", "undefined reference to `f'"),
        ("bison", "gram.y:3."),
        ("flex", "scan.l:2: "),
    ],
)
def test_the_first_error_of_each_tool_comes_first(tmp_path: Path, tool: str, first: str):
    name, text, argv = BROKEN[tool]
    (tmp_path / name).write_text(text)
    output = failed_output(tmp_path, [*argv, name])

    said = failure_message(2, output, "the log's last lines").split("\n")

    assert said[0] == "exit code 2; its first errors:"
    assert first in said[1], output
    assert said[-2:] == ["last lines of the log:", "the log's last lines"]


# A patch that breaks a PostgreSQL function: the compiler quotes the lines around its
# errors, and PostgreSQL's say "out of memory" in hundreds of places.
QUOTES_HOST_WORDS = """void *grow(unsigned long n)
{
\telog(ERROR, "out of memory");
\tereport(ERROR, (errmsg("could not write: No space left on device")));
\treturn 0
}
"""


def test_a_compile_error_quoting_out_of_memory_is_the_sources(tmp_path: Path):
    (tmp_path / "grow.c").write_text(QUOTES_HOST_WORDS)
    output = failed_output(tmp_path, ["cc", "-c", "grow.c"])

    assert 'elog(ERROR, "out of memory");' in output, "the compiler quotes the line"
    assert not host_stopped(2, output)


def test_a_compiler_out_of_disk_or_killed_was_stopped_by_the_host(tmp_path: Path):
    (tmp_path / "ok.c").write_text("int main(void) { return 0; }\n")
    # /dev/full: every write fails as on a full disk.
    output = failed_output(tmp_path, ["cc", "-c", "ok.c", "-o", "/dev/full"])

    assert "No space left on device" in output
    assert host_stopped(2, output)
    assert host_stopped(137, "") and host_stopped(-9, "") and host_stopped(143, "")
    assert not host_stopped(1, "") and not host_stopped(2, "")
