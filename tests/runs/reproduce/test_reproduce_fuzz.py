"""No text of a run gets out of its place in the reproduce script (runs/reproduce/script.py).

Hypothesis puts hostile text (every heredoc delimiter the script once used,
quotes, `$(...)`, backquotes, backslashes, newlines, CR, control characters,
unicode) in every field of a manifest a user can influence, and the script is
run for real: with every program it would start (pg_ctl, initdb, psql,
pgbench, make, git, patch, cp, tar, python3, runuser...) replaced by a stub
that only records its argv and stdin. Any text that became bash would touch
CANARY; the stubs' records show that each text arrived byte for byte.
"""

import os
import re
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agents.contract.workload_text.sql_text import SqlTextError, split_statements
from runs.reproduce.script import reproduce_script

HOSTILE = [
    "BENCHLAB_SCRIPT", "BENCHLAB_SQL", "BENCHLAB_SETTINGS", "BENCHLAB_PATCH_0123456789abcdef",
    "EOF", "'", '"', "`", "$(touch CANARY)", "`touch CANARY`", "${PATH:+$(touch CANARY)}",
    "${IFS}", "\\", "\\'", "\n", "\r", "\r\n", "\nBENCHLAB_SCRIPT\ntouch CANARY\n",
    "\nBENCHLAB_SQL\ntouch CANARY\n", "\nBENCHLAB_SETTINGS\ntouch CANARY\n",
    "\nEOF\ntouch CANARY\n", "'; touch CANARY; '", '"; touch CANARY; "', "\n\\! touch CANARY\n",
    "\n}\ntouch CANARY\n#", "\n\\shell touch CANARY\n",
    "\t", "\x01", "\x0b", "\x1b[2J", "\x7f", "\x85", "\u2028", "\u202e", "é", "日本", "🐘",
]  # fmt: skip
EVERYTHING = "".join(HOSTILE)
SOURCE_KINDS = ["path", "url", "git", "upload"]
VERSION = "postgres (PostgreSQL) stub"
# One program for every stub, told apart by the name it was started as. Each call leaves
# $STUB_LOG/<microseconds>.<name>.<pid>: its argv, NUL-terminated (and .stdin, .cflags).
STUB = r"""#!/bin/bash
name=${0##*/}
record=$STUB_LOG/${EPOCHREALTIME/./}.$name.$$
printf '%s\0' "$@" >"$record"
case $name in
  postgres) echo "$STUB_VERSION" ;;
  pgbench) echo "tps = 100.5 (without initial connection time)" ;;
  patch) cat >"$record.stdin" ;;
  configure)
    printf '%s' "${CFLAGS-unset}" >"$record.cflags"
    prefix=$1; prefix=${prefix#--prefix=}
    mkdir -p "$prefix/bin"
    for program in postgres initdb pg_ctl psql pgbench; do
      ln -s "$STUB_DIR/stub" "$prefix/bin/$program"
    done ;;
  tar|git) [[ $name == git && $1 != clone ]] && exit 0
    tree=${@: -1}; [[ $name == tar ]] && tree=$4
    mkdir -p "$tree" && ln -s "$STUB_DIR/stub" "$tree/configure" ;;
  initdb) while (($#)); do [[ $1 == -D ]] && mkdir -p "$2"; shift; done ;;
  runuser) shift 3; exec "$@" ;;
esac
"""
STUBBED = ["make", "git", "patch", "cp", "tar", "python3", "curl", "wget", "useradd", "runuser"]
# What may appear in the script's own text: no control character but newline and tab.
RAW_CONTROL = re.compile(
    r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2028\u2029]"
)


def hostile_text(max_pieces: int = 8) -> st.SearchStrategy[str]:
    piece = st.one_of(
        st.sampled_from(HOSTILE),
        st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=6),
    )
    return st.lists(piece, max_size=max_pieces).map("".join)


def manifest_of(text: Callable[[int], str], kind: str, processes: bool) -> dict[str, Any]:
    """A manifest of a source-build run with `text(pieces)` in every field a user can touch
    (a name or the run id gets 4 pieces, short enough for a file name)."""
    scripts = [{"name": text(4), "text": text(8), "weight": 1} for _ in range(2)]
    process_names = [text(4), text(4)] if processes else []
    workload = {
        "scripts": scripts,
        "processes": [
            {"scripts": [{"name": n, "text": text(8), "weight": 1}]} for n in process_names
        ],
    }
    pgbench = ["/agent/bin/pgbench", "-c", text(8), "-h", "/agent/sock", "-p", "5432",
               "--log-prefix=/agent/txlog/x", text(8), "benchlab"]  # fmt: skip
    if processes:
        paths = [
            f"/agent/work/process-{n}-0-{name}.sql@1" for n, name in enumerate(process_names, 1)
        ]
        points = [[*pgbench, "-f", path] for path in paths]
    else:
        paths = [
            f"/agent/work/script-{i}-{script['name']}.sql@1" for i, script in enumerate(scripts)
        ]
        points = [[*pgbench, *(word for path in paths for word in ("-f", path))]]
    return {
        "version": 1,
        "kind": "benchlab-run-manifest",
        "run_id": text(4),
        "agent_version": text(8),
        "spec": {
            "postgres": {
                "version": text(8),
                "source": "build",
                "build": {
                    "source": {"kind": kind, "location": text(8), "ref": text(8)},
                    "configure_flags": [text(8), text(8)],
                    "patches": [{"name": text(8), "diff": text(8), "strip": 1} for _ in range(2)],
                    "cflags": text(8),
                },
            },
            "workload": workload,
            "dataset": {"setup_sql": text(8)},
            "sweep": {"between_points": text(8)},
        },
        "build": {
            "requested": {},
            "install": {"version": text(8), "source": text(8), "bindir": text(8)},
            "digest": text(8),
        },
        "commands": [
            {"name": "initdb", "argv": ["/agent/bin/initdb", "-D", "/agent/data", text(8)]},
            {"name": "pgbench_init", "argv": ["/agent/bin/pgbench", "-i", text(8), "benchlab"]},
            {"name": "warmup", "argv": pgbench},
            *({"name": "pgbench", "argv": argv} for argv in points),
        ],
        "settings": {
            "requested": {},
            "effective": [
                {"name": "work_mem", "setting": text(8), "source": "configuration file"},
                {"name": text(4), "setting": text(8), "source": "configuration file"},
            ],
        },
        "storage": {},
        "facts": {},
        "points": [{"index": 0, "clients": text(8), "repeat": text(8), "tps": 1.5}],
    }


@st.composite
def manifests(draw: st.DrawFn) -> dict[str, Any]:
    return manifest_of(
        lambda pieces: draw(hostile_text(pieces)),
        draw(st.sampled_from(SOURCE_KINDS)),
        draw(st.booleans()),
    )


def everything(pieces: int) -> str:
    """Every hostile piece at once; for a name, the ones that break out of a heredoc."""
    return EVERYTHING if pieces > 4 else "\nBENCHLAB_SCRIPT\ntouch CANARY\n'$(touch CANARY)`x`/.."


def calls(log: Path, program: str) -> list[tuple[list[bytes], Path]]:
    """Each call of `program`, in order: its argv and its record file."""
    records = sorted(path for path in log.glob(f"*.{program}.*") if path.name.count(".") == 2)
    return [(path.read_bytes().split(b"\0")[:-1], path) for path in records]


def conf_string(value: str) -> str:
    """A quoted postgresql.conf value as the server reads it (guc-file.l, GUC_scanstr)."""
    assert value[0] == value[-1] == "'" and len(value) >= 2, value
    escapes = {"b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "\\": "\\", "'": "'"}
    read, body, index = [], value[1:-1], 0
    while index < len(body):
        char = body[index]
        if char in "\\'":
            index += 1
            assert char == "\\" or body[index] == "'", f"a lone quote in {value!r}"
            read.append(escapes[body[index]])
        else:
            read.append(char)
        index += 1
    return "".join(read)


def setup_statements(sql: str) -> list[str]:
    try:
        return [statement.text for statement in split_statements(sql)]
    except SqlTextError:
        return [sql]


def run_script(
    manifest: dict[str, Any], root: Path, allow_shell: bool = True
) -> tuple[str, subprocess.CompletedProcess]:
    """Run the manifest's script in `root` with every program it starts a stub (pgbench
    too, so a `\\shell` in a script is allowed unless `allow_shell` is False)."""
    stubs, log = root / "stubs", root / "log"
    stubs.mkdir()
    log.mkdir()
    (stubs / "stub").write_text(STUB)
    (stubs / "stub").chmod(0o755)
    for program in STUBBED:
        (stubs / program).symlink_to(stubs / "stub")
    script = reproduce_script(manifest)  # type: ignore[arg-type]
    (root / "reproduce.sh").write_text(script)
    env = {
        "PATH": f"{stubs}:{os.environ['PATH']}",
        "HOME": str(root),
        "LANG": "C.UTF-8",
        "STUB_DIR": str(stubs),
        "STUB_LOG": str(log),
        "STUB_VERSION": VERSION,
        "SOURCE_TARBALL": str(root / "uploaded.tar"),
        "BENCH_USER": "root" if os.getuid() == 0 else os.environ.get("USER", ""),
        "BENCH_PORT": "5432",
        "ALLOW_SHELL_SCRIPTS": "1" if allow_shell else "",
    }
    ran = subprocess.run(
        ["bash", "reproduce.sh"], cwd=root, env=env, capture_output=True, timeout=60
    )
    return script, ran


def check_nothing_escaped(manifest: dict[str, Any]) -> None:
    with tempfile.TemporaryDirectory(prefix="benchlab-fuzz-") as temporary:
        root = Path(temporary)
        script, ran = run_script(manifest, root)
        syntax = subprocess.run(["bash", "-n", root / "reproduce.sh"], capture_output=True)

        assert not list(root.rglob("CANARY"))
        assert syntax.returncode == 0, syntax.stderr.decode()
        assert ran.returncode == 0, ran.stderr.decode(errors="replace")
        assert not RAW_CONTROL.search(script)
        (workdir,) = root.glob("benchlab-reproduce-*")
        check_written_files(manifest, workdir)
        check_build(manifest, workdir, root / "log")
        check_cluster(manifest, workdir, root / "log")


def check_written_files(manifest: dict[str, Any], workdir: Path) -> None:
    workload = manifest["spec"]["workload"]
    texts = [s["text"] for s in workload["scripts"]]
    texts += [s["text"] for p in workload["processes"] for s in p["scripts"]]
    written = [path.read_bytes() for path in (workdir / "scripts").iterdir()]
    assert sorted(written) == sorted(text.encode() for text in texts)
    conf = (workdir / "data" / "cluster" / "postgresql.conf").read_bytes().decode().split("\n")
    recorded = [(s["name"], s["setting"]) for s in manifest["settings"]["effective"]]
    lines = (line.partition(" = ") for line in conf[:-3])
    read_back = [(name, conf_string(value)) for name, _, value in lines]
    assert read_back[0] == recorded[0] and set(read_back) <= set(recorded)
    own = ["listen_addresses = ''", f"unix_socket_directories = '{workdir}/socket'", ""]
    assert conf[-3:] == own


def check_build(manifest: dict[str, Any], workdir: Path, log: Path) -> None:
    build = manifest["spec"]["postgres"]["build"]
    source, tree, tarball = (
        build["source"],
        workdir / "source" / "tree",
        workdir / "source" / "source.tar",
    )
    fetched = {
        "path": ("cp", [source["location"], str(tarball)]),
        "upload": ("cp", [str(workdir.parent / "uploaded.tar"), str(tarball)]),
        "url": ("python3", [source["location"], str(tarball)]),
        "git": ("git", ["clone", "--quiet", source["location"], str(tree)]),
    }
    program, argv = fetched[source["kind"]]
    assert calls(log, program)[0][0][-len(argv) :] == [word.encode() for word in argv]
    if source["kind"] == "git":
        assert calls(log, "git")[1][0][-1] == (source["ref"] or "HEAD").encode()
    patched = [Path(f"{record}.stdin").read_bytes() for _argv, record in calls(log, "patch")]
    assert patched == [patch["diff"].encode() for patch in build["patches"]]
    ((configured, record),) = calls(log, "configure")
    assert configured == [
        f"--prefix={workdir}/pgbuild".encode(),
        *(f.encode() for f in build["configure_flags"]),
    ]
    cflags = build["cflags"] or "unset"
    assert Path(f"{record}.cflags").read_bytes() == cflags.encode()


def check_cluster(manifest: dict[str, Any], workdir: Path, log: Path) -> None:
    initdb = manifest["commands"][0]["argv"]
    assert calls(log, "initdb")[0][0] == [
        b"-D",
        f"{workdir}/data/cluster".encode(),
        initdb[-1].encode(),
    ]
    sql = manifest["spec"]["dataset"]["setup_sql"].strip()
    as_workload = [argv for argv, _ in calls(log, "psql") if b"benchlab_workload" in argv]
    sent = [argv[i + 1] for argv in as_workload for i, word in enumerate(argv) if word == b"-c"]
    statements = setup_statements(sql) if sql else []
    assert sent == [f" {statement}".encode() for statement in statements]
    expected = sorted(replayed(c["argv"], manifest, workdir) for c in manifest["commands"][1:])
    assert sorted(with_script_texts(argv) for argv, _ in calls(log, "pgbench")) == expected


def with_script_texts(argv: list[bytes]) -> list[bytes]:
    """`argv` with each `-f FILE@WEIGHT` as `-f TEXT@WEIGHT`, TEXT what FILE holds."""
    shown = list(argv)
    for index in (i + 1 for i, word in enumerate(argv) if word == b"-f"):
        path, _, weight = argv[index].rpartition(b"@")
        shown[index] = Path(os.fsdecode(path)).read_bytes() + b"@" + weight
    return shown


def replayed(recorded: list[str], manifest: dict[str, Any], workdir: Path) -> list[bytes]:
    """What the script gives pgbench for a recorded argv: this machine's socket, port and log,
    and for `-f` (shown as by with_script_texts) the text of the script the agent named."""
    workload = manifest["spec"]["workload"]
    here = {
        "/agent/sock": f"{workdir}/socket",
        "--log-prefix=/agent/txlog/x": f"--log-prefix={workdir}/txlog/pgbench_log",
    }
    argv = [here.get(arg, arg) for arg in recorded[1:]]
    for index in (i + 1 for i, word in enumerate(argv) if word == "-f"):
        script = re.match(r"/agent/work/script-(\d+)-", argv[index])
        process = re.match(r"/agent/work/process-(\d+)-0-", argv[index])
        if script:
            text = workload["scripts"][int(script[1])]["text"]
        else:
            assert process
            text = workload["processes"][int(process[1]) - 1]["scripts"][0]["text"]
        argv[index] = f"{text}@1"
    return [arg.encode() for arg in argv]


@settings(max_examples=30, deadline=None, database=None)
@given(manifests())
def test_no_text_of_a_run_runs_as_bash_and_every_text_arrives_byte_for_byte(
    manifest: dict[str, Any],
) -> None:
    check_nothing_escaped(manifest)


@pytest.mark.parametrize("processes", [False, True])
@pytest.mark.parametrize("kind", SOURCE_KINDS)
def test_every_hostile_piece_in_every_field_at_once_stays_text(kind: str, processes: bool) -> None:
    check_nothing_escaped(manifest_of(everything, kind, processes))


def test_a_script_that_runs_shell_commands_stops_the_replay_unless_allowed() -> None:
    manifest = manifest_of(lambda _pieces: "\\shell touch CANARY\n", "path", False)
    with tempfile.TemporaryDirectory(prefix="benchlab-fuzz-") as temporary:
        root = Path(temporary)
        _script, refused = run_script(manifest, root, allow_shell=False)
        pgbench_calls = calls(root / "log", "pgbench")

    assert refused.returncode == 1
    assert b"then run again with ALLOW_SHELL_SCRIPTS=1" in refused.stderr
    assert not pgbench_calls
