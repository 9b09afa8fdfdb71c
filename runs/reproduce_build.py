"""The part of a reproduce script that builds a source build again from its definition.

A run on a source build (job spec `postgres.build`, agents/contract/builds.py)
cannot be reproduced with a prebuilt release of the same version: its
configure flags and patches are what it measured. The script therefore
fetches the same source (tarball URL or path, or git repository at its ref),
applies the same patches in order with their strip levels, configures with
the same flags and CFLAGS and installs into its work directory, as the agent
did (agents/postgres/source_build.py). The agent's cache keeps the binaries
it built; the script reuses them when they are still there (`recorded_bindir`).
"""

import hashlib
import shlex

from agents.contract.builds import BuildDefinition, BuildSource

# What a build needs on a Debian/Ubuntu machine (README, "Builds from source").
BUILD_PACKAGES = "gcc make libc6-dev pkg-config patch"


def _q(value: object) -> str:
    return shlex.quote(str(value))


def _fetch_lines(source: BuildSource) -> list[str]:
    """Bash that leaves the unpacked source tree in "$src"."""
    location = _q(source["location"])
    if source["kind"] == "git":
        ref = _q(source.get("ref") or "HEAD")
        return [
            f'  git clone --quiet {location} "$src"',
            f'  git -C "$src" checkout --quiet {ref}',
        ]
    if source["kind"] == "url":
        fetch = (
            f"  python3 -c 'import sys, urllib.request; urllib.request.urlretrieve(*sys.argv[1:])' "
            f'{location} "$tarball"'
        )
    elif source["kind"] == "upload":
        # The lab keeps an uploaded tarball; the script cannot fetch it without the lab.
        needed = f"the build used a tarball uploaded to the lab (sha256 {source['location']})"
        fetch = f'  cp "${{SOURCE_TARBALL:?{needed}: set SOURCE_TARBALL to that file}}" "$tarball"'
    else:
        fetch = f'  cp {location} "$tarball"'
    return [
        "  tarball=$workdir/source/source.tar",
        fetch,
        '  mkdir -p "$src"',
        '  tar -xf "$tarball" -C "$src" --strip-components=1',
    ]


def _patch_lines(build: BuildDefinition) -> list[str]:
    lines = []
    for patch in build["patches"]:
        end = "BENCHLAB_PATCH_" + hashlib.sha256(patch["diff"].encode()).hexdigest()[:16]
        lines += [
            f'  echo "applying patch {patch["name"]}" >&2',
            f"  patch --batch --forward -p{int(patch['strip'])} -d \"$src\" <<'{end}' >&2",
            patch["diff"].rstrip("\n"),
            end,
        ]
    return lines


def source_build_function(build: BuildDefinition) -> str:
    """`build_from_source`: prints the bindir of the build it makes in "$workdir/pgbuild"."""
    flags = " ".join(_q(flag) for flag in build["configure_flags"])
    cflags = f"CFLAGS={_q(build['cflags'])} " if build["cflags"] else ""
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
