"""The part of a reproduce script that builds a source build again from its definition,
and the three ways user text enters a reproduce script (runs/reproduce/script.py says why):
`quoted` (one shell word), `decoded` (exact text from base64) and `shown` /
`comment_lines` (text in a comment, for the reader only).

A run on a source build (job spec `postgres.build`, agents/contract/builds/definition.py)
cannot be reproduced with a prebuilt release of the same version: its
configure flags and patches are what it measured. The script therefore
fetches the same source (tarball URL or path, or git repository at its ref),
applies the same patches in order with their strip levels, configures with
the same flags and CFLAGS and installs into its work directory, as the agent
did (agents/postgres/installs/source_build.py). The agent's cache keeps the binaries
it built; the script reuses them when they are still there (`recorded_bindir`).
"""

import base64
import shlex
import unicodedata

from agents.contract.builds.definition import BuildDefinition, BuildSource

# What a build needs on a Debian/Ubuntu machine (README, "Builds from source").
BUILD_PACKAGES = "gcc make libc6-dev pkg-config patch"
# Unicode categories a comment shows escaped: controls (newline, CR, ESC), formats (bidi
# overrides that reorder what the reader sees), surrogates, private use, unassigned, and
# the line and paragraph separators.
ESCAPED_IN_COMMENTS = ("Cc", "Cf", "Cs", "Co", "Cn", "Zl", "Zp")


def quoted(value: object) -> str:
    """`value` as one shell word in which nothing expands: single-quoted (`'` as `'\\''`), or,
    when it holds a character comments escape, ANSI-C quoted with those characters' bytes as
    `\\xHH`, so that no raw control character (CR, ESC) reaches the reader's terminal."""
    text = str(value)
    if all(_shown_as_is(char) for char in text):
        return shlex.quote(text)
    return "$'" + "".join(_ansi_c(char) for char in text) + "'"


def decoded(text: str) -> str:
    """A pipeline printing `text` byte for byte from its base64, which no text can end early."""
    return f"printf '%s' '{base64.b64encode(text.encode()).decode()}' | base64 -d"


def shown(value: object) -> str:
    """`value` fit for one comment line: a character of ESCAPED_IN_COMMENTS but tab as its
    Python escape (`\\n`, `\\x1b`, `\\u202e`), so it can neither end the comment nor hide text."""
    return "".join(
        char if _shown_as_is(char) else char.encode("unicode_escape").decode()
        for char in str(value)
    )


def comment_lines(text: str, indent: str = "") -> list[str]:
    """Comment lines that show `text` to the reader, one per line of it."""
    return [f"{indent}#   {shown(line)}" for line in text.split("\n")]


def _shown_as_is(char: str) -> bool:
    return char == "\t" or unicodedata.category(char) not in ESCAPED_IN_COMMENTS


def _ansi_c(char: str) -> str:
    """`char` inside bash's $'...'."""
    if char in "\\'":
        return "\\" + char
    if _shown_as_is(char):
        return char
    return "".join(f"\\x{byte:02x}" for byte in char.encode())


def _fetch_lines(source: BuildSource) -> list[str]:
    """Bash that leaves the unpacked source tree in "$src"."""
    location = quoted(source["location"])
    if source["kind"] == "git":
        ref = quoted(source.get("ref") or "HEAD")
        return [
            f'  git clone --quiet {location} "$src"',
            f'  git -C "$src" checkout --quiet {ref}',
        ]
    if source["kind"] == "url":
        fetch = [
            f"  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' "
            f'{location} "$tarball"'
        ]
    elif source["kind"] == "upload":
        # The lab keeps an uploaded tarball; the script cannot fetch it without the lab.
        needed = f"the build used a tarball uploaded to the lab (sha256 {source['location']})"
        fetch = [
            f"  local needed={quoted(needed + ': set SOURCE_TARBALL to that file')}",
            '  cp "${SOURCE_TARBALL:?$needed}" "$tarball"',
        ]
    else:
        fetch = [f'  cp {location} "$tarball"']
    return [
        "  tarball=$workdir/source/source.tar",
        *fetch,
        '  mkdir -p "$src"',
        '  tar -xf "$tarball" -C "$src" --strip-components=1',
    ]


def _patch_lines(build: BuildDefinition) -> list[str]:
    lines = []
    for patch in build["patches"]:
        lines += [
            f"  echo applying patch {quoted(patch['name'])} >&2",
            *comment_lines(patch["diff"].rstrip("\n"), indent="  "),
            f"  {decoded(patch['diff'])} |",
            f'    patch --batch --forward -p{int(patch["strip"])} -d "$src" >&2',
        ]
    return lines


def source_build_function(build: BuildDefinition) -> str:
    """`build_from_source`: prints the bindir of the build it makes in "$workdir/pgbuild"."""
    flags = " ".join(quoted(flag) for flag in build["configure_flags"])
    cflags = f"CFLAGS={quoted(build['cflags'])} " if build["cflags"] else ""
    body = [
        "build_from_source() {",
        "  local src=$workdir/source/tree prefix=$workdir/pgbuild",
        '  if [[ -x $prefix/bin/postgres ]]; then echo "$prefix/bin"; return; fi',
        f'  echo "building PostgreSQL from source (needs: {BUILD_PACKAGES})" >&2',
        '  rm -rf "$workdir/source"',
        '  mkdir -p "$workdir/source"',
        *_fetch_lines(build["source"]),
        *_patch_lines(build),
        '  echo "configuring" >&2',
        f'  (cd "$src" && {cflags}./configure --prefix="$prefix" {flags}) '
        '>"$workdir/source/configure.log" 2>&1',
        '  echo "compiling with $(nproc) jobs" >&2',
        '  make -C "$src" -j"$(nproc)" >"$workdir/source/make.log" 2>&1',
        '  make -C "$src" install >>"$workdir/source/make.log" 2>&1',
        "  if [[ ! -x $prefix/bin/pgbench && -d $src/contrib/pgbench ]]; then",
        '    make -C "$src/contrib/pgbench" install >>"$workdir/source/make.log" 2>&1',
        "  fi",
        '  chmod -R a+rX "$prefix"',
        '  echo "$prefix/bin"',
        "}",
    ]
    return "\n".join(body) + "\n"
