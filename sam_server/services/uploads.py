"""Uploads of projects and data sets: chunks checked and counted against the tenant's storage,
manifests checked against the limits (docs/projects.md).

A client asks which of its chunks the tenant lacks (`missing_chunks`), sends those
(`store_chunk`, each checked against its SHA-256), then commits the manifest: a project
(`commit_project`, which a job then names in `spec.project`) or a data set (datasets_store.py).
An interrupted upload resumes where it stopped: the chunks already sent are not missing.
"""

from __future__ import annotations

import hashlib
import os
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sqlalchemy.orm import Session

from sam_server.config import Settings
from sam_server.errors import InvalidSpec, NotFound, PayloadTooLarge
from sam_server.services.storage_count import (
    blob_store,
    count_storage,
    gib,
    limit_source,
    over_storage,
    storage_limit,
)
from sam_server.services.storage_gc import collect_tenant
from sam_server.storage.blobs import (
    DIGEST,
    BlobError,
    BlobStore,
    FileEntry,
    manifest_bytes,
)
from sam_server.storage.layout import tenant_project_dir

MAX_PATH_CHARS = 1024


def missing_chunks(
    session: Session, settings: Settings, tenant: str, tenant_id: int, chunks: list[Any]
) -> dict[str, Any]:
    """Which of `chunks` ([{sha256, size}]) the tenant has not stored, and whether they fit in
    its storage (a 413 now rather than after gigabytes were sent)."""
    sizes = {chunk.sha256: chunk.size for chunk in chunks}
    if any(size > settings.storage.upload_chunk_bytes for size in sizes.values()):
        # cut for another chunk size: the client cuts again with this one (chunk_bytes)
        return {
            "missing": list(sizes),
            "missing_bytes": 0,
            "chunk_bytes": settings.storage.upload_chunk_bytes,
        }
    store = blob_store(settings)
    with store.lock(tenant, exclusive=False):  # claimed: not freed before the commit
        have = store.claim_chunks(tenant, sizes)
    missing = [d for d in sizes if d not in have]
    adding = sum(sizes[d] for d in missing)
    used, limit = storage_limit(session, settings, tenant_id)
    if used + adding > limit:
        # Project versions whose jobs have all ended go first, however recent, then ask again.
        collect_tenant(session, settings, tenant, tenant_id, retention_s=0)
        used, limit = storage_limit(session, settings, tenant_id)
    if used + adding > limit:
        raise over_storage(used, adding, limit, limit_source(session, tenant_id))
    return {
        "missing": missing,
        "missing_bytes": adding,
        "chunk_bytes": settings.storage.upload_chunk_bytes,
    }


class IncomingChunk:
    """A chunk's body as it arrives: written to a file of the tenant's staging folder and hashed
    on the way, piece by piece (never whole in memory, never copied to be joined), then moved
    into the store by `store_chunk`."""

    def __init__(self, settings: Settings, tenant: str, digest: str) -> None:
        if not DIGEST.match(digest):
            raise InvalidSpec(f"{digest!r} is not a lowercase hex SHA-256 digest")
        self.digest = digest
        self.limit = settings.storage.upload_chunk_bytes
        self.size = 0
        self.hash = hashlib.sha256()
        self.path = blob_store(settings).staging(tenant) / f"{digest}.{uuid.uuid4().hex}"
        self.fd: int | None = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)

    def write(self, piece: bytes) -> None:
        self.size += len(piece)
        if self.size > self.limit:
            raise PayloadTooLarge(
                f"a chunk of more than {self.limit} bytes is over SAM_UPLOAD_CHUNK_BYTES="
                f"{self.limit}; split files into chunks of at most that"
            )
        self.hash.update(piece)
        view = memoryview(piece)
        while view:
            assert self.fd is not None
            view = view[os.write(self.fd, view) :]

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None

    def discard(self) -> None:
        """Forget the received file (moved into the store or refused)."""
        self.close()
        self.path.unlink(missing_ok=True)


def store_chunk(
    session: Session, settings: Settings, tenant: str, tenant_id: int, incoming: IncomingChunk
) -> dict[str, Any]:
    """Store one received chunk after checking its SHA-256; counted once per tenant."""
    incoming.close()
    digest = incoming.digest
    actual = incoming.hash.hexdigest()
    if actual != digest:
        raise InvalidSpec(
            f"the chunk's SHA-256 is {actual}, not {digest}: it was altered on the way; send it "
            "again"
        )
    store = blob_store(settings)
    with store.lock(tenant, exclusive=False):  # not freed between this check and the commit
        if store.claim_chunks(tenant, [digest]):
            return {"sha256": digest, "stored": False}
        count_storage(session, settings, tenant_id, incoming.size)
        # Committed before the chunk is moved in: the tenant's row stays locked for one UPDATE
        # (on SQLite that lock is the database's). Bytes counted for a chunk that is then not
        # stored are given back.
        session.commit()
        try:
            stored = store.put_chunk_file(tenant, digest, incoming.path)
        except BaseException:
            count_storage(session, settings, tenant_id, -incoming.size)
            session.commit()
            raise
        if not stored:  # a concurrent upload stored it first
            count_storage(session, settings, tenant_id, -incoming.size)
            return {"sha256": digest, "stored": False}
    return {"sha256": digest, "stored": True}


def plain_path(path: str) -> bool:
    """A relative '/'-separated path with no '..', '.', empty part, backslash or NUL."""
    if not path or len(path) > MAX_PATH_CHARS or "\\" in path or "\x00" in path:
        return False
    if path.startswith("/"):
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


@dataclass(frozen=True)
class Manifest:
    digest: str
    files: list[FileEntry]
    total_bytes: int

    def view(self) -> dict[str, Any]:
        return {"digest": self.digest, "files": len(self.files), "bytes": self.total_bytes}


def check_manifest(
    settings: Settings, tenant: str, rows: list[Any], *, what: str, max_total: int | None
) -> Manifest:
    """The manifest's files, checked: plain unique paths, sizes within the limits, every chunk
    stored for this tenant and adding up to its file's size; 413/422 naming what is wrong."""
    if len(rows) > settings.storage.max_project_files:
        raise PayloadTooLarge(
            f"{what}: {len(rows)} files, over the limit SAM_MAX_PROJECT_FILES="
            f"{settings.storage.max_project_files}; leave some out (.samignore) or make a data set"
        )
    files: list[FileEntry] = []
    seen: set[str] = set()
    total = 0
    for row in rows:
        entry = FileEntry(row.path, row.size, row.sha256, tuple(row.chunks))
        if not plain_path(entry.path):
            raise InvalidSpec(f"{what}: {entry.path!r} is not a plain relative path")
        if entry.path in seen:
            raise InvalidSpec(f"{what}: {entry.path!r} is listed twice")
        seen.add(entry.path)
        if entry.size > settings.storage.max_file_bytes:
            raise PayloadTooLarge(
                f"{what}: {entry.path} is {entry.size} bytes ({gib(entry.size)}), over the "
                f"limit SAM_MAX_FILE_BYTES={settings.storage.max_file_bytes} ({gib(settings.storage.max_file_bytes)})"
            )
        total += entry.size
        files.append(entry)
    for entry in files:  # a file cannot also be a folder of another's path
        parts = entry.path.split("/")
        for i in range(1, len(parts)):
            if "/".join(parts[:i]) in seen:
                raise InvalidSpec(f"{what}: {'/'.join(parts[:i])!r} is both a file and a folder")
    if max_total is not None and total > max_total:
        raise PayloadTooLarge(
            f"{what}: {total} bytes ({gib(total)}), over the limit SAM_MAX_PROJECT_BYTES="
            f"{max_total} ({gib(max_total)}); put big data in a data set (`sam data put`) "
            "and leave it out of the project (.samignore)"
        )
    _check_chunks(settings, tenant, files, what)
    digest = hashlib.sha256(manifest_bytes(files)).hexdigest()
    return Manifest(digest, sorted(files, key=lambda f: f.path), total)


def _check_chunks(settings: Settings, tenant: str, files: list[FileEntry], what: str) -> None:
    wanted = {c for f in files for c in f.chunks}
    have = blob_store(settings).claim_chunks(tenant, wanted)
    for entry in files:
        expected = -(-entry.size // settings.storage.upload_chunk_bytes)
        if len(entry.chunks) != expected:
            raise InvalidSpec(
                f"{what}: {entry.path} has {len(entry.chunks)} chunks; {entry.size} bytes in "
                f"chunks of {settings.storage.upload_chunk_bytes} make {expected}"
            )
        lost = [c for c in entry.chunks if c not in have]
        if lost:
            raise InvalidSpec(
                f"{what}: {entry.path}: {len(lost)} of its chunks were not uploaded (first "
                f"{lost[0][:12]}); upload them first (`sam submit` does)"
            )
        if sum(have[c] for c in entry.chunks) != entry.size:
            raise InvalidSpec(f"{what}: {entry.path}: its chunks do not add up to {entry.size}")


def commit_project(settings: Settings, tenant: str, rows: list[Any]) -> dict[str, Any]:
    """Store a project's manifest and build its read-only tree; `{digest, files, bytes}`.

    An unchanged project (its manifest already stored) costs a stat: nothing is built again,
    and the version is claimed anew (its retention starts again)."""
    store = blob_store(settings)
    with store.lock(tenant, exclusive=False):  # checked, built and stored before any collection
        manifest = check_manifest(
            settings, tenant, rows, what="project", max_total=settings.storage.max_project_bytes
        )
        _store_project(settings, store, tenant, manifest)
    return manifest.view()


def _store_project(settings: Settings, store: BlobStore, tenant: str, manifest: Manifest) -> None:
    if store.claim_manifest(tenant, manifest.digest):
        return
    target = tenant_project_dir(settings.data_dir, tenant, manifest.digest)
    try:
        store.materialize(tenant, manifest.files, target)
    except BlobError as exc:
        raise InvalidSpec(f"project: {exc}") from None
    store.put_manifest(tenant, manifest.digest, manifest_bytes(manifest.files))


def project_files(settings: Settings, tenant: str, digest: str) -> list[FileEntry]:
    """The files of the tenant's project `digest`; 422 when the tenant has none such (another
    tenant's project is unknown, like one that was never uploaded)."""
    files = blob_store(settings).read_manifest(tenant, digest) if DIGEST.match(digest) else None
    if files is None:
        message = f"no uploaded project {digest[:12]} for your tenant; `sam submit` uploads it"
        raise InvalidSpec(
            f"project: {message}", errors=[{"field": "spec.project", "message": message}]
        )
    return files


def check_project_files(
    settings: Settings, tenant: str, digest: str, files: dict[str, str]
) -> None:
    """The project is stored, and claimed for the job about to be written (collection keeps it
    from now on: services/storage_gc.py); the files sent as text with the job are its own."""
    store = blob_store(settings)
    with store.lock(tenant, exclusive=False):
        if DIGEST.match(digest):
            store.claim_manifest(tenant, digest)
        entries = {f.path: f.sha256 for f in project_files(settings, tenant, digest)}
    for name, text in files.items():
        wanted = entries.get(name)
        if wanted is None:
            raise InvalidSpec(f"files.{name}: not a file of the job's project {digest[:12]}")
        if hashlib.sha256(text.encode()).hexdigest() != wanted:
            raise InvalidSpec(f"files.{name}: differs from the project's {name}; submit again")


def project_dir(settings: Settings, tenant: str, digest: str) -> Path:
    """The project's read-only tree on this machine (built from the store when missing)."""
    files = project_files(settings, tenant, digest)
    target = tenant_project_dir(settings.data_dir, tenant, digest)
    try:
        return blob_store(settings).materialize(tenant, files, target)
    except BlobError as exc:
        raise NotFound(f"project {digest[:12]}: {exc}") from None
