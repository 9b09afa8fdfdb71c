"""A git repository for bisection tests: PostgreSQL 15.18 as released, then commits on top,
one of which makes every simple-protocol statement slower (a busy loop in
exec_simple_query).

Made once per machine under /var/cache/benchlab-tests/bisect (the release tarball
unpacked and committed takes about half a minute), with fixed names and dates so its
commit hashes, and so the agent's cache keys for their builds, are the same every time.
`clone_shaped_repository` is the shape of a real clone instead: no generated parsers or
scanners, so its builds run bison and flex, and one commit that changes gram.y.
"""

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from tests.source_builds import tarball

CACHE = Path("/var/cache/benchlab-tests/bisect")
POSTGRES_C = "src/backend/tcop/postgres.c"
ANCHOR = "\tpgstat_report_activity(STATE_RUNNING, query_string);\n"
# Spins once per statement at -O0. What an iteration costs depends on the machine, so
# read the change step 0 measures (docs/benchmarks-archive.md): on one 2-vCPU VM 2,000,000 took
# select-only at 1 client from 8,900 to 1,730 tps (-81 %; about -93 % on a busy one) and
# 25,000 made about -5 %; on another (2026-11-27, evening) 25,000 made -37 % at 1 client
# and 2,200 about -4 % at 2 clients. 500,000 (-69 % busy) was too near the spread of 2 s
# points on a busy 2-core machine, about 30 % from run to run.
SPIN = (
    "\t{\n"
    "\t\tvolatile unsigned long benchlab_spin;\n\n"
    "\t\tfor (benchlab_spin = 0; benchlab_spin < {count}; benchlab_spin++)\n"
    "\t\t\t;\n"
    "\t}\n"
)
HARMLESS = ("README", "src/backend/utils/adt/bool.c")
FIXED_ENV = {
    "GIT_AUTHOR_NAME": "BenchLab Tests",
    "GIT_AUTHOR_EMAIL": "tests@benchlab.invalid",
    "GIT_COMMITTER_NAME": "BenchLab Tests",
    "GIT_COMMITTER_EMAIL": "tests@benchlab.invalid",
    "GIT_CONFIG_NOSYSTEM": "1",
    "HOME": "/nonexistent",
}
BROKEN = "src/backend/utils/adt/bool.c"
# The repository the 8-commit tests share (and so their builds in the agent's cache).
EIGHT_COMMITS, EIGHT_REGRESSION_AT, EIGHT_SPIN = 8, 5, 2_000_000


def bisect_repository(
    sources: Path, commits: int, regression_at: int, spin: int, broken_at: int | None = None
) -> Path:
    """The repository (cached): 15.18 tagged `base`, then `commits` commits (1-based
    numbers), number `regression_at` adding a busy loop of `spin` iterations per statement
    and `broken_at` (if any) breaking the compile, which the next commit mends."""
    name = f"pg15-{commits}c-r{regression_at}-s{spin}-b{broken_at}.git"
    repository = CACHE / name
    if (repository / "complete").exists():
        return repository
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(repository, ignore_errors=True)
    work = Path(tempfile.mkdtemp(dir=CACHE, prefix=".making-"))
    try:
        _make(work, sources, commits, regression_at, spin, broken_at)
        (work / "complete").touch()
        work.rename(repository)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return repository


def _make(
    work: Path, sources: Path, commits: int, regression_at: int, spin: int, broken_at: int | None
) -> None:
    subprocess.run(
        ["tar", "-xjf", str(tarball(sources, "15")), "-C", str(work), "--strip-components=1"],
        check=True,
    )
    _git(work, 0, "init", "-q", "-b", "main")
    _git(work, 0, "add", "-A", "--force")  # the release's generated files too (gram.c...)
    _git(work, 0, "commit", "-q", "-m", "PostgreSQL 15.18 as released")
    _git(work, 0, "tag", "base")
    for number in range(1, commits + 1):
        if number == regression_at:
            source = work / POSTGRES_C
            text = source.read_text()
            source.write_text(text.replace(ANCHOR, ANCHOR + SPIN.replace("{count}", str(spin)), 1))
            subject = "Spin in exec_simple_query (the planted regression)"
        elif number == broken_at:
            with open(work / BROKEN, "a") as changed:
                changed.write("\nthis does not compile;\n")
            subject = "Break the compile of bool.c"
        elif broken_at is not None and number == broken_at + 1:
            text = (work / BROKEN).read_text()
            (work / BROKEN).write_text(text.replace("\nthis does not compile;\n", ""))
            subject = "Mend the compile of bool.c"
        else:
            subject = _harmless_change(work, number, "bisect")
        _git(work, number, "commit", "-q", "-a", "-m", subject)
    _git(work, commits + 1, "tag", "head")


def _harmless_change(work: Path, number: int, repository: str) -> str:
    """Append a comment naming commit `number` to one of the HARMLESS files; its subject.
    The text is part of the commit hashes the agent's build cache keys on: keep it."""
    changed_name = HARMLESS[number % len(HARMLESS)]
    with open(work / changed_name, "a") as changed:
        changed.write(f"\n/* {repository} test commit {number} */\n")
    return f"Harmless change {number} to {changed_name}"


def _git(work: Path, number: int, *args: str) -> None:
    date = f"2026-01-01T00:{number // 60:02d}:{number % 60:02d}+00:00"
    env = {**os.environ, **FIXED_ENV, "GIT_AUTHOR_DATE": date, "GIT_COMMITTER_DATE": date}
    subprocess.run(["git", "-C", str(work), *args], check=True, env=env)


def commit_subjects(repository: Path) -> list[tuple[str, str]]:
    """(hash, subject) of every commit after `base`, oldest first."""
    listed = subprocess.run(
        ["git", f"--git-dir={repository / '.git'}", "log", "--reverse", "--format=%H %s",
         "base..head"],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    return [tuple(line.split(" ", 1)) for line in listed.splitlines()]  # type: ignore[misc]


# A clone of PostgreSQL's git repository holds no parser or scanner generated from a
# grammar (bison's X.c and X.h from X.y, flex's X.c from X.l) and no ecpg grammar (made
# from the backend's gram.y by a Perl script): release tarballs ship them, a clone does not.
ECPG_GRAMMAR = "src/interfaces/ecpg/preproc/preproc.y"
GRAM_Y = "src/backend/parser/gram.y"
# The start of simple_select's action, the first of gram.y's that reads like this.
SELECT_ACTION = (
    "\t\t\t\t{\n\t\t\t\t\tSelectStmt *n = makeNode(SelectStmt);\n\n\t\t\t\t\tn->targetList = $3;\n"
)
# The grammar commit: every SELECT's parse logs this at DEBUG5 (the string is in the
# server's binary only when its own gram.c was generated and compiled) and spins.
GRAMMAR_MARK = "benchlab grammar commit"
GRAMMAR_SPIN = (
    "\t\t\t\t\t{\n"
    "\t\t\t\t\t\tvolatile unsigned long benchlab_spin;\n\n"
    "\t\t\t\t\t\tfor (benchlab_spin = 0; benchlab_spin < {count}; benchlab_spin++)\n"
    "\t\t\t\t\t\t\t;\n"
    "\t\t\t\t\t}\n"
    f'\t\t\t\t\telog(DEBUG5, "{GRAMMAR_MARK}");\n'
)


def clone_shaped_repository(
    sources: Path, spin: int, commits: int = 1, grammar_at: int = 1
) -> Path:
    """The repository (cached) a real clone's shape: 15.18 without its generated parsers
    and scanners tagged `base`, then `commits` commits (1-based), number `grammar_at`
    changing gram.y (every SELECT spins `spin` times while it is parsed and logs
    GRAMMAR_MARK) and the others harmless, the last tagged `head`."""
    shape = "grammar" if (commits, grammar_at) == (1, 1) else f"{commits}c-g{grammar_at}"
    repository = CACHE / f"pg15-clone-{shape}-s{spin}.git"
    if (repository / "complete").exists():
        return repository
    CACHE.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(repository, ignore_errors=True)
    work = Path(tempfile.mkdtemp(dir=CACHE, prefix=".making-"))
    try:
        _make_clone_shaped(work, sources, spin, commits, grammar_at)
        (work / "complete").touch()
        work.rename(repository)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return repository


def generated_parsers(tree: Path) -> list[Path]:
    """The files a release generated from the tree's grammars and scanners."""
    found = [tree / ECPG_GRAMMAR]
    for grammar in [*tree.rglob("*.y"), *tree.rglob("*.l")]:
        outputs = [".c", ".h"] if grammar.suffix == ".y" else [".c"]
        found += [grammar.with_suffix(suffix) for suffix in outputs]
    return sorted({path for path in found if path.exists()})


def _make_clone_shaped(work: Path, sources: Path, spin: int, commits: int, grammar_at: int) -> None:
    subprocess.run(
        ["tar", "-xjf", str(tarball(sources, "15")), "-C", str(work), "--strip-components=1"],
        check=True,
    )
    for generated in generated_parsers(work):
        generated.unlink()
    _git(work, 0, "init", "-q", "-b", "main")
    _git(work, 0, "add", "-A", "--force")
    _git(work, 0, "commit", "-q", "-m", "PostgreSQL 15.18 as a clone has it")
    _git(work, 0, "tag", "base")
    for number in range(1, commits + 1):
        if number == grammar_at:
            grammar = work / GRAM_Y
            text = grammar.read_text()
            spun = SELECT_ACTION + GRAMMAR_SPIN.replace("{count}", str(spin))
            grammar.write_text(text.replace(SELECT_ACTION, spun, 1))
            subject = "Spin while parsing every SELECT (gram.y)"
        else:
            subject = _harmless_change(work, number, "clone")
        _git(work, number, "commit", "-q", "-a", "-m", subject)
    _git(work, commits + 1, "tag", "head")
