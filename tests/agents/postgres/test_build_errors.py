"""What a failed build step's message puts first: the errors of the real compiler, linker,
bison and flex (run here on small broken inputs), before the log's last lines."""

import subprocess
from pathlib import Path

import pytest

from agents.postgres.installs.build_steps import failure_message

BROKEN = {
    "compile": ("broken.c", "int main(void) { this does not compile; }\n", ["cc", "-c"]),
    "link": ("unlinked.c", "int f(void);\nint main(void) { return f(); }\n", ["cc"]),
    "bison": ("gram.y", '%%\nx: "a" {;}\n  | no_such_rule ;\n%%\n', ["bison"]),
    "flex": ("scan.l", "%%\n[a-z  { return 1; }\n%%\n", ["flex"]),
}


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
    ran = subprocess.run(
        [*argv, name],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"LC_ALL": "C", "PATH": "/usr/bin:/bin"},
    )
    assert ran.returncode != 0
    output = f"$ make\n{ran.stdout}{ran.stderr}make: *** [all] Error 2\n"

    said = failure_message(2, output, "the log's last lines").split("\n")

    assert said[0] == "exit code 2; its first errors:"
    assert first in said[1], output
    assert said[-2:] == ["last lines of the log:", "the log's last lines"]
