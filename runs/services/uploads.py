"""Source tarballs uploaded to the lab for source builds.

The lab keeps an upload in Redis under its sha256 (agents reach only Redis),
and the build's source becomes `{"kind": "upload", "location": <sha256>}`.
An agent builds it only when its local config lists `upload` among its build
sources, and checks the digest before it unpacks anything.
"""

import hashlib
import tarfile

from django.core.files.uploadedfile import UploadedFile

from agents.contract.errors import JobError
from runs import transport
from runs.models import PgBuild

MAX_UPLOAD_BYTES = 512 * 1024 * 1024
EMPTY_DEFINITION: dict[str, object] = {"configure_flags": [], "patches": [], "cflags": None}


def _refused(message: str) -> JobError:
    return JobError("invalid_spec", message, field="file")


def source_upload_store(upload: UploadedFile | None) -> str:
    """Keep an uploaded release tarball (with `configure` at its top); its sha256."""
    if upload is None:
        raise _refused("send the source tarball as the multipart field `file`")
    if upload.size is None or upload.size > MAX_UPLOAD_BYTES:
        raise _refused(f"a source tarball may have at most {MAX_UPLOAD_BYTES // 2**20} MB")
    upload.seek(0)
    try:
        with tarfile.open(fileobj=upload, mode="r:*") as archive:
            names = archive.getnames()
    except (tarfile.TarError, EOFError) as error:
        raise _refused(f"not a readable tarball: {error}") from error
    if not any(name.count("/") == 1 and name.endswith("/configure") for name in names):
        raise _refused("the tarball has no configure at its top: upload a release tarball")
    upload.seek(0)
    data = upload.read()
    sha256 = hashlib.sha256(data).hexdigest()
    transport.store_source_upload(sha256, data)
    return sha256


def build_source_upload(build: PgBuild, upload: UploadedFile | None) -> PgBuild:
    """Make an uploaded tarball the source of a source build."""
    if build.source != PgBuild.Source.BUILD:
        raise JobError("invalid_spec", 'only a build with source "build" takes a tarball', "source")
    sha256 = source_upload_store(upload)
    source = {"kind": "upload", "location": sha256, "ref": None}
    build.definition = {**EMPTY_DEFINITION, **build.definition, "source": source}
    build.save(update_fields=["definition"])
    return build
