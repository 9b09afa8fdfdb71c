"""A build from source (job spec `postgres.build`) and what the agent reports of it.

`check_build_definition` validates the definition a lab user gives: where the
source comes from, configure flags and CFLAGS (from allow-lists,
agents/contract/builds/flags.py), patches (which may name only files inside the
source tree, agents/contract/builds/source_tree.py). Pure Python: the web tier calls
it before it queues anything, the agent again before it builds. Whether the
agent *allows* that source, and patches at all, is the agent's own decision
(agents/postgres/installs/source_build.py); nothing here widens it.
"""

import re
from typing import Literal, NotRequired, TypedDict, get_args

from agents.contract.builds.flags import check_cflags, check_configure_flag
from agents.contract.builds.source_tree import UnsafeSource, patch_file_names, stripped
from agents.contract.errors import JobError

SourceKind = Literal["url", "path", "git", "upload"]
SOURCE_KINDS: tuple[SourceKind, ...] = get_args(SourceKind)
MAX_PATCHES = 20
MAX_FLAGS = 50
MAX_STRIP = 5
PATCH_NAME_PATTERN = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
SHA256_PATTERN = re.compile(r"^[0-9a-f]{64}$")
GIT_REF_PATTERN = re.compile(r"^[A-Za-z0-9_./-]{1,100}$")


class BuildSource(TypedDict):
    """Where the source comes from: a tarball URL or path, a git repository at `ref`, or a
    tarball uploaded to the lab (`location` is its sha256; runs/services/uploads.py)."""

    kind: SourceKind
    location: str
    ref: NotRequired[str | None]
    # git only: the agent lists the first-parent commits after this ref up to `ref` in its
    # record (`BuildRecord.commits`), the range a bisection halves (runs/bisection/).
    list_from: NotRequired[str | None]


class CommitInfo(TypedDict):
    """One git commit as the agent read it from the repository it builds from."""

    sha: str
    parent: str
    author_date: str
    subject: str


class BuildPatch(TypedDict):
    """One unified diff, applied with `patch -p<strip>` in the order listed; only on an agent
    whose local config sets allow_user_patches."""

    name: str
    diff: str
    strip: int


class BuildDefinition(TypedDict):
    """Everything that decides what a source build produces (the cache key hashes it)."""

    source: BuildSource
    configure_flags: list[str]
    patches: list[BuildPatch]
    cflags: str | None


class BuildRecord(TypedDict):
    """What the agent reports of a source build (the result document's `build`).

    `key` is the cache key, `reused` says whether this job compiled, `seconds`
    how long the original build took, `log` its configure/make output (the
    tail when it was long) and `failed_step` the step that failed, if any.
    """

    key: str
    definition: BuildDefinition
    source_digest: str
    compiler: str
    patches: list[dict[str, str]]
    reused: bool
    seconds: float | None
    failed_step: str | None
    log: str
    # git sources: the commit built, and the range `source.list_from` asked for (oldest first).
    commit: NotRequired[CommitInfo]
    commits: NotRequired[list[CommitInfo]]


def _invalid(field: str, message: str) -> JobError:
    return JobError("invalid_spec", message, field=f"postgres.build.{field}")


def check_build_definition(doc: object) -> BuildDefinition:
    """The definition with defaults filled in, or JobError naming the field to fix."""
    if not isinstance(doc, dict):
        raise JobError(
            "invalid_spec",
            "a source build needs postgres.build: {source, configure_flags, patches, cflags}",
            field="postgres.build",
        )
    known = {"source", "configure_flags", "patches", "cflags"}
    unknown = set(doc) - known
    if unknown:
        raise _invalid(sorted(unknown)[0], f"unknown field; known: {', '.join(sorted(known))}")
    return {
        "source": _check_source(doc.get("source")),
        "configure_flags": _check_flags(doc.get("configure_flags") or []),
        "patches": [_check_patch(p, i) for i, p in enumerate(_patch_list(doc.get("patches")))],
        "cflags": check_cflags(doc.get("cflags")),
    }


def _check_source(source: object) -> BuildSource:
    if not isinstance(source, dict) or source.get("kind") not in SOURCE_KINDS:
        raise _invalid("source.kind", f"must be one of {', '.join(SOURCE_KINDS)}")
    location = source.get("location")
    if not isinstance(location, str) or not location.strip() or "\n" in location:
        raise _invalid("source.location", "must be the tarball's URL or path, or the repository")
    kind, ref, list_from = source["kind"], source.get("ref"), source.get("list_from")
    if kind == "git" and not is_git_ref(ref):
        raise _invalid("source.ref", "a git source needs a branch, tag or commit, e.g. REL_14_3")
    if list_from is not None and (kind != "git" or not is_git_ref(list_from)):
        raise _invalid("source.list_from", "must be a branch, tag or commit of a git source")
    if kind == "path" and not location.startswith("/"):
        raise _invalid("source.location", "a path on the agent host must be absolute")
    if kind == "upload" and not SHA256_PATTERN.match(location):
        raise _invalid("source.location", "an uploaded tarball is named by its sha256")
    if kind == "url" and not re.match(r"^(https?|file)://", location):
        raise _invalid("source.location", "a URL starts with https://, http:// or file://")
    checked: BuildSource = {
        "kind": kind,
        "location": location.strip(),
        "ref": ref if kind == "git" else None,
    }
    if list_from is not None:
        checked["list_from"] = list_from
    return checked


def is_git_ref(ref: object) -> bool:
    """A branch, tag or commit name git cannot read as an option or a range: the pattern's
    characters, not starting with `-` or `/`, without `..` (git would read a range)."""
    return (
        isinstance(ref, str)
        and GIT_REF_PATTERN.fullmatch(ref) is not None
        and not ref.startswith(("-", "/"))
        and ".." not in ref
    )


def _check_flags(flags: object) -> list[str]:
    if not isinstance(flags, list) or len(flags) > MAX_FLAGS:
        raise _invalid("configure_flags", f"must list up to {MAX_FLAGS} configure flags")
    return [
        check_configure_flag(flag, f"configure_flags[{index}]") for index, flag in enumerate(flags)
    ]


def _patch_list(patches: object) -> list[object]:
    if patches is None:
        return []
    if not isinstance(patches, list) or len(patches) > MAX_PATCHES:
        raise _invalid("patches", f"must list up to {MAX_PATCHES} patches")
    return patches


def _check_patch(patch: object, index: int) -> BuildPatch:
    field = f"patches[{index}]"
    if not isinstance(patch, dict) or set(patch) - {"name", "diff", "strip"}:
        raise _invalid(field, "a patch is {name, diff, strip}")
    name, diff, strip = patch.get("name"), patch.get("diff"), patch.get("strip", 1)
    if not isinstance(name, str) or not PATCH_NAME_PATTERN.fullmatch(name):
        raise _invalid(f"{field}.name", "must be 1-64 letters, digits, _ . or -")
    if not isinstance(diff, str) or "\n+++ " not in f"\n{diff}":
        raise _invalid(f"{field}.diff", "must be a unified diff (with --- and +++ lines)")
    if isinstance(strip, bool) or not isinstance(strip, int) or not 0 <= strip <= MAX_STRIP:
        raise _invalid(f"{field}.strip", f"must be a strip level from 0 to {MAX_STRIP}")
    try:
        changed = [stripped(header, strip) for header in patch_file_names(diff)]
    except UnsafeSource as error:
        raise _invalid(
            f"{field}.diff", f"{error}; a patch may change only files in the source tree"
        ) from error
    if not any(changed):
        raise _invalid(f"{field}.diff", f"names no file once -p{strip} strips its headers")
    return {"name": name, "diff": diff, "strip": strip}
