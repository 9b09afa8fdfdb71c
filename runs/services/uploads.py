"""Source tarballs uploaded to the lab for source builds.

An upload is checked before anything is kept: at most SOURCE_UPLOAD_MAX_MB,
within the uploader's SOURCE_UPLOAD_QUOTA_MB, a tarball whose members stay in
the tree and add up to less than the agents unpack
(agents.contract.builds.source_tree), with `configure` at its top. Its bytes are a
file in SOURCE_UPLOAD_DIR named by the sha256, its row a SourceUpload of the
build, and the build's source becomes `{"kind": "upload", "location":
<sha256>}`. The file goes when its last build is deleted.

Agents reach the lab only through Redis, so when a job that builds an upload
is sent, the lab copies the tarball there (`source_upload_ready`) with an
expiry; the agent builds it only when its config lists `upload` among its
build sources, and checks the digest before it unpacks anything.
"""

import hashlib
import logging
import os
import tarfile
import tempfile
from pathlib import Path

from django.conf import settings
from django.contrib.auth.models import User
from django.core.files.uploadedfile import UploadedFile
from django.db import transaction
from django.db.models import Model, Sum
from django.db.models.signals import post_delete
from django.dispatch import receiver

from agents.contract.builds.source_tree import UnsafeSource, bounded_members
from agents.contract.errors import JobError
from agents.contract.spec.document import JobSpec
from runs.agentlink import transport
from runs.models import PgBuild, Run, SourceUpload
from runs.services.errors import Conflict

logger = logging.getLogger(__name__)

CHUNK = 1024 * 1024
EMPTY_DEFINITION: dict[str, object] = {"configure_flags": [], "patches": [], "cflags": None}


def _refused(message: str) -> JobError:
    return JobError("invalid_spec", message, field="file")


def upload_path(sha256: str) -> Path:
    """Where the bytes of the upload with this sha256 are kept."""
    return Path(settings.SOURCE_UPLOAD_DIR) / f"{sha256}.tar"


def source_upload_check(
    upload: "UploadedFile[bytes] | None", user: User | None, replacing: PgBuild | None = None
) -> "UploadedFile[bytes]":
    """The upload, if the lab may keep it for `user` (as the source of `replacing`, whose
    current upload then no longer counts); JobError on `file` saying what to fix."""
    if upload is None:
        raise _refused("send the source tarball as the multipart field `file`")
    limit = settings.SOURCE_UPLOAD_MAX_MB * 2**20
    if upload.size is None or upload.size > limit:
        raise _refused(f"a source tarball may have at most {settings.SOURCE_UPLOAD_MAX_MB} MB")
    used = _quota_used(user, replacing)
    if used + upload.size > settings.SOURCE_UPLOAD_QUOTA_MB * 2**20:
        raise _refused(
            f"your uploads hold {used // 2**20} MB of your {settings.SOURCE_UPLOAD_QUOTA_MB} MB: "
            "delete a build with an uploaded source you no longer need, then upload again"
        )
    _check_release_tarball(upload)
    return upload


def _quota_used(user: User | None, replacing: PgBuild | None) -> int:
    if user is None:
        return 0
    uploads = SourceUpload.objects.filter(created_by=user)
    if replacing is not None and replacing.pk is not None:
        uploads = uploads.exclude(build=replacing)
    return int(uploads.aggregate(total=Sum("size"))["total"] or 0)


def _check_release_tarball(upload: "UploadedFile[bytes]") -> None:
    """A tarball the agents will unpack, with `configure` at its top (read, never written)."""
    upload.seek(0)
    try:
        with tarfile.open(fileobj=upload, mode="r:*") as archive:
            names = [member.name for member in bounded_members(archive)]
    except UnsafeSource as error:
        raise _refused(f"agents would refuse this tarball: {error}") from error
    except (tarfile.TarError, EOFError, OSError) as error:
        raise _refused(f"not a readable tarball: {error}") from error
    finally:
        upload.seek(0)
    if not any(name.count("/") == 1 and name.endswith("/configure") for name in names):
        raise _refused("the tarball has no configure at its top: upload a release tarball")


def source_upload_store(
    build: PgBuild, upload: "UploadedFile[bytes]", user: User | None
) -> SourceUpload:
    """Keep a checked upload as `build`'s source (replacing an earlier one); its row.

    Conflict while runs of the build wait or run: their jobs name the earlier tarball.
    """
    active = build.runs.filter(status__in=Run.ACTIVE_STATES)
    if build.pk is not None and active.exists():
        raise Conflict(
            f"build {build.pk} has queued or running runs that build its current source: "
            "wait for them or cancel them, or add a new build for this tarball"
        )
    sha256 = _write_file(upload)
    with transaction.atomic():
        SourceUpload.objects.filter(build=build).delete()
        kept = SourceUpload.objects.create(
            build=build,
            sha256=sha256,
            size=upload.size or 0,
            created_by=user,
        )
        source = {"kind": "upload", "location": sha256, "ref": None}
        build.definition = {**EMPTY_DEFINITION, **build.definition, "source": source}
        build.save(update_fields=["definition"])
    logger.info("build %s: source tarball %s uploaded (%s bytes)", build.pk, sha256, kept.size)
    return kept


def _write_file(upload: "UploadedFile[bytes]") -> str:
    """Write the upload to SOURCE_UPLOAD_DIR (complete or not at all); its sha256."""
    directory = Path(settings.SOURCE_UPLOAD_DIR)
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha256()
    handle, partial = tempfile.mkstemp(dir=directory, prefix=".upload-")
    try:
        with os.fdopen(handle, "wb") as out:
            upload.seek(0)
            for chunk in upload.chunks(CHUNK):
                digest.update(chunk)
                out.write(chunk)
        os.replace(partial, upload_path(digest.hexdigest()))
    except BaseException:
        Path(partial).unlink(missing_ok=True)
        raise
    return digest.hexdigest()


def upload_digest(upload: "UploadedFile[bytes]") -> str:
    """The sha256 of an upload's bytes (the name it is kept and sent under)."""
    digest = hashlib.sha256()
    upload.seek(0)
    for chunk in upload.chunks(CHUNK):
        digest.update(chunk)
    upload.seek(0)
    return digest.hexdigest()


def build_source_upload(
    build: PgBuild, upload: "UploadedFile[bytes] | None", user: User | None
) -> PgBuild:
    """Make an uploaded tarball the source of a source build (the API's upload)."""
    if build.source != PgBuild.Source.BUILD:
        raise JobError("invalid_spec", 'only a build with source "build" takes a tarball', "source")
    source_upload_store(build, source_upload_check(upload, user, replacing=build), user)
    return build


def source_upload_ready(spec: JobSpec) -> None:
    """Put the tarball a job builds where its agent reads it (Redis), before the job is sent.

    The copy expires SOURCE_UPLOAD_READY_HOURS after the last job that needed it was
    sent; JobError on `postgres.build.source` when the lab no longer has the tarball.
    """
    build = spec.get("postgres", {}).get("build")  # tests dispatch partial specs
    if build is None or build["source"]["kind"] != "upload":
        return
    sha256 = build["source"]["location"]
    expiry_s = settings.SOURCE_UPLOAD_READY_HOURS * 3600
    if transport.refresh_source_upload(sha256, expiry_s):
        return
    try:
        data = upload_path(sha256).read_bytes()
    except FileNotFoundError as error:
        raise JobError(
            "invalid_spec",
            f"the lab no longer has the uploaded source {sha256}: upload the tarball again",
            field="postgres.build.source",
        ) from error
    transport.store_source_upload(sha256, data, expiry_s)


@receiver(post_delete, sender=SourceUpload)
def _remove_unused_file(sender: type[Model], instance: SourceUpload, **kwargs: object) -> None:
    """Once the deleting transaction commits: the file and its Redis copy, unless another
    build's upload is the same tarball."""

    def remove() -> None:
        if SourceUpload.objects.filter(sha256=instance.sha256).exists():
            return
        upload_path(instance.sha256).unlink(missing_ok=True)
        transport.forget_source_upload(instance.sha256)
        logger.info("source tarball %s deleted with its last build", instance.sha256)

    transaction.on_commit(remove)
