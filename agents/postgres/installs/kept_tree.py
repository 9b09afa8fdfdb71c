"""Builds from a git repository in a kept tree: a step of a bisection recompiles only what
its commit changed.

Per repository and build options (configure flags, CFLAGS, patches, compiler) the agent
keeps, under `<cache>/trees/<key>/`:

- `git/`: a bare mirror of the repository, the agent's own; the agent fetches into it,
  resolves refs and lists commits there (git run by the agent, never through a shell,
  every ref checked by `is_git_ref` and passed after `--end-of-options`);
- `work/src/`: the work tree, the OS user's; the build checks a commit out there with
  `git read-tree -u` run as the OS user in its sandbox, which sees the mirror read-only
  (so nothing the build writes is ever read by git running as the agent), then makes
  what changed and installs into the build cache's entry for that commit
  (`<cache>/builds/<key>/`, keyed like every source build, sealed after).

One build at a time per kept tree (a file lock); the cache entry's own lock as for
tarball builds. A commit that fails to build leaves the tree as it is: the next commit
checks out over it.
"""

import hashlib
import json
import shutil
import time
from collections.abc import Callable
from pathlib import Path

from agents.config import AgentConfig
from agents.contract.builds.definition import (
    BuildDefinition,
    BuildRecord,
    CommitInfo,
    is_git_ref,
)
from agents.contract.errors import JobError
from agents.postgres.installs.build_steps import BuildFailed, BuildSteps, run_git
from agents.postgres.installs.cache import (
    RECORD_FILE,
    kill_leftover_builds,
    locked,
    new_record,
    store_entry,
)
from agents.postgres.installs.inventory import Progress
from agents.postgres.osuser import OsUser, chown_tree, make_dirs

# A bisection halves at most this many commits (twelve steps).
MAX_LISTED_COMMITS = 4096
LOG_LIMIT = 512 * 1024
COMMIT_FORMAT = "%H%x00%P%x00%aI%x00%s"


def trees_dir(cache_dir: Path) -> Path:
    return cache_dir / "trees"


def tree_key(definition: BuildDefinition, compiler: str) -> str:
    """The kept tree of a repository and the options a configured tree depends on."""
    material = {
        "location": definition["source"]["location"],
        "configure_flags": definition["configure_flags"],
        "patches": [[p["name"], p["strip"], p["diff"]] for p in definition["patches"]],
        "cflags": definition["cflags"],
        "compiler": compiler,
    }
    return hashlib.sha256(json.dumps(material, sort_keys=True).encode()).hexdigest()[:24]


class KeptTree:
    """One kept tree: its mirror, its work tree, and the builds made from it."""

    def __init__(self, root: Path, location: str) -> None:
        self.root = root
        self.location = location
        self.git_dir = root / "git"
        self.work = root / "work"
        self.tree = self.work / "src"

    def git(self, *args: str) -> str:
        """git on the mirror, as the agent; BuildFailed(fetch) when it fails."""
        return run_git([f"--git-dir={self.git_dir}", *args])

    def update(self) -> None:
        """Clone the repository into the mirror the first time, fetch into it after."""
        if not (self.git_dir / "HEAD").exists():
            run_git(["clone", "--quiet", "--bare", "--", self.location, str(self.git_dir)])
            return
        refs = ["+refs/heads/*:refs/heads/*", "+refs/tags/*:refs/tags/*"]
        self.git("fetch", "--quiet", "--force", "--prune", "origin", *refs)

    def resolve(self, ref: str, field: str) -> str:
        """The commit `ref` names; JobError naming `field` when it names none."""
        if not is_git_ref(ref):
            raise JobError("invalid_spec", f"{ref!r} is not a git ref", field=field)
        try:
            named = self.git("rev-parse", "--verify", "--end-of-options", f"{ref}^{{commit}}")
        except BuildFailed as error:
            raise JobError(
                "invalid_spec",
                f"{self.location} has no commit named {ref!r}",
                field=field,
            ) from error
        return named.strip()

    def commit_info(self, commit: str) -> CommitInfo:
        """The commit's hash, first parent, author date and subject (`commit`: a hash)."""
        return _parsed(self.git("log", "-1", f"--format={COMMIT_FORMAT}", commit).rstrip("\n"))

    def first_parent_range(self, start: str, end: str) -> list[CommitInfo]:
        """The first-parent commits after `start` up to `end`, oldest first."""
        field = "postgres.build.source.list_from"
        if not self._is_ancestor(start, end):
            message = f"{start[:12]} is not an ancestor of {end[:12]}: give an older good ref"
            raise JobError("invalid_spec", message, field=field)
        text = self.git(
            "log", "--first-parent", f"--max-count={MAX_LISTED_COMMITS + 1}",
            f"--format={COMMIT_FORMAT}", f"^{start}", end,
        )  # fmt: skip
        commits = [_parsed(line) for line in text.splitlines() if line]
        if len(commits) > MAX_LISTED_COMMITS:
            message = f"the range holds more than {MAX_LISTED_COMMITS} commits: narrow it"
            raise JobError("invalid_spec", message, field=field)
        return commits[::-1]

    def _is_ancestor(self, start: str, end: str) -> bool:
        try:
            self.git("merge-base", "--is-ancestor", start, end)
        except BuildFailed:
            return False
        return True


def _parsed(line: str) -> CommitInfo:
    sha, parents, date, subject = line.split("\0", 3)
    return {"sha": sha, "parent": parents.split(" ")[0], "author_date": date, "subject": subject}


def ensure_git_build(
    definition: BuildDefinition,
    config: AgentConfig,
    os_user: OsUser,
    compiler: str,
    key_of: Callable[[str], str],
    progress: Progress,
    should_cancel: Callable[[], bool],
) -> tuple[Path, BuildRecord]:
    """The cache entry holding `definition`'s commit, built in the kept tree unless cached.

    `key_of` gives a commit's cache key. Returns the entry and a record with `commit`
    (and `commits` when the source has `list_from`); BuildFailed when a step fails.
    """
    source = definition["source"]
    key_tree = tree_key(definition, compiler)
    make_dirs(trees_dir(config.cache_dir))
    kept = KeptTree(trees_dir(config.cache_dir) / key_tree, source["location"])
    progress(f"fetching {source['location']} into the kept tree", 0.0)
    with locked(trees_dir(config.cache_dir) / f"{key_tree}.lock"):
        kill_leftover_builds([kept.root], f"kept tree {key_tree}", remove=False)
        kept.root.mkdir(mode=0o755, exist_ok=True)
        kept.update()
        commit = kept.resolve(source.get("ref") or "HEAD", "postgres.build.source.ref")
        record = new_record(key_of(f"git:{commit}"), definition, f"git:{commit}", compiler)
        record["commit"] = kept.commit_info(commit)
        if source.get("list_from"):
            start = kept.resolve(str(source.get("list_from")), "postgres.build.source.list_from")
            record["commits"] = kept.first_parent_range(start, commit)
        builds = config.cache_dir / "builds"
        make_dirs(builds)
        with locked(builds / f"{record['key']}.lock"):
            target = builds / record["key"]
            if not (target / RECORD_FILE).exists():
                _build(kept, commit, target, record, os_user, progress, should_cancel)
        return target, record


def _build(
    kept: KeptTree,
    commit: str,
    target: Path,
    record: BuildRecord,
    os_user: OsUser,
    progress: Progress,
    should_cancel: Callable[[], bool],
) -> None:
    """Check `commit` out in the kept tree, make what changed, install into `target`."""
    record["reused"] = False
    started = time.monotonic()
    if target.exists():
        shutil.rmtree(target)
    if not kept.tree.exists():
        # Given to the OS user once: changing a file's owner changes its ctime, and git
        # would rewrite every file whose stat changed (so make would rebuild everything).
        kept.tree.mkdir(parents=True)
        kept.work.chmod(0o755)
        chown_tree(kept.work, os_user)
    (kept.work / "build.log").unlink(missing_ok=True)
    target.mkdir(mode=0o755)
    chown_tree(target, os_user)
    steps = BuildSteps(
        kept.tree, target, os_user, progress, should_cancel, read_only=(kept.git_dir,)
    )
    try:
        try:
            steps.checkout(kept.git_dir, commit, record["definition"]["patches"])
            steps.run_incremental(record["definition"], kept.work / "prefix")
        finally:
            record["log"] = steps.log_text(LOG_LIMIT)
    except BuildFailed as failure:
        record["failed_step"] = failure.step
        failure.record = record
        shutil.rmtree(target, ignore_errors=True)
        raise
    except BaseException:
        shutil.rmtree(target, ignore_errors=True)
        raise
    store_entry(target, record, started)
