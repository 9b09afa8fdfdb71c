"""Checks on custom pgbench script text before it reaches pgbench.

`\\shell` and `\\setshell` run arbitrary commands on the agent's host
(pgbench-notes section 9); pgbench matches meta-commands case-insensitively
and allows spaces after the backslash-free start of a line, so the check does
the same.
"""

import re

from agents.contract.errors import JobError
from agents.contract.spec import WorkloadSpec, script_fields

SHELL_META = re.compile(r"^\s*\\(shell|setshell)\b", re.IGNORECASE | re.MULTILINE)


def check_script(text: str, allow_shell: bool, field: str = "workload.scripts") -> None:
    """Refuse script text that runs shell commands, unless the agent allows it locally."""
    if allow_shell:
        return
    match = SHELL_META.search(text)
    if match:
        line_no = text.count("\n", 0, match.start()) + 1
        raise JobError(
            "refused_script",
            f"line {line_no} uses \\{match.group(1).lower()}, which runs shell commands on the "
            "benchmark host; remove it, or allow shell scripts in that agent's local config",
            field=field,
        )


def check_workload_scripts(workload: WorkloadSpec, allow_shell: bool) -> None:
    """Check every custom script of a normalised workload, its processes' scripts too."""
    for field, script in script_fields(workload):
        if "text" in script:
            check_script(script["text"], allow_shell, field=f"{field}.text")
