"""Checks on custom pgbench script text before it reaches pgbench.

`\\shell` and `\\setshell` run arbitrary commands on the agent's host
(docs/pgbench.md#script-meta-commands-that-run-shell-commands), and pgbench reads a
backslash outside quotes and comments as a meta-command anywhere on a line, not only at
its start. The check reads a script as every pgbench from 9.2 to 18 reads it
(agents/contract/workload_text/script_reader.py) and refuses a shell meta-command that
any of them would find, unless the agent's local config allows shell scripts. A
meta-command pgbench 9.6 or later would find and no pgbench knows is refused too:
pgbench would stop on it anyway. (pgbench 9.2 to 9.5 read every line that
starts with a backslash as a meta-command, even one a later pgbench reads inside a
string, so only their shell commands count.)
"""

from agents.contract.errors import JobError
from agents.contract.host_allows import how_to_enable
from agents.contract.spec.document import WorkloadSpec, script_fields
from agents.contract.workload_text.script_reader import (
    READINGS,
    MetaCommand,
    Reading,
    meta_commands,
)

SHELL_COMMANDS = frozenset({"shell", "setshell"})
# Every other meta-command some pgbench knows (\setrandom up to 9.5, the rest since).
HARMLESS_COMMANDS = (
    "set", "setrandom", "sleep", "if", "elif", "else", "endif", "gset", "aset",
    "startpipeline", "endpipeline", "syncpipeline",
)  # fmt: skip


def check_script(text: str, allow_shell: bool, field: str = "workload.scripts") -> None:
    """Refuse script text with a shell meta-command (unless allowed) or an unknown one."""
    readers: dict[MetaCommand, list[Reading]] = {}
    for reading in READINGS:
        for command in meta_commands(text, reading):
            readers.setdefault(command, []).append(reading)
    for command in sorted(readers, key=lambda command: (command.line, command.column)):
        problem = _problem(command, readers[command], allow_shell)
        if problem:
            raise JobError("refused_script", f"line {command.line}: {problem}", field=field)


def runs_shell(text: str) -> bool:
    """True when some pgbench (9.2 to 18) finds \\shell or \\setshell in `text`."""
    return any(
        command.folded_name in SHELL_COMMANDS
        for reading in READINGS
        for command in meta_commands(text, reading)
    )


def check_workload_scripts(workload: WorkloadSpec, allow_shell: bool) -> None:
    """Check every custom script of a normalised workload, its processes' scripts too."""
    for field, script in script_fields(workload):
        if "text" in script:
            check_script(script["text"], allow_shell, field=f"{field}.text")


def _problem(command: MetaCommand, readers: list[Reading], allow_shell: bool) -> str | None:
    name = command.folded_name
    found = f"{_versions(readers)} reads \\{command.name} here as a meta-command"
    if name in SHELL_COMMANDS and not allow_shell:
        return (
            f"{found}, which runs shell commands on the benchmark host; remove it, or allow "
            f"shell scripts on that agent: {how_to_enable('allow_shell_scripts')}"
        )
    if name in SHELL_COMMANDS or name in HARMLESS_COMMANDS:
        return None
    if all(reading.by_lines for reading in readers):
        return None
    known = ", ".join(f"\\{known}" for known in HARMLESS_COMMANDS)
    return (
        f"{found}, and pgbench does not know it (it knows {known}, \\shell and \\setshell); "
        "a backslash outside quotes and comments starts a meta-command, so remove it "
        "or put it inside a string or a comment"
    )


def _versions(readers: list[Reading]) -> str:
    """Who reads it so: "pgbench" (every version), "pgbench 9.6 and later", "pgbench 15"."""
    if len(readers) == len(READINGS):
        return "pgbench"
    runs: list[list[Reading]] = []
    for reading in readers:
        if runs and READINGS.index(reading) == READINGS.index(runs[-1][-1]) + 1:
            runs[-1].append(reading)
        else:
            runs.append([reading])
    return "pgbench " + " and ".join(_span(run[0], run[-1]) for run in runs)


def _span(first: Reading, last: Reading) -> str:
    if last == READINGS[-1]:
        return f"{first.first} and later"
    if first.first == last.last:
        return first.first
    return f"{first.first} to {last.last}"
