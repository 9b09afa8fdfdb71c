"""What may enter a build's source tree: the files a patch names, the members of a tarball.

A patch may change only files inside the tree: every name it gives (the ---
and +++ headers, git's rename and copy lines) is relative, without `..`, and
it creates no symlinks; only unified diffs are accepted (`patch --unified`
never runs an ed script). A tarball may hold only regular files, directories
and links that stay inside the tree (no `..`, no absolute targets), at most
UNPACKED_LIMIT_BYTES in all: `bounded_members` checks each member as its
header is read, so a compressed bomb is refused before its data is written.
The lab checks both when a build is saved or a tarball uploaded, the agent
again before it patches or unpacks.
"""

import re
import tarfile
from collections.abc import Iterator

# A PostgreSQL release unpacks to about 150 MB; a source tree four times that is not one.
UNPACKED_LIMIT_BYTES = 512 * 1024 * 1024
MAX_MEMBERS = 100_000
DEV_NULL = "/dev/null"
HUNK_HEADER = re.compile(r"@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
# git's extended header lines that name a file, and those that make a symlink or a binary.
GIT_NAME_LINES = ("rename from ", "rename to ", "copy from ", "copy to ")
GIT_REFUSED_LINES = ("new file mode 120000", "new mode 120000", "old mode 120000", "GIT binary")
SAFE_NAME = re.compile(r"[A-Za-z0-9_.+/@,=-]+")


class UnsafeSource(ValueError):
    """A patch or tarball would write outside the source tree (or too much); the message says
    what and where."""


def patch_file_names(diff: str) -> list[str]:
    """Every file name a unified diff gives, in order; UnsafeSource for anything else.

    Hunk bodies are skipped by their line counts, so a removed line starting with
    `-- ` is not read as a header.
    """
    names: list[str] = []
    old = new = 0
    for number, line in enumerate(diff.split("\n"), 1):
        line = line.removesuffix("\r")
        if old > 0 or new > 0:
            old, new = _hunk_line(line, old, new, number)
            continue
        hunk = HUNK_HEADER.match(line)
        if hunk:
            old, new = int(hunk[1] or 1), int(hunk[2] or 1)
        elif line.startswith(("--- ", "+++ ", "Index: ")):
            names.append(_header_name(line.split(" ", 1)[1], number))
        elif line.startswith("diff --git "):
            names += [_header_name(name, number) for name in line.split(" ")[2:]]
        elif line.startswith(GIT_NAME_LINES):
            names.append(_header_name(line.split(" ", 2)[2], number))
        elif line.startswith(GIT_REFUSED_LINES):
            raise UnsafeSource(f"line {number} makes a symlink or binary file: {line[:60]}")
        elif line.startswith("*** "):
            raise UnsafeSource(
                f"line {number} starts a context diff: write a unified diff (diff -u)"
            )
    return names


def _hunk_line(line: str, old: int, new: int, number: int) -> tuple[int, int]:
    """The old and new line counts left in a hunk after `line`."""
    tag = line[:1]
    if tag in (" ", ""):  # an empty line is an empty context line whose space was trimmed
        return old - 1, new - 1
    if tag == "-":
        return old - 1, new
    if tag == "+":
        return old, new - 1
    if tag == "\\":  # "\ No newline at end of file"
        return old, new
    raise UnsafeSource(f"line {number} breaks off a hunk: {line[:60]!r}")


def _header_name(text: str, number: int) -> str:
    """The file name of a header (up to the tab before its date), if it stays in the tree."""
    name = text.split("\t", 1)[0].rstrip()
    if name == DEV_NULL:
        return name
    if not SAFE_NAME.fullmatch(name):
        raise UnsafeSource(
            f"line {number} names {name[:80]!r}: file names may hold letters, digits and "
            "_ . + / @ , = - only (no spaces or quotes)"
        )
    check_relative(name, f"line {number}")
    return name


def check_relative(name: str, where: str) -> None:
    """UnsafeSource unless `name` is a relative path without `..` components."""
    if name.startswith("/"):
        raise UnsafeSource(f"{where} names {name!r}, an absolute path: name files in the tree")
    if ".." in name.split("/"):
        raise UnsafeSource(f"{where} names {name!r}, which climbs out of the tree with ..")


def stripped(name: str, strip: int) -> str | None:
    """`name` with `strip` leading components removed, as `patch -p<strip>` reads it."""
    if name == DEV_NULL:
        return None
    parts = [part for part in name.split("/") if part]
    return "/".join(parts[strip:]) or None


def bounded_members(
    archive: tarfile.TarFile, limit: int = UNPACKED_LIMIT_BYTES
) -> Iterator[tarfile.TarInfo]:
    """The archive's members in order, each checked as its header is read.

    UnsafeSource for a member with an absolute name or `..`, a link leading out of
    the tree, a device or FIFO, more than MAX_MEMBERS members, or once the sizes
    add up to more than `limit` bytes (before that member's data is read).
    """
    total = 0
    for count, member in enumerate(archive, 1):
        _check_member(member)
        total += member.size
        if total > limit:
            raise UnsafeSource(
                f"the tarball unpacks to more than {limit // 2**20} MB (at {member.name!r}): "
                "a PostgreSQL source tree is far smaller"
            )
        if count > MAX_MEMBERS:
            raise UnsafeSource(f"the tarball holds more than {MAX_MEMBERS} files")
        yield member


def _check_member(member: tarfile.TarInfo) -> None:
    where = f"tarball member {member.name[:80]!r}"
    check_relative(member.name, "a tarball member")
    if member.issym():
        # Without `..` or a leading /, a link points at or below its own directory, which is
        # in the tree (a lexical check of `..` would miss a chain of links).
        check_relative(member.linkname, f"{where} (a symlink)")
    elif member.islnk():
        check_relative(member.linkname, f"{where} (a hard link)")
    elif not (member.isreg() or member.isdir()):
        raise UnsafeSource(f"{where} is a device or FIFO: a source tree has none")
