"""PostgreSQL built from source by the agent, once per host and cache key.

A build runs the source's own scripts (configure, make), so it happens only
when the agent's local config allows source builds and the source is one it
lists (`build_sources`: URL prefixes, directories, git repositories, and
`upload` for tarballs uploaded to the lab; a git repository builds in a kept tree,
agents/postgres/installs/kept_tree.py), and applies a definition's patches
only when it also sets `allow_user_patches`; the refusal comes before anything
is fetched. A tarball is unpacked member by member, each checked and the total
bounded (agents/contract/builds/source_tree.py). Everything runs as the agent's
unprivileged OS user. The result lands in `<cache>/builds/<key>/`, where the key
digests the source, configure flags, patches, CFLAGS and the compiler version,
and a second job with the same key reuses it. A file lock on the key keeps two
jobs on one host from building it at once.
"""

import hashlib
import json
import logging
import os
import shutil
import tarfile
import tempfile
import time
import urllib.request
from collections.abc import Callable
from functools import partial
from pathlib import Path

import redis

from agents.config import AgentConfig
from agents.contract.builds.definition import (
    BuildDefinition,
    BuildRecord,
    BuildSource,
    check_build_definition,
)
from agents.contract.builds.source_tree import UnsafeSource, bounded_members
from agents.contract.errors import JobError
from agents.contract.host_allows import how_to_allow_source, how_to_enable
from agents.contract.wire import source_upload_key
from agents.postgres.installs.build_steps import (
    BuildFailed,
    BuildSteps,
    check_prerequisites,
    compiler_version,
)
from agents.postgres.installs.cache import (
    RECORD_FILE,
    kill_leftover_builds,
    locked,
    new_record,
    seal_install,
    store_entry,
)
from agents.postgres.installs.inventory import Install, Progress, inspect_bindir, noop
from agents.postgres.installs.kept_tree import ensure_git_build
from agents.postgres.osuser import OsUser, chown_tree, make_dirs

logger = logging.getLogger(__name__)

LOG_LIMIT = 512 * 1024
CHUNK = 1024 * 1024


def check_allowed(definition: BuildDefinition, config: AgentConfig) -> None:
    """Refuse a build this agent's local config does not allow (before anything runs)."""
    source = definition["source"]
    if not config.allow_source_builds:
        raise JobError(
            "build_refused",
            "this agent does not build from source: " + how_to_allow_source(source["location"]),
            field="postgres.build.source",
        )
    if not any(_source_allowed(source, allowed) for allowed in config.build_sources):
        allowed_text = ", ".join(config.build_sources) or "none"
        raise JobError(
            "build_refused",
            f"this agent does not build from {source['location']}: it allows {allowed_text}; "
            + how_to_allow_source(source["location"]),
            field="postgres.build.source.location",
        )
    if definition["patches"] and not config.allow_user_patches:
        raise JobError(
            "build_refused",
            "this agent does not apply patches from the lab: remove the patches, or "
            + how_to_enable("allow_user_patches"),
            field="postgres.build.patches",
        )


def _source_allowed(source: BuildSource, allowed: str) -> bool:
    location = source["location"]
    if source["kind"] == "path":
        resolved, directory = Path(location).resolve(), Path(allowed).resolve()
        return allowed.startswith("/") and resolved.is_relative_to(directory)
    if source["kind"] == "upload":
        return allowed == "upload"
    if source["kind"] == "git":
        return location == allowed
    # A URL must start with the allowed prefix and may not climb out of it with "..".
    return "://" in allowed and location.startswith(allowed) and "/.." not in location


def build_key(definition: BuildDefinition, source_digest: str, compiler: str) -> str:
    """The cache key: a digest of the source, flags, patches, CFLAGS and compiler."""
    material = {
        "source_digest": source_digest,
        "configure_flags": definition["configure_flags"],
        "patches": [[p["name"], p["strip"], p["diff"]] for p in definition["patches"]],
        "cflags": definition["cflags"],
        "compiler": compiler,
    }
    text = json.dumps(material, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def builds_dir(cache_dir: Path) -> Path:
    return cache_dir / "builds"


def ensure_build(
    definition: BuildDefinition,
    config: AgentConfig,
    os_user: OsUser,
    progress: Progress = noop,
    should_cancel: Callable[[], bool] = lambda: False,
) -> tuple[Install, BuildRecord]:
    """The install built from `definition`, building it first unless the cache has it.

    Raises JobError(build_refused) before anything runs when the agent does not
    allow the source, JobError(build_prerequisites) naming the Debian packages
    to install, and BuildFailed (a JobError carrying the build record with its
    log) when fetching, patching, configure, make or make install fails.
    """
    check_build_definition(definition)  # the lab checked it; this agent checks it again
    check_allowed(definition, config)
    check_prerequisites(definition)
    compiler = compiler_version()
    cache = builds_dir(config.cache_dir)
    make_dirs(cache)
    if definition["source"]["kind"] == "git":
        target, record = ensure_git_build(
            definition,
            config,
            os_user,
            compiler,
            partial(build_key, definition, compiler=compiler),
            progress,
            should_cancel,
        )
        return _cached_install(target, record)
    progress(f"fetching the source from {definition['source']['location']}", 0.0)
    with tempfile.TemporaryDirectory(dir=cache, prefix=".fetch-") as scratch:
        source_path, digest = fetch_source(definition["source"], Path(scratch), config.redis_url)
        key = build_key(definition, digest, compiler)
        record = new_record(key, definition, digest, compiler)
        with locked(cache / f"{key}.lock"):
            target = cache / key
            kill_leftover_builds(cache.glob(f".work-{key}-*"), f"build {key}", remove=True)
            if not (target / RECORD_FILE).exists():
                _build(source_path, target, record, os_user, progress, should_cancel)
            return _cached_install(target, record)


def _cached_install(target: Path, record: BuildRecord) -> tuple[Install, BuildRecord]:
    if target.stat().st_uid != os.geteuid():
        # Built before builds were sealed: left to the job's OS user, who could rewrite it.
        seal_install(target)
    stored = json.loads((target / RECORD_FILE).read_text())
    record["seconds"] = stored["seconds"]
    if record["reused"]:
        record["log"] = (target / "build.log").read_text(errors="replace")
    install = inspect_bindir(target / "bin", "build")
    if install is None:
        raise JobError("build_failed", f"the cached build in {target} does not run")
    return install, record


def _build(
    source: Path,
    target: Path,
    record: BuildRecord,
    os_user: OsUser,
    progress: Progress,
    should_cancel: Callable[[], bool],
) -> None:
    """Unpack, patch, configure, make and install into `target` as `os_user`."""
    record["reused"] = False
    started = time.monotonic()
    if target.exists():
        shutil.rmtree(target)
    work = Path(tempfile.mkdtemp(dir=target.parent, prefix=f".work-{target.name}-"))
    try:
        work.chmod(0o755)
        tree = _unpack(source, work)
        target.mkdir(mode=0o755)
        chown_tree(work, os_user)
        chown_tree(target, os_user)
        steps = BuildSteps(tree, target, os_user, progress, should_cancel)
        try:
            steps.run_all(record["definition"])
        finally:
            record["log"] = steps.log_text(LOG_LIMIT)
        store_entry(target, record, started)
    except BuildFailed as failure:
        record["failed_step"] = failure.step
        failure.record = record
        shutil.rmtree(target, ignore_errors=True)
        raise
    finally:
        shutil.rmtree(work, ignore_errors=True)


def fetch_source(source: BuildSource, scratch: Path, redis_url: str) -> tuple[Path, str]:
    """The source tarball in `scratch`, and its digest (a git source builds in its kept
    tree, agents/postgres/installs/kept_tree.py).

    An uploaded tarball is read from the lab's Redis (`redis_url`) and must match its sha256.
    """
    tarball = scratch / "source.tar"
    if source["kind"] == "upload":
        return _fetch_upload(source["location"], tarball, redis_url)
    try:
        if source["kind"] == "path":
            shutil.copyfile(source["location"], tarball)
        else:
            with urllib.request.urlopen(source["location"], timeout=60) as response:
                with open(tarball, "wb") as out:
                    shutil.copyfileobj(response, out, CHUNK)
    except OSError as error:
        message = f"could not fetch {source['location']}: {error}"
        raise BuildFailed("fetch", message, transient=True) from error
    return tarball, _file_digest(tarball)


def _fetch_upload(sha256: str, tarball: Path, redis_url: str) -> tuple[Path, str]:
    try:
        data = redis.Redis.from_url(redis_url).get(source_upload_key(sha256))
    except redis.RedisError as error:
        message = f"could not read the uploaded source: {error}"
        raise BuildFailed("fetch", message, transient=True) from error
    if not isinstance(data, bytes):
        raise BuildFailed(
            "fetch",
            f"the lab holds no uploaded source {sha256} for this job (its build was deleted, "
            "or the job waited longer than the lab keeps it ready): queue the run again",
            transient=True,
        )
    if hashlib.sha256(data).hexdigest() != sha256:
        raise BuildFailed("fetch", f"the uploaded source {sha256} does not match its digest")
    tarball.write_bytes(data)
    return tarball, sha256


def _file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def _unpack(source: Path, work: Path) -> Path:
    """The source tree in `work`, the tarball unpacked."""
    try:
        with tarfile.open(source) as archive:
            # Each member is checked and counted as its header is read, before its data is
            # written; the data filter is a second wall.
            for member in bounded_members(archive):
                archive.extract(member, work, filter="data")
    except UnsafeSource as error:
        raise BuildFailed("fetch", f"the source tarball was refused: {error}") from error
    except (tarfile.TarError, OSError) as error:
        raise BuildFailed("fetch", f"the source is not a readable tarball: {error}") from error
    roots = [path for path in work.iterdir() if (path / "configure").exists()]
    if len(roots) != 1 or roots[0].is_symlink():
        raise BuildFailed("fetch", "the tarball holds no single source tree with configure")
    return roots[0]


def cached_builds(cache_dir: Path) -> list[dict[str, object]]:
    """Every finished build in the cache: key, version, definition, build seconds."""
    listing = []
    for record_path in sorted(builds_dir(cache_dir).glob(f"*/{RECORD_FILE}")):
        record = json.loads(record_path.read_text())
        install = inspect_bindir(record_path.parent / "bin", "build")
        listing.append(
            {
                "key": record["key"],
                "version": install.version if install else None,
                "bindir": str(record_path.parent / "bin"),
                "definition": record["definition"],
                "compiler": record["compiler"],
                "seconds": record["seconds"],
            }
        )
    return listing
