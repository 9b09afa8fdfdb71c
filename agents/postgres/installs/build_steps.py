"""The steps of one source build: patch, configure, make, make install.

Each step runs as the agent's unprivileged OS user with a minimal environment,
its output appended to one build log; every flag is an argv element (CFLAGS,
checked against the allow-list, goes to configure through the environment), no
step goes through a shell of ours. A patch is applied only after the files it
names are found inside the tree and not behind a symlink. A failing step raises
BuildFailed naming the step and the log lines that matter. `make` reports a percentage: object
files built against the C files the tree will compile.
"""

import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agents.contract.builds.definition import BuildDefinition, BuildPatch, BuildRecord
from agents.contract.builds.source_tree import UnsafeSource, patch_file_names, stripped
from agents.contract.errors import Cancelled, JobError
from agents.postgres.installs.inventory import Progress
from agents.postgres.osuser import OsUser
from agents.sandbox import View

TAIL_LINES = 25
# What prints an error: the compiler (gcc, clang) and bison `file:line:col: error: ...`, the
# linker `file:(.text+0x5): undefined reference to ...`, flex `scan.l:12: unrecognized rule`.
ERROR_LINE = re.compile(r": (fatal )?error: |: undefined reference to |^\S+\.l:\d+: ")
FIRST_ERRORS = 3
# What says the host stopped a step, not the source: out of disk or memory, a compiler
# killed (the OOM killer, an agent stopping). Such a failure may pass on a later try.
# The tools' own lines only: strerror's text ends its line, gcc's ("cc1: out of memory
# allocating 8032 bytes ...") has its form, while a source line the compiler quotes
# under an error (PostgreSQL says errmsg("out of memory") in hundreds of places) says
# these words inside a string literal.
HOST_TROUBLE = re.compile(
    r"(No space left on device|Disk quota exceeded|Cannot allocate memory)'?$|"
    r"^virtual memory exhausted|: out of memory allocating \d+ bytes|"
    r"LLVM ERROR: out of memory|Killed signal terminated program|"
    r"internal compiler error: Killed",
    re.MULTILINE,
)
KILLING_SIGNALS = (signal.SIGKILL, signal.SIGTERM)
POLL_S = 1.0
STEP_TIMEOUT_S = 3 * 3600
# C files under these directories are not compiled by a plain `make`.
UNBUILT_DIRS = ("src/test", "src/tools", "src/tutorial", "src/interfaces/ecpg/test", "src/pl")
# Headers a configure with default flags needs, and the Debian package that has each.
LIBRARY_HEADERS = {
    "readline": ("/usr/include/readline/readline.h", "libreadline-dev"),
    "zlib": ("/usr/include/zlib.h", "zlib1g-dev"),
    "icu": ("/usr/include/unicode/ucol.h", "libicu-dev"),
}
# Headers an optional configure flag needs, and the Debian package that has each.
FLAG_HEADERS = {
    "--with-openssl": ("/usr/include/openssl/ssl.h", "libssl-dev"),
    "--with-ssl=openssl": ("/usr/include/openssl/ssl.h", "libssl-dev"),
    "--with-lz4": ("/usr/include/lz4.h", "liblz4-dev"),
    "--with-zstd": ("/usr/include/zstd.h", "libzstd-dev"),
    "--with-icu": ("/usr/include/unicode/ucol.h", "libicu-dev"),
    "--with-libxml": ("/usr/include/libxml2/libxml/parser.h", "libxml2-dev"),
    "--with-liburing": ("/usr/include/liburing.h", "liburing-dev"),
    "--with-libnuma": ("/usr/include/numa.h", "libnuma-dev"),
}


class BuildFailed(JobError):
    """A build step failed; `record` carries the build record with its log.

    `transient` when the host stopped it, not the source (the source not fetched, a step
    killed or over its time, out of disk or memory): code build_interrupted, and a later
    job builds it again; otherwise build_failed, which the lab does not build again for
    the experiment's later rounds (docs/decisions.md)."""

    def __init__(self, step: str, message: str, transient: bool = False) -> None:
        super().__init__(
            "build_interrupted" if transient else "build_failed",
            f"source build failed at {step}: {message}",
            "postgres.build",
        )
        self.step = step
        self.record: BuildRecord | None = None


def compiler_version() -> str:
    """`cc --version`'s first line; JobError naming the package when there is no compiler."""
    missing_programs(["cc", "make"])
    output = subprocess.run(["cc", "--version"], capture_output=True, text=True, timeout=30)
    return output.stdout.splitlines()[0].strip() if output.stdout else "cc (unknown version)"


PROGRAM_PACKAGES = {
    "cc": "gcc",
    "make": "make",
    "patch": "patch",
    "git": "git",
    "bison": "bison",
    "flex": "flex",
    "perl": "perl",
}


# What a build from a git repository needs besides a release's: a clone holds no
# generated parser or scanner (gram.c, scan.c, ...), a release tarball does.
GIT_BUILD_PROGRAMS = ("bison", "flex")


def git_build_lacks() -> list[str]:
    """The programs a build from a git clone needs that this host lacks."""
    return [name for name in GIT_BUILD_PROGRAMS if shutil.which(name) is None]


def missing_programs(programs: list[str]) -> None:
    """Raise JobError(build_prerequisites) naming the Debian packages for missing programs."""
    missing = [name for name in programs if shutil.which(name) is None]
    if missing:
        packages = " ".join(PROGRAM_PACKAGES[name] for name in missing)
        raise JobError(
            "build_prerequisites",
            f"a source build needs {', '.join(missing)}: apt-get install {packages}",
            field="postgres.build",
        )


def check_prerequisites(definition: BuildDefinition) -> None:
    """Refuse before building when a program or library the build needs is missing."""
    programs = ["cc", "make", "perl"]
    if definition["source"]["kind"] == "git":
        # bison and flex too unless the commit holds the generated parsers (a release's tree
        # committed does): BuildSteps.checkout asks once the tree is there.
        programs.append("git")
    if definition["patches"]:
        programs.append("patch")
    missing_programs(programs)
    flags = set(definition["configure_flags"])
    packages = [
        package
        for library, (header, package) in LIBRARY_HEADERS.items()
        if f"--without-{library}" not in flags and not Path(header).exists()
    ]
    if packages:
        raise JobError(
            "build_prerequisites",
            f"configure needs headers from {', '.join(packages)}: apt-get install "
            f"{' '.join(packages)}, or build with --without-readline, --without-zlib, "
            "--without-icu",
            field="postgres.build.configure_flags",
        )
    wanted = [FLAG_HEADERS[flag] for flag in definition["configure_flags"] if flag in FLAG_HEADERS]
    missing = sorted({package for header, package in wanted if not Path(header).exists()})
    if missing:
        raise JobError(
            "build_prerequisites",
            f"the configure flags need headers this host lacks: apt-get install "
            f"{' '.join(missing)} on the agent's host, or remove the flags",
            field="postgres.build.configure_flags",
        )


def check_patch_targets(tree: Path, diff: str, strip: int) -> None:
    """UnsafeSource when a file the patch names is outside `tree` or behind a symlink in it."""
    for header in patch_file_names(diff):
        name = stripped(header, strip)
        path = tree
        for part in name.split("/") if name else []:
            path = path / part
            if path.is_symlink():
                raise UnsafeSource(
                    f"{name} is reached through the symlink {path.relative_to(tree)}"
                )
        if not path.resolve().is_relative_to(tree.resolve()):
            raise UnsafeSource(f"{name} lies outside the source tree")


def host_stopped(exit_code: int, output: str) -> bool:
    """Whether the host stopped a failed step, not its source: its program ended by SIGKILL
    or SIGTERM (negative from Popen, 128 + the signal from the sandbox, which passes on how
    its program ended), or its output says it ran out of disk or memory."""
    killed = -exit_code in KILLING_SIGNALS or exit_code - 128 in KILLING_SIGNALS
    return killed or HOST_TROUBLE.search(output) is not None


def failure_message(exit_code: int, output: str, tail: str) -> str:
    """What a failed step says: the first errors in its output (the compiler's, bison's,
    flex's), then the log's last lines, which a parallel make ends with its own complaints."""
    errors = [line.strip() for line in output.splitlines() if ERROR_LINE.search(line)]
    first = "".join(f"\n{line}" for line in errors[:FIRST_ERRORS])
    said = f"; its first errors:{first}\n" if first else "; "
    return f"exit code {exit_code}{said}last lines of the log:\n{tail}"


def run_git(args: list[str]) -> str:
    """Run git (no shell); BuildFailed(fetch) with its message when it fails."""
    missing_programs(["git"])
    result = subprocess.run(["git", *args], capture_output=True, text=True, timeout=1800)
    if result.returncode != 0:
        message = f"git {args[0]} failed: {result.stderr.strip()[-500:]}"
        raise BuildFailed("fetch", message, transient=True)
    return result.stdout


class BuildSteps:
    """Runs the build steps in `tree`, installing into `prefix`, as `os_user`."""

    def __init__(
        self,
        tree: Path,
        prefix: Path,
        os_user: OsUser,
        progress: Progress,
        should_cancel: Callable[[], bool],
        read_only: tuple[Path, ...] = (),
    ) -> None:
        self.tree = tree
        self.prefix = prefix
        self.read_only = read_only
        self.os_user = os_user
        self.progress = progress
        self.should_cancel = should_cancel
        self.log_path = tree.parent / "build.log"
        self.log_path.touch()
        os.chmod(self.log_path, 0o666)

    def view(self) -> View:
        """What the build's programs see: the system's compiler, and the tree and prefix only."""
        return View(read_only=self.read_only, writable=(self.tree.parent, self.prefix))

    def run_all(self, definition: BuildDefinition) -> None:
        """Patch, configure, make, install (and pgbench from contrib before 9.5)."""
        self._apply_patches(definition)
        self._configure(definition, self.prefix)
        self._compile()
        self._install()

    def checkout(self, git_dir: Path, commit: str, patches: list[BuildPatch]) -> None:
        """Make the kept tree `commit`'s files as the OS user: `git read-tree -u` rewrites
        only the files that differ (so make recompiles only what they touch) and keeps
        the build's own files; the index lives beside the tree, the repository is read-only.
        The files `patches` name that `commit` lacks go: an earlier commit's build in this
        tree created them, and patch would refuse to create them again."""
        self.progress(f"checking out {commit[:12]}", 1.0)
        git = ["git", "-c", f"safe.directory={git_dir}", "--literal-pathspecs"]
        git += [f"--git-dir={git_dir}", f"--work-tree={self.tree}"]
        index = {"GIT_INDEX_FILE": str(self.tree.parent / "index")}
        # Files the last build touched but did not change (make's `missing` touches the
        # parsers) count as unchanged, so read-tree leaves them and their mtimes alone.
        self._run("checkout", [*git, "update-index", "-q", "--refresh"], env=index)
        self._run("checkout", [*git, "read-tree", "--reset", "-u", commit], env=index)
        patched = sorted(
            {
                name
                for patch in patches
                for header in patch_file_names(patch["diff"])
                if (name := stripped(header, patch["strip"])) is not None
            }
        )
        if patched:
            # Untracked files only (git clean never removes what the index holds).
            self._run("checkout", [*git, "clean", "-q", "-f", "-x", "--", *patched], env=index)
        if not (self.tree / "src" / "backend" / "parser" / "gram.c").exists():
            missing_programs(list(GIT_BUILD_PROGRAMS))

    def run_incremental(self, definition: BuildDefinition, install_prefix: Path) -> None:
        """Patch, configure (once per kept tree), make what changed, install into `prefix`.

        The tree is configured for `install_prefix`, a fixed path; `make install` puts
        each build in its own prefix (PostgreSQL finds its files relative to its programs)."""
        self._apply_patches(definition)
        if not (self.tree / "config.status").exists():
            self._configure(definition, install_prefix)
        self._compile()
        self._install(f"prefix={self.prefix}")

    def _apply_patches(self, definition: BuildDefinition) -> None:
        for patch in definition["patches"]:
            self.progress(f"applying patch {patch['name']}", 2.0)
            step = f"patch {patch['name']}"
            try:
                check_patch_targets(self.tree, patch["diff"], patch["strip"])
            except UnsafeSource as error:
                raise BuildFailed(step, f"{error}: the patch was not applied") from error
            self._run(step, self._patch_argv(patch["strip"]), patch["diff"])

    def _configure(self, definition: BuildDefinition, prefix: Path) -> None:
        self.progress("configuring", 5.0)
        configure = ["./configure", f"--prefix={prefix}", *definition["configure_flags"]]
        cflags = {"CFLAGS": definition["cflags"]} if definition["cflags"] else {}
        self._run("configure", configure, env=cflags)

    def _install(self, *variables: str) -> None:
        self.progress("installing", 92.0)
        self._run("make install", ["make", "-s", "install", *variables])
        if (self.tree / "contrib" / "pgbench").is_dir():
            pgbench = ["make", "-s", "-C", "contrib/pgbench", "install", *variables]
            self._run("make install (contrib/pgbench)", pgbench)
        self.progress("build installed", 95.0)

    def _patch_argv(self, strip: int) -> list[str]:
        # --unified: never read the diff as an ed script (which can run commands).
        return [
            "patch",
            f"-p{strip}",
            "--unified",
            f"--directory={self.tree}",
            "--batch",
            "--forward",
            "--no-backup-if-mismatch",
        ]

    def _compile(self) -> None:
        total = max(1, self._count_files("*.c"))
        jobs = str(os.cpu_count() or 1)

        def report() -> None:
            built = min(self._count_files("*.o"), total)  # a few objects have no .c
            self.progress(f"compiling ({built}/{total} files)", 10.0 + 80.0 * min(built / total, 1))

        self._run("make", ["make", "-s", f"-j{jobs}"], on_tick=report)

    def _count_files(self, pattern: str) -> int:
        skipped = [self.tree / directory for directory in UNBUILT_DIRS]
        return sum(
            1
            for path in (self.tree / "src").rglob(pattern)
            if not any(path.is_relative_to(directory) for directory in skipped)
        )

    def _run(
        self,
        step: str,
        argv: list[str],
        stdin_text: str | None = None,
        env: dict[str, str] | None = None,
        on_tick: Callable[[], None] | None = None,
    ) -> None:
        """Run one step, its output appended to the log; BuildFailed when it fails."""
        start = self.log_path.stat().st_size
        with open(self.log_path, "a") as log:
            log.write(f"\n$ {' '.join(argv)}\n")
            log.flush()
            process = self.os_user.start(
                argv,
                self.view(),
                self.tree,
                env=env or {},
                stdin=subprocess.PIPE if stdin_text is not None else subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                text=True,
                start_new_session=True,
            ).process
            if stdin_text is not None and process.stdin is not None:
                process.stdin.write(stdin_text)
                process.stdin.close()
            exit_code = self._wait(process, step, on_tick)
        if exit_code != 0:
            with open(self.log_path, errors="replace") as log:
                log.seek(start)
                output = log.read()
            message = failure_message(exit_code, output, self.tail())
            raise BuildFailed(step, message, host_stopped(exit_code, output))

    def _wait(
        self, process: "subprocess.Popen[Any]", step: str, on_tick: Callable[[], None] | None
    ) -> int:
        deadline = time.monotonic() + STEP_TIMEOUT_S
        while True:
            try:
                return process.wait(timeout=POLL_S)
            except subprocess.TimeoutExpired:
                pass
            cancelled = self.should_cancel()
            if cancelled or time.monotonic() > deadline:
                os.killpg(process.pid, signal.SIGTERM)
                process.wait()
                if cancelled:
                    raise Cancelled(f"cancelled during the source build ({step})")
                raise BuildFailed(step, f"took more than {STEP_TIMEOUT_S} s", transient=True)
            if on_tick is not None:
                on_tick()

    def tail(self, lines: int = TAIL_LINES) -> str:
        """The log's last lines (what a failure message shows)."""
        text = self.log_path.read_text(errors="replace")
        return "\n".join(text.rstrip().splitlines()[-lines:])

    def log_text(self, limit: int) -> str:
        """The whole log, or its last `limit` characters when it is longer."""
        text = self.log_path.read_text(errors="replace")
        return text if len(text) <= limit else f"[log shortened to its end]\n{text[-limit:]}"
