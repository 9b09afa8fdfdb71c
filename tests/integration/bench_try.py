"""`benchlab try` through the real lab from a terminal (`scripts/bench try`; figures in
docs/benchmarks.md, "From a patch to a verdict"). Not part of the suite (the file is not
named test_*.py): the first run on a machine builds PostgreSQL 15.18 at -O2, then each
try takes minutes.

The lab: uvicorn serving the API, a control worker and a real agent allowed to build from
the suite's source-build repository (tests/bisect_repo.py: PostgreSQL 15.18 as released,
tagged `base`) and to apply user patches. The `benchlab` command the project installs
runs as a subprocess with BENCHLAB_URL and BENCHLAB_TOKEN, as a developer's terminal or
a CI job runs it, each try on the base ref with a patch of execMain.c:

1. the slow patch: a busy loop of BENCH_TRY_SPIN iterations in standard_ExecutorStart,
   so every statement of either protocol does more work; its slowdown is what the try
   measures (its report's change and interval). Expected: exit 3, the report naming
   the slower cells.
2. BENCH_TRY_TRIES tries of a patch that adds only a comment to the same function (the
   compiler makes the same code). Expected: exit 0 or 2, never 3, and no cell called
   faster. The first is detached with Ctrl-C once its experiments started (exit 130),
   and `benchlab status ID` reattaches to each.
3. the grammar commit on a repository shaped as a real clone (tests/bisect_repo.py
   `clone_shaped_repository`: no generated parser or scanner, so both builds run bison
   and flex; `head` changes gram.y so that parsing a SELECT spins): `--head head`
   against `--base base`, the battery's first two workloads (prepared statements are
   parsed once, simple ones every time). Expected: exit 3, the simple workload's cells
   slower, the prepared one's never.

Every text report is checked (no line over 72 columns, ASCII only) and each try's cells
are read back with `benchlab report experiment ID --format json`. One JSON line per try
goes to BENCH_TRY_OUT and stdout; the assertions come after every try ran.

What a spin costs depends on the CPU: on this 2-vCPU AMD EPYC VM 4,000 iterations moved
select-only by -0.0 % [-5.4, +5.7] at 1 client and -1.9 % [-7.0, +3.5] at 2 (a stack
variable's store and load cost next to nothing there), so the default is ten times that.

Settings (environment): BENCH_TRY_CASES (spin,comment,grammar), BENCH_TRY_TRIES (5),
BENCH_TRY_SPIN (40000), BENCH_TRY_DURATION
(5 s points), BENCH_TRY_MAX_ROUNDS (6), BENCH_TRY_WORKLOADS (1: the battery's first,
select-only at scale 5, prepared), BENCH_TRY_OUT (scratch/bench-try.jsonl).
"""

import difflib
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from benchlab.cli.commands import worst
from runs.services.access.tokens import api_token_create
from tests.bisect_repo import (
    EIGHT_COMMITS,
    EIGHT_REGRESSION_AT,
    EIGHT_SPIN,
    SPIN,
    bisect_repository,
    clone_shaped_repository,
)
from tests.e2e.conftest import Web
from tests.integration.conftest import running_lab
from tests.runs.factories import UserFactory
from tests.source_builds import sources_dir

pytestmark = [pytest.mark.integration, pytest.mark.timeout(6 * 3600)]

EXECUTOR = "src/backend/executor/execMain.c"
# The start of standard_ExecutorStart, the one line in the file that reads like this.
ANCHOR = "\tAssert(queryDesc->estate == NULL);\n"
COMMENT = "\n\t/* The executor starts here for every statement, whichever protocol. */\n"
BENCHLAB = Path(sys.executable).parent / "benchlab"
STARTED = re.compile(r"experiments ([\d, ]+) started")
DETACHED = 130
WIDTH = 72


def setting(name: str, default: str) -> str:
    return os.environ.get(f"BENCH_TRY_{name}", default)


def executor_patch(repository: Path, added: str) -> str:
    """A unified diff (-p1) of the base's execMain.c with `added` after ANCHOR."""
    shown = subprocess.run(
        ["git", "-C", str(repository), "show", f"base:{EXECUTOR}"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    before = shown.stdout
    assert before.count(ANCHOR) == 1, f"{EXECUTOR} changed: the anchor is not found once"
    after = before.replace(ANCHOR, ANCHOR + added)
    lines = difflib.unified_diff(
        before.splitlines(keepends=True),
        after.splitlines(keepends=True),
        f"a/{EXECUTOR}",
        f"b/{EXECUTOR}",
    )
    return "".join(lines)


class Terminal:
    """`benchlab` as a user's terminal runs it: the lab's URL and a token in the environment."""

    def __init__(self, url: str, token: str) -> None:
        self.env = {**os.environ, "BENCHLAB_URL": url, "BENCHLAB_TOKEN": token}

    def run(self, *args: str, timeout: float) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(BENCHLAB), *args], env=self.env, capture_output=True, text=True, timeout=timeout
        )

    def start(self, *args: str) -> subprocess.Popen:
        return subprocess.Popen(
            [str(BENCHLAB), *args], env=self.env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip


def try_args(host: str, repository: Path, change: list[str], workloads: str) -> list[str]:
    """`benchlab try` of `change` (--patch FILE or --head REF) on the base ref."""
    return [
        "try", "--host", host, "--repo", str(repository), "--base", "base", *change,
        "--version", "15", "--duration", setting("DURATION", "5"),
        "--max-rounds", setting("MAX_ROUNDS", "6"), "--workloads", workloads,
    ]  # fmt: skip


def detach_then_reattach(terminal: Terminal, args: list[str], timeout: float) -> dict:
    """Start the try, press Ctrl-C once its experiments started, then `benchlab status` each."""
    process = terminal.start(*args)
    said = []
    assert process.stderr is not None
    for line in process.stderr:
        said.append(line)
        if found := STARTED.search(line):
            ids = [int(pk) for pk in found.group(1).split(", ")]
            break
    else:
        process.wait(timeout=60)
        raise AssertionError(f"benchlab try started nothing (exit {process.returncode}): {said}")
    for line in process.stderr:  # Ctrl-C once the wait shows its first progress line
        said.append(line)
        if line.startswith(f"experiment {ids[0]}: "):
            break
    process.send_signal(signal.SIGINT)
    out, err = process.communicate(timeout=60)
    said.append(err)
    detached = {"exit": process.returncode, "said": "".join(said)[-2000:]}
    codes, reports = [], []
    for pk in ids:
        status = terminal.run("status", str(pk), timeout=timeout)
        codes.append(status.returncode)
        reports.append(status.stdout)
    return {"ids": ids, "codes": codes, "reports": reports, "detached": detached}


def run_through(terminal: Terminal, args: list[str], timeout: float) -> dict:
    """The try from start to its reports, waiting as `benchlab try` does."""
    done = terminal.run(*args, timeout=timeout)
    found = STARTED.search(done.stderr)
    assert found, f"benchlab try started nothing (exit {done.returncode}): {done.stderr[-2000:]}"
    ids = [int(pk) for pk in found.group(1).split(", ")]
    return {"ids": ids, "codes": [done.returncode], "reports": [done.stdout], "detached": None}


def cells_of(terminal: Terminal, ids: list[int]) -> list[dict]:
    cells = []
    for pk in ids:
        shown = terminal.run("report", "experiment", str(pk), "--format", "json", timeout=120)
        report = json.loads(shown.stdout)
        cells += [
            {
                "experiment": pk,
                "clients": cell["clients"],
                "base_tps": cell["baseline_mean"],
                "patched_tps": cell["mean"],
                "change_pct": cell["diff_pct"],
                "interval": [cell["diff_ci_low_pct"], cell["diff_ci_high_pct"]],
                "level_pct": cell.get("interval_level_pct"),
                "verdict": cell["verdict"],
                "answered_by": cell.get("answered_by"),
            }
            for cell in report["cells"]
        ]
    return cells


def report_faults(reports: list[str]) -> list[str]:
    """Lines of the text reports over 72 columns or not ASCII."""
    return [
        line
        for report in reports
        for line in report.splitlines()
        if len(line) > WIDTH or not line.isascii()
    ]


def test_benchlab_try_exits_3_for_a_slower_patch_and_never_for_a_comment(
    transactional_db, tmp_path
):
    cases = setting("CASES", "spin,comment,grammar").split(",")
    tries = int(setting("TRIES", "5"))
    spin = int(setting("SPIN", "40000"))
    out = Path(setting("OUT", "scratch/bench-try.jsonl"))
    out.parent.mkdir(parents=True, exist_ok=True)
    repository = bisect_repository(sources_dir(), EIGHT_COMMITS, EIGHT_REGRESSION_AT, EIGHT_SPIN)
    clone = clone_shaped_repository(sources_dir(), EIGHT_SPIN)
    patches = {
        "spin": executor_patch(repository, SPIN.replace("{count}", str(spin))),
        "comment": executor_patch(repository, COMMENT),
    }
    for name, text in patches.items():
        (tmp_path / f"{name}.patch").write_text(text)
    agent_args = [
        "--allow-source-builds", "--build-source", str(repository), "--build-source", str(clone),
        "--allow-user-patches",
    ]  # fmt: skip
    _row, token = api_token_create(UserFactory())
    rows = []
    with running_lab(tmp_path, agent_args=agent_args) as lab:
        web = Web(tmp_path, {"REDIS_URL": lab.env["REDIS_URL"]})
        try:
            terminal = Terminal(web.url, token)
            one = setting("WORKLOADS", "1")
            plan = {
                "spin": [
                    ("spin", False, repository, ["--patch", str(tmp_path / "spin.patch")], one)
                ],
                "comment": [
                    (
                        "comment",
                        n == 1,
                        repository,
                        ["--patch", str(tmp_path / "comment.patch")],
                        one,
                    )
                    for n in range(1, tries + 1)
                ],
                "grammar": [("grammar", False, clone, ["--head", "head"], "2")],
            }
            tried = [step for case in cases for step in plan[case]]
            for number, (name, detach, source, change, workloads) in enumerate(tried, 1):
                args = try_args(lab.name, source, change, workloads)
                started = time.monotonic()
                took = (detach_then_reattach if detach else run_through)(terminal, args, 3 * 3600)
                row = {
                    "try": number,
                    "patch": name,
                    "spin": spin if name == "spin" else None,
                    "exit": worst(took["codes"]),
                    "minutes": round((time.monotonic() - started) / 60, 1),
                    "experiments": took["ids"],
                    "detached": took["detached"],
                    "report_faults": report_faults(took["reports"]),
                    "cells": cells_of(terminal, took["ids"]),
                    "load_avg_end": os.getloadavg(),
                }
                rows.append({**row, "reports": took["reports"]})
                with out.open("a") as file:
                    file.write(json.dumps(row) + "\n")
                sys.stdout.write(json.dumps(row) + "\n")
        finally:
            web.close()

    of = {case: [row for row in rows if row["patch"] == case] for case in cases}
    for row in of.get("spin", []) + of.get("grammar", []):
        assert row["exit"] == 3, row
        assert any(cell["verdict"] == "slower" for cell in row["cells"]), row
        assert any("slower" in report for report in row["reports"]), row["reports"]
    for row in of.get("grammar", []):
        prepared, _simple = row["experiments"]
        assert all(c["verdict"] != "slower" for c in row["cells"] if c["experiment"] == prepared)
    for row in of.get("comment", []):
        assert row["exit"] in (0, 2), row
        assert not {cell["verdict"] for cell in row["cells"]} & {"faster", "slower"}, row
    if of.get("comment"):
        detached = of["comment"][0]["detached"]
        assert detached["exit"] == DETACHED, detached
        assert "benchlab status" in detached["said"], detached
    assert all(not row["report_faults"] for row in rows), [row["report_faults"] for row in rows]
